"""Compile records (svgtpu.compiler.dumps.cached): content keys, where records are found and written, the
pruning of unused ones, and one committed record compiled again and compared (figures/compiled/)."""

import json

import pytest

import svgtpu.compiler.dumps as dumps
import svgtpu.facts.paths as paths
from svgtpu.compiler.compile import libtpu_available


@pytest.fixture
def folders(tmp_path, monkeypatch):
    """Empty committed and local record folders, no run folder."""
    committed, local = tmp_path / "figures" / "compiled", tmp_path / "build" / "compiled"
    monkeypatch.setattr(paths, "COMPILED_RECORDS", committed)
    monkeypatch.setattr(paths, "COMPILED_CACHE", local)
    monkeypatch.delenv(dumps.RECORDS_DIR_VAR, raising=False)
    monkeypatch.delenv(dumps.RECORD_LOG_VAR, raising=False)
    return committed, local


def test_a_record_reads_the_same_fresh_and_from_its_file(folders):
    # a fresh compute() holds tuples (a dataclass's fields); JSON brings them back as lists: both calls
    # must give one value, or a comparison passes or fails with the state of build/ (CI of 2026-12-03)
    calls = []
    compute = lambda: calls.append(1) or {"bodies": (872, 872), "name": "x"}  # noqa: E731
    fresh, again = (dumps.cached("v6e", "t", {"shape": [8, 128]}, (), compute) for _ in range(2))
    assert calls == [1]
    assert fresh == again == {"bodies": [872, 872], "name": "x"}
    (written,) = (folders[1] / "v6e").glob("t-*.json.gz")   # outside svgtpu reproduce: build/compiled
    record = dumps.read_record(written)
    assert written.name == f"t-{record['key']}.json.gz" == f"t-{dumps.cache_key({'shape': [8, 128]})}.json.gz"
    assert record["made_of"]["description"] == {"shape": [8, 128]} and record["made_of"]["versions"] == dumps.versions()
    assert not folders[0].exists()


def test_a_committed_record_is_read_and_copied_into_the_run_folder(folders, tmp_path, monkeypatch):
    committed, local = folders
    dumps.cached("v6e", "t", {"n": 1}, (), lambda: {"v": 1})          # into build/compiled
    (made,) = local.rglob("*.json.gz")
    (committed / "v6e").mkdir(parents=True)
    made.rename(committed / "v6e" / made.name)                       # now only the committed copy holds it
    run, log = tmp_path / "run", tmp_path / "used.txt"
    monkeypatch.setenv(dumps.RECORDS_DIR_VAR, str(run))
    monkeypatch.setenv(dumps.RECORD_LOG_VAR, str(log))
    assert dumps.cached("v6e", "t", {"n": 1}, (), lambda: pytest.fail("compiled again")) == {"v": 1}
    assert dumps.cached("v6e", "t", {"n": 2}, (), lambda: {"v": 2}) == {"v": 2}   # a new key: made in the run's folder
    names = sorted(p.relative_to(run).as_posix() for p in run.rglob("*.json.gz"))
    assert names == sorted(log.read_text().split()) and len(names) == 2
    assert (run / "v6e" / made.name).read_bytes() == (committed / "v6e" / made.name).read_bytes()
    assert not list(local.rglob("*.json.gz"))


def test_an_edited_source_changes_the_keys_of_the_records_made_of_it_only(tmp_path, monkeypatch):
    (tmp_path / "kernels").mkdir()
    for name in ("a.py", "b.py"):
        (tmp_path / "kernels" / name).write_text(f"# {name}\n")
    monkeypatch.setattr(dumps, "PACKAGE", tmp_path)
    keys = lambda: [dumps.cache_key({"n": 1}, ("kernels/a.py",)), dumps.cache_key({"n": 1}, ("kernels/b.py",)),  # noqa: E731
                    dumps.cache_key({"n": 1}, ("kernels",))]
    before = keys()
    (tmp_path / "kernels" / "a.py").write_text("# a.py, edited\n")
    after = keys()
    assert [x != y for x, y in zip(before, after)] == [True, False, True]
    assert dumps.made_of({}, ("kernels",))["sources"].keys() == {"kernels/a.py", "kernels/b.py"}


def test_every_committed_record_is_made_of_the_packages_current_sources():
    """Each record under figures/compiled/ names the sha256 of every package file it was built and read from: an
    edit to one of them (a top-level file such as recipes.py or setting.py counts, not only compiler/ and kernels/)
    makes ``make figures`` compile the record again, for an hour, instead of reading it.  Hashed here, file by file,
    independently of the key function, so the edit fails in seconds and names the file."""
    import gzip
    import hashlib
    stale = {}
    records = sorted(paths.COMPILED_RECORDS.rglob("*.json.gz"))
    assert records, "no committed records found"
    for path in records:
        made_of = json.loads(gzip.decompress(path.read_bytes()))["made_of"]
        assert made_of["versions"] == dumps.versions(), f"{path.name}: made with {made_of['versions']}"
        for name, digest in made_of["sources"].items():
            source = dumps.PACKAGE / name
            if not source.exists() or hashlib.sha256(source.read_bytes()).hexdigest()[:16] != digest:
                stale.setdefault(name, []).append(path.relative_to(paths.COMPILED_RECORDS).as_posix())
    assert not stale, ("package files changed since the committed records were made (make evidence remakes them, or "
                       "keep the change out of these files): "
                       + "; ".join(f"svgtpu/{name}: {len(found)} records" for name, found in sorted(stale.items())))


def test_prune_removes_only_the_records_no_run_used(tmp_path):
    for name in ("v6e/a-1.json.gz", "v6e/b-2.json.gz", "wan-block/c-3.json.gz"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}")
    assert dumps.prune(tmp_path, ["v6e/a-1.json.gz", "wan-block/c-3.json.gz"]) == ["v6e/b-2.json.gz"]
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.json.gz")) == ["v6e/a-1.json.gz",
                                                                                              "wan-block/c-3.json.gz"]
    assert dumps.prune(tmp_path / "absent", []) == []


@pytest.mark.system
@pytest.mark.skipif(not libtpu_available(), reason="needs libtpu (the TPU compiler)")
def test_the_committed_record_of_the_production_dense_kernel_compiles_again_the_same():
    # the full-tile body at the production tile, as notebook 04 compiles it (about 20 CPU-s): a record that
    # differs was not made by these sources and versions; a missing one means no run remade the records
    from svgtpu.compiler.variants import Variant, compile_program, program_key, program_name
    from svgtpu.kernels.config import default_block_kv_compute
    from svgtpu.setting import PRODUCTION
    bq, bkv = PRODUCTION.block_q, PRODUCTION.block_kv
    v = Variant("ours", "dense", PRODUCTION.resolution, bq, bkv, default_block_kv_compute(bq, bkv))
    path = paths.COMPILED_RECORDS / dumps.record_file(v.device, program_name(v), program_key(v))
    assert path.exists(), f"no committed record {path.name}: make figures (or make evidence) remakes the records"
    record = dumps.read_record(path)
    compiled = Variant(**record["value"]["variant"])      # the variant of this program compiled first
    assert program_key(compiled) == record["key"]
    assert json.loads(json.dumps(compile_program(compiled))) == record["value"]


def test_a_masks_content_names_its_tiles_where_its_repr_elides_them():
    import numpy as np

    from svgtpu.masks.core import TileMask
    tiles = np.eye(40, dtype=bool)
    other = tiles.copy()
    other[20, 21] = True
    a, b = TileMask(40 * 128, 128, 128, tiles), TileMask(40 * 128, 128, 128, other)
    assert repr(a) == repr(b) and dumps.content_of(a) != dumps.content_of(b)
    assert dumps.content_of(a) == dumps.content_of(TileMask(40 * 128, 128, 128, tiles.copy()))
    assert dumps.content_of(a)["type"] == "TileMask" and dumps.content_of(a)["L"] == 40 * 128
