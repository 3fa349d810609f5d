"""Property tests of the input schemas (svgtpu/inputs/): random valid documents pass; random malformed ones (truncated,
a wrong type, an unknown, missing or duplicate key, NaN or infinity, binary bytes) are refused with one line that names
the field or the file, never another exception; through ``svgtpu``'s ``main(argv)``, exit 2, no traceback, nothing
written.  Hypothesis runs derandomized (the same examples every run; ``--hypothesis-seed`` changes them), its examples
bounded so the file takes a few seconds."""

import copy
import json
import math

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from svgtpu.cli import main
from svgtpu.errors import BadInput
from svgtpu.inputs.documents import parse_json
from svgtpu.inputs.predictions import predictions_file
from svgtpu.inputs.records import CompiledTileTable
from svgtpu.inputs.runs import tpu_run
from svgtpu.inputs.schema import validate

FEW = settings(max_examples=25, deadline=None, derandomize=True,
               suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

finite = st.floats(allow_nan=False, allow_infinity=False, width=64, min_value=-1e12, max_value=1e12)
name = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=16)


@st.composite
def pair(draw):
    a, b = draw(finite), draw(finite)
    return [min(a, b), max(a, b)]


measured = st.fixed_dictionaries({"value": finite, "interval": pair()})
tpu_runs = st.fixed_dictionaries(
    {"provenance": name.filter(lambda p: not p.startswith("measured-gpu-")), "chips": st.sampled_from([1, 8]),
     "quantities": st.dictionaries(name, measured, max_size=4)},
    optional={"note": st.text(max_size=20), "smoke": st.booleans(), "commit": st.text(max_size=8),
              "partial": st.booleans(), "budget_s": st.floats(min_value=1, max_value=1e4)})


@st.composite
def prediction(draw):
    lo, hi = draw(pair())
    value = lo + (hi - lo) * draw(st.floats(0, 1))
    return {"value": min(max(value, lo), hi), "interval": [lo, hi], "provenance": draw(name)}


predictions_files = st.fixed_dictionaries(
    {"date": st.dates().map(lambda d: f"{d.year:04d}-{d.month:02d}-{d.day:02d}"), "commit": name,
     "versions": st.dictionaries(name, st.text(max_size=8), max_size=3), "command": name, "note": st.text(max_size=20),
     "interval_rule": name, "claims_now": st.just({}), "claims_measured": st.just({}),
     "quantities": st.dictionaries(st.sampled_from(["v6e-1", "v6e-8"]), st.dictionaries(name, prediction(), min_size=1,
                                                                                         max_size=3), min_size=1)})


@st.composite
def policies(draw):
    """A MaxDiffusion config the policy mode models: windows within the run, densities in (0, 1]."""
    steps = draw(st.integers(2, 60))
    start = draw(st.integers(0, steps - 1))
    doc = {"num_inference_steps": steps, "svg_active_start_step": start,
           "svg_active_end_step": draw(st.integers(start + 1, steps))}
    density = st.floats(min_value=1e-3, max_value=1.0)
    doc |= draw(st.fixed_dictionaries({}, optional={
        "use_svg_attention": st.just(True), "svg_high_noise_density": density, "svg_low_noise_density": density,
        "svg_profile_query_count": st.integers(1, 4096), "svg_include_first_frame": st.booleans(),
        "flow_shift": st.floats(min_value=0.5, max_value=20), "boundary_ratio": st.floats(0, 1),
        "svg_active_start_layer": st.just(1), "svg_active_end_layer": st.integers(2, 40),
        "do_classifier_free_guidance": st.booleans(), "run_name": st.text(max_size=10)}))
    return doc


tile_tables = st.builds(lambda rows: {"probe": [{"device": "v6e", "provenance": "compiled-v6e", "mxus_per_core": 2,
                                                  "mxu_columns": 256, "flops_per_cycle": 1024.0,
                                                  "published_peak_tflops_per_chip": 918.0, "cores_per_chip": 1,
                                                  "clock_ghz": 1.75, "sources": ["a source"]}], "tiles": rows},
                        st.lists(st.fixed_dictionaries(
                            {"device": st.just("v6e"), "kernel": st.sampled_from(["ours", "splash"]),
                             "resolution": st.just("720p"), "L": st.integers(1, 10**6),
                             "block_q": st.integers(1, 4096), "block_kv": st.integers(1, 4096),
                             "head_dim": st.just(128), "dtype": st.just("bfloat16"),
                             "provenance": st.just("compiled-v6e")},
                            optional={"full": st.floats(0, 1e6), "masked": st.none() | st.floats(0, 1e6)}), max_size=3))

# what each schema is, for the malformed documents: (strategy, checker, typed top-level fields)
SCHEMAS = {
    "run": (tpu_runs, lambda d, w: tpu_run(d, w), ("chips", "quantities", "provenance")),
    "predictions": (predictions_files, predictions_file, ("date", "commit", "quantities", "versions")),
    "tile table": (tile_tables, lambda d, w: validate(CompiledTileTable, d, w), ("probe", "tiles")),
}
MALFORMED = ("wrong type", "unknown key", "missing key", "duplicate key", "truncated", "nan", "binary", "not an object")
#: The tile table takes more of a compile's numbers beside the fields read (svgtpu.inputs.records): no unknown key.
OPEN = {"tile table"}
#: A value of a type no field of the schemas takes where another was asked (strict mode: no coercion).
WRONG = {int: "8", float: "fast", str: 1, bool: "true", list: {"a": 1}, dict: [1], type(None): "fast"}


def one_line(error: BadInput, *words) -> str:
    text = str(error)
    assert "\n" not in text and all(w in text for w in words), (text, words)
    return text


@pytest.mark.parametrize("kind", SCHEMAS)
def test_random_valid_documents_pass(kind):
    strategy, check, _ = SCHEMAS[kind]

    @FEW
    @given(strategy)
    def run(doc):
        check(parse_json(json.dumps(doc), "doc"), "doc")
    run()


@pytest.mark.parametrize("kind", SCHEMAS)
def test_malformed_documents_are_refused_in_one_line(kind):
    strategy, check, fields = SCHEMAS[kind]

    @FEW
    @given(strategy, st.sampled_from([m for m in MALFORMED if not (kind in OPEN and m == "unknown key")]),
           st.sampled_from(fields), st.data())
    def run(doc, how, field, data):
        doc = copy.deepcopy(doc)
        if how == "wrong type":
            doc[field] = WRONG[type(doc[field])]
        elif how == "unknown key":
            doc["zz_not_a_field"] = 1
        elif how == "missing key":
            del doc[field]
        elif how == "nan":
            doc[field] = data.draw(st.sampled_from([math.nan, math.inf, -math.inf]))
        text = json.dumps(doc)
        if how == "duplicate key":
            text = "{" + f"{json.dumps(field)}: {json.dumps(doc[field])}, " + text[1:]
        elif how == "truncated":
            text = text[:data.draw(st.integers(1, len(text) - 1))]
        elif how == "not an object":
            text = json.dumps(data.draw(st.sampled_from([[doc], 1, "x", None])))
        with pytest.raises(BadInput) as refused:
            if how == "binary":
                from svgtpu.inputs.documents import read_text
                import tempfile
                with tempfile.NamedTemporaryFile(suffix=".json") as f:
                    f.write(b"\0" + data.draw(st.binary(max_size=40)))
                    f.flush()
                    read_text("--file", f.name)
            check(parse_json(text, "--file f.json"), "--file f.json")
        named = {"wrong type": field, "unknown key": "zz_not_a_field", "missing key": field,
                 "duplicate key": field, "nan": "f.json", "truncated": "f.json", "binary": "binary file",
                 "not an object": "f.json"}[how]
        one_line(refused.value, named)
    run()


def test_random_valid_policies_are_modeled_and_malformed_ones_refused(tmp_path):
    from svgtpu.costmodel.policy import read_yaml

    @FEW
    @given(policies(), st.sampled_from(["valid", "wrong type", "unknown key", "duplicate key", "out of range"]))
    def run(doc, how):
        path = tmp_path / "policy.yml"
        text = yaml.safe_dump(doc)
        key = sorted(doc)[0]
        if how == "wrong type":
            text = yaml.safe_dump(doc | {key: {"a": 1}})
        elif how == "unknown key":
            text += "svg_not_a_key: 1\n"
        elif how == "duplicate key":
            text += f"{key}: {json.dumps(doc[key])}\n"
        elif how == "out of range":
            text = yaml.safe_dump(doc | {"svg_active_end_step": doc["num_inference_steps"] + 1})
            key = "svg_active_end_step"
        path.write_text(text)
        if how == "valid":
            policy, video, _ = read_yaml(path)
            assert policy.steps[1] <= video["num_inference_steps"]
            return
        with pytest.raises(BadInput) as refused:
            read_yaml(path)
        one_line(refused.value, "svg_not_a_key" if how == "unknown key" else key)
    run()


# -- the same through every command that reads a file -----------------------------------------

#: Each command that reads a file the user names, as argv with {} for the file.
READERS = {"predict --against": ["predict", "--against", "{}"], "costmodel --policy": ["costmodel", "--policy", "{}"],
           "costmodel --compiled-tiles": ["costmodel", "--compiled-tiles", "{}"],
           "paper --results": ["paper", "--results", "{}", "{target}"],
           "generate --checkpoint": ["generate", "--checkpoint", "{}", "--steps", "1"],
           "train --init": ["train", "--config", "tiny", "--steps", "1", "--init", "{}"],
           "bench tpu --resume": ["bench", "tpu", "--smoke", "--resume", "{}"]}

junk = st.one_of(st.binary(max_size=64).map(lambda b: b"\0" + b),                  # binary
                 st.just(b""), st.just(b" \n"),                                      # empty
                 st.sampled_from([b'{"chips": ', b"[1, 2]", b'{"a": 1, "a": 2}', b"a: [1, 2\n", b'"a string"',
                                  b"- 1\n", b"\xff\xfe\xfd", b"3.5"]))   # junk to every reader (a policy file
#                                 may hold keys the model does not read, a results file claims it lacks: not these)


@pytest.mark.parametrize("command", READERS)
def test_every_command_that_reads_a_file_refuses_junk_in_one_line(command, tmp_path, capsys):
    target = tmp_path / "target.md"
    target.write_text("<!-- svgtpu:begin environment -->\n<!-- svgtpu:end environment -->\n")

    @settings(max_examples=6, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(junk)
    def run(content):
        path = tmp_path / "input.bin"
        path.write_bytes(content)
        before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
        argv = [a.replace("{}", str(path)).replace("{target}", str(target)) for a in READERS[command]]
        try:
            status = main(argv)
        except SystemExit as exit_:
            status = exit_.code
        out, err = capsys.readouterr()
        assert status == 2 and out == "" and len(err.strip().splitlines()) == 1, (argv, content, status, err)
        assert "Traceback" not in err and str(path) in err, err
        assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before, "something was written"
    run()
