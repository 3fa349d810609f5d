"""The whole Wan DiT (:mod:`svgtpu.model.dit`) at parity with diffusers' ``WanTransformer3DModel``, and the checkpoint
loader (:mod:`svgtpu.model.weights`).

The fixtures (tests/data/wan/, made by scripts/make_wan_fixtures.py with diffusers itself; versions and seed in
fixtures.json) hold tiny random diffusers models' state dicts, inputs and outputs: no torch here.  Each is loaded by
our loader and run by our forward in float32; the negative controls show the comparison fails when the model
departs from Wan in one place (exact GELU, no RoPE, no q/k RMSNorm, LayerNorm eps 1e-5).
"""

import dataclasses
import gzip
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from safetensors.numpy import save_file

from svgtpu.cli import main
from svgtpu.errors import BadInput
from svgtpu.facts.tables import FIT_WIDTH
from svgtpu.model import wan, weights
from svgtpu.models import MODELS
from svgtpu.model.dit import WanDiT

DATA = Path(__file__).parent / "data" / "wan"
MANIFEST = json.loads((DATA / "fixtures.json").read_text())
#: float32 parity, absolute (every fixture's output is of order 1)
TOLERANCE = 1e-4


def run(name: str, change=lambda config: config) -> float:
    """Largest |ours - diffusers'| on fixture ``name``, our config passed through ``change``; self-attention through
    a function that records each call (the backends' interface), checked to be called once per layer."""
    config, params = weights.load(DATA / f"{name}.safetensors", MANIFEST["fixtures"][name]["config"])
    io = np.load(DATA / f"{name}.npz")
    image = io["encoder_hidden_states_image"] if "encoder_hidden_states_image" in io else None
    dit, calls = WanDiT(change(config)), []

    def attention(q, k, v, *, layer, step, num_steps, num_layers, key):
        calls.append((layer, step, num_steps, num_layers))
        return wan.dense_attention(q, k, v), jnp.asarray(layer)
    # a fresh function to jit each time: a patched GELU or RoPE is traced again
    out, infos = jax.jit(lambda *args: dit(*args, attention=attention, step=3, num_steps=8, with_info=True))(
        params, io["hidden_states"], io["timestep"], io["encoder_hidden_states"], image)
    assert calls == [(i, 3, 8, config.layers) for i in range(config.layers)] and list(map(int, infos)) == [*range(
        config.layers)]
    return float(np.abs(np.asarray(out) - io["output"]).max())


@pytest.mark.parametrize("name", ["t2v", "i2v", "ti2v", "eps"])
def test_forward_matches_diffusers(name):
    error = run(name)
    print(f"{name}: seed {MANIFEST['seed']}, diffusers {MANIFEST['diffusers']}, torch {MANIFEST['torch']}: "
          f"max |ours - diffusers'| = {error:.2e}")
    assert error <= TOLERANCE


def _exact_gelu(monkeypatch):
    gelu = jax.nn.gelu
    monkeypatch.setattr(jax.nn, "gelu", lambda x, approximate=True: gelu(x, approximate=False))


#: One departure from Wan each, the fixture that shows it, and the error measured (every one far past the tolerance;
#: eps on the fixture whose first LayerNorm sees a variance near its eps).
DEPARTURES = {
    "exact GELU": ("t2v", _exact_gelu, None, 4.6e-4),
    "no RoPE": ("t2v", lambda m: m.setattr(wan, "apply_rope", lambda x, angles: x), None, 0.11),
    "no q/k RMSNorm": ("t2v", None, lambda c: dataclasses.replace(c, qk_norm=None, cross_qk_norm=False), 0.15),
    "LayerNorm eps 1e-5": ("eps", None, lambda c: dataclasses.replace(c, eps=1e-5), 0.19),
}


@pytest.mark.parametrize("departure", DEPARTURES)
def test_the_comparison_fails_on_a_departure_from_wan(departure, monkeypatch):
    name, patch, change, measured = DEPARTURES[departure]
    if patch is not None:
        patch(monkeypatch)
    error = run(name, change or (lambda c: c))
    print(f"{departure} on {name}: max |ours - diffusers'| = {error:.2e}")
    assert error > 2 * TOLERANCE and error == pytest.approx(measured, rel=0.1)


def test_inputs_are_checked():
    config, params = weights.load(DATA / "t2v.safetensors", MANIFEST["fixtures"]["t2v"]["config"])
    io = np.load(DATA / "t2v.npz")
    dit, latent, t, text = WanDiT(config), io["hidden_states"], io["timestep"], io["encoder_hidden_states"]
    with pytest.raises(BadInput, match="multiples of the patch"):
        dit(params, latent[..., :7], t, text)
    with pytest.raises(BadInput, match="4 channels"):
        dit(params, latent[:, :3], t, text)
    with pytest.raises(BadInput, match="timesteps must be"):
        dit(params, latent, np.zeros((2, 5)), text)
    with pytest.raises(BadInput, match="image states"):
        dit(params, latent, t, text, np.zeros((2, 5, 12)))


# -- the loader -------------------------------------------------------------------------------------------------------

#: diffusers' names -> Wan's own (wan/modules/model.py), written out here apart from the loader's table
TO_WAN = [("condition_embedder.time_embedder.linear_1", "time_embedding.0"),
          ("condition_embedder.time_embedder.linear_2", "time_embedding.2"),
          ("condition_embedder.text_embedder.linear_1", "text_embedding.0"),
          ("condition_embedder.text_embedder.linear_2", "text_embedding.2"),
          ("condition_embedder.time_proj", "time_projection.1"), ("condition_embedder.image_embedder.norm1",
                                                                  "img_emb.proj.0"),
          ("condition_embedder.image_embedder.ff.net.0.proj", "img_emb.proj.1"),
          ("condition_embedder.image_embedder.ff.net.2", "img_emb.proj.3"),
          ("condition_embedder.image_embedder.norm2", "img_emb.proj.4"), ("attn1.to_out.0", "self_attn.o"),
          ("attn2.to_out.0", "cross_attn.o"), ("attn1.to_", "self_attn."), ("attn2.to_", "cross_attn."),
          ("attn1.norm_", "self_attn.norm_"), ("attn2.norm_added_k", "cross_attn.norm_k_img"),
          ("attn2.norm_", "cross_attn.norm_"), ("attn2.add_k_proj", "cross_attn.k_img"),
          ("attn2.add_v_proj", "cross_attn.v_img"), ("ffn.net.0.proj", "ffn.0"), ("ffn.net.2", "ffn.2"),
          (".norm2.", ".norm3."), ("proj_out", "head.head")]


def wan_name(name: str) -> str:
    if name == "scale_shift_table":
        return "head.modulation"
    for old, new in TO_WAN:
        name = name.replace(old, new)
    return name.replace("scale_shift_table", "modulation")


def test_wan_names_and_shards_load_as_diffusers_names_do(tmp_path):
    tensors = weights.read_tensors(DATA / "i2v.safetensors")
    config = MANIFEST["fixtures"]["i2v"]["config"]
    save_file({"model.diffusion_model." + wan_name(k): v for k, v in tensors.items()}, tmp_path / "wan.safetensors")
    names = sorted(tensors)
    (tmp_path / "shards").mkdir()
    for part in range(2):
        save_file({k: tensors[k] for k in names[part::2]}, tmp_path / "shards" / f"part-{part}.safetensors")
    _, want = weights.load(DATA / "i2v.safetensors", config)
    for path in (tmp_path / "wan.safetensors", tmp_path / "shards"):
        got_config, got = weights.load(path, config)
        assert got_config.image_dim == 12 and got_config.out_channels == 4 and got_config.in_channels == 8
        jax.tree.map(np.testing.assert_array_equal, got, want)
    assert weights.check(tmp_path / "wan.safetensors", config)[1] == "wan"


def test_a_published_shape_loads_as_the_config_the_compiled_block_runs():
    """Shapes alone (no data): each published model's tensors read back as that very config object; Wan 2.2 A14B's
    experts have Wan 2.1 14B's shape, so read as it."""
    for name, config in MODELS.items():
        shapes = weights.expected_shapes(config)
        found = weights.infer_config(shapes)
        assert found is MODELS["wan2.1-14b" if name == "wan2.2-a14b" else name]
        weights.check_tensors(shapes, found)
    from svgtpu.compiler.wan_block import BlockJob
    from svgtpu.setting import Setting
    assert BlockJob(Setting(model="wan2.1-14b")).config is MODELS["wan2.1-14b"]
    assert weights.infer_config(weights.expected_shapes(MODELS["wan2.1-14b"]) | {
        "patch_embedding.weight": (5120, 36, 1, 2, 2)}).name == "loaded"


def test_published_wans_as_diffusers_builds_them_read_as_our_configs():
    """The tensor shapes diffusers gives published Wans (made on torch's meta device by scripts/make_wan_fixtures.py):
    each is exactly the tensors our loader expects, and the T2V ones read as our published config objects."""
    published = json.loads(gzip.decompress((DATA / "published_shapes.json.gz").read_bytes()))
    ours = {"wan2.1-t2v-14b": "wan2.1-14b", "wan2.1-t2v-1.3b": "wan2.1-1.3b", "wan2.2-ti2v-5b": "wan2.2-5b"}
    for name, entry in published.items():
        shapes = {k: tuple(v) for k, v in entry["shapes"].items()}
        config = weights.infer_config(shapes, entry["config"])
        weights.check_tensors(shapes, config)
        assert config is MODELS[ours[name]] if name in ours else (config.image_dim, config.in_channels) == (1280, 36)


def test_loader_refuses_a_bad_file_in_one_line(tmp_path, capsys):
    tensors = weights.read_tensors(DATA / "t2v.safetensors")
    config_json = tmp_path / "config.json"
    config_json.write_text(json.dumps(MANIFEST["fixtures"]["t2v"]["config"]))
    good = tmp_path / "good.safetensors"
    save_file(tensors, good)
    assert main(["weights", str(good), "--config", str(config_json)]) == 0
    table = capsys.readouterr().out
    assert "no published Wan's shape" in table and max(len(line) for line in table.splitlines()[1:]) <= FIT_WIDTH
    assert main(["weights", str(good), "--config", str(config_json), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["tensors"] == len(tensors) and result["parameters"] == MANIFEST["fixtures"]["t2v"]["parameters"]
    assert result["naming"] == "diffusers" and not result["published"] and result["config"]["layers"] == 2

    missing = dict(tensors)
    missing.pop("blocks.1.attn2.norm_k.weight")
    extra = tensors | {"blocks.0.attn1.alpha": np.zeros(1, np.float32)}
    misshaped = tensors | {"blocks.1.ffn.net.2.weight": tensors["blocks.1.ffn.net.2.weight"][:, :40]}
    data = good.read_bytes()
    cases = {"missing": (missing, "missing tensor 'blocks.1.attn2.norm_k.weight'"),
             "extra": (extra, "unexpected tensor 'blocks.0.attn1.alpha'"),
             "misshaped": (misshaped, r"tensor 'blocks.1.ffn.net.2.weight' has shape \[32, 40\]"),
             "truncated": (data[:-100], "not a readable safetensors file"),
             "corrupted": (b"\xff" * 8 + data[8:], "not a readable safetensors file")}
    for case, (content, message) in cases.items():
        path = tmp_path / f"{case}.safetensors"
        save_file(content, path) if isinstance(content, dict) else path.write_bytes(content)
        with pytest.raises(BadInput, match=message):
            weights.load(path, MANIFEST["fixtures"]["t2v"]["config"])
        assert main(["weights", str(path), "--config", str(config_json)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, (case, err)
    assert main(["weights", str(good)]) == 2   # 32 wide: no heads of 128 without its config.json
    assert "config.json" in capsys.readouterr().err
