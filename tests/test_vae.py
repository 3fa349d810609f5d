"""Wan 2.1's VAE decoder in JAX (svgtpu.model.vae): shapes, causality, the chunked decode against the whole clip at
once, and its operations' FLOPs against the cost model's hand count (svgtpu.costmodel.stages)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from svgtpu.costmodel import stages
from svgtpu.geometry import VideoGeometry
from svgtpu.model import vae
from svgtpu.models import WAN21_VAE, VAEConfig

SEED = 61
SMALL = VAEConfig(base=8)            # Wan's structure at a twelfth of its widths: seconds on a CPU


def _latent(T, h, w, seed=SEED):
    print(f"seed {seed}")
    return jax.random.normal(jax.random.key(seed), (1, T, h, w, SMALL.z), jnp.float32)


@pytest.fixture(scope="module")
def small():
    params = vae.init_decoder(jax.random.key(SEED), SMALL)
    return params, jax.jit(lambda p, z: vae.decode(p, z, SMALL))


@pytest.mark.system   # decoding runs (CPU compiles of every chunk): the system tier; make test keeps the FLOP count
def test_decode_shapes_and_causality(small):
    params, decode = small
    z = _latent(3, 3, 5)                                   # odd sizes: no tile multiple anywhere
    out = np.asarray(decode(params, z))
    assert out.shape == (1, 1 + 4 * 2, 24, 40, 3) and np.isfinite(out).all()
    later = np.asarray(decode(params, z.at[:, 2].multiply(-3.0)))
    # latent frame 2 decodes to pixel frames 5..8; the frames before it cannot see it (a causal VAE)
    np.testing.assert_array_equal(out[:, :5], later[:, :5])
    assert np.abs(out[:, 5:] - later[:, 5:]).max() > 1e-3


@pytest.mark.system
def test_chunked_decode_matches_the_whole_clip_at_once():
    # without temporal upsampling every chunk is alike: frame by frame with the caches must equal every frame at
    # once with zeros before the first (the causal convolutions' padding), which shares no cache code path
    config = VAEConfig(base=8, temporal_up=(False, False, False))
    params = vae.init_decoder(jax.random.key(SEED + 1), config)
    z = _latent(4, 2, 3, SEED + 1)
    chunked = vae.decode(params, z, config)
    whole, _ = vae.decode_chunk(params, z, None, first=True, config=config)
    np.testing.assert_allclose(np.asarray(chunked), np.asarray(whole), rtol=2e-4, atol=2e-5)


def _flops(jaxpr, times=1) -> float:
    """Matmul FLOPs of a jaxpr's convolutions and dot products (2 x output elements x contracted size), nested
    ones included (a scan's body times its length), read from the traced operations' own shapes."""
    total = 0.0
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "conv_general_dilated":
            w = eqn.invars[1].aval.shape                     # DHWIO
            total += times * 2.0 * math.prod(eqn.outvars[0].aval.shape) * math.prod(w[:-1])
        elif name == "dot_general":
            (lhs_c, _), _ = eqn.params["dimension_numbers"]
            contracted = math.prod(eqn.invars[0].aval.shape[d] for d in lhs_c)
            total += times * 2.0 * math.prod(eqn.outvars[0].aval.shape) * contracted
        length = eqn.params.get("length", 1) if name == "scan" else 1
        for value in eqn.params.values():
            for sub in value if isinstance(value, (list, tuple)) else [value]:
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    total += _flops(inner, times * length)
    return total


@pytest.mark.parametrize("grid", [(3, 2, 3), (2, 3, 1)])
def test_decoder_flops_match_the_cost_models_count(grid):
    """The cost model counts the decoder layer by layer from Wan's structure (stages.vae_decoder_layers); the JAX
    decoder, traced at Wan's full widths (nothing runs), must do exactly that many matmul FLOPs."""
    g = VideoGeometry(*grid)
    params = jax.eval_shape(lambda: vae.init_decoder(jax.random.key(0), WAN21_VAE))
    z = jax.ShapeDtypeStruct((1, g.T, 2 * g.H, 2 * g.W, WAN21_VAE.z), jnp.float32)
    traced = jax.make_jaxpr(lambda p, x: vae.decode(p, x))(params, z)
    assert _flops(traced.jaxpr) == pytest.approx(stages.vae_decode_flops(g), rel=1e-12)


def test_attention_query_blocks_divide_the_frame():
    assert vae._query_rows(180, 320) == 20 and vae._query_rows(90, 160) == 45   # 1440p, 720p latents
    assert vae._query_rows(7, 10_000) == 1                                    # a row over the budget: one row


def test_committed_decode_records_sit_between_the_mxu_floor_and_the_written_ceiling():
    """Each committed VAE decode record, chunk by chunk, against the layer-by-layer count it was not made from
    (stages.chunk_flops): its static cycles at the chip's clock over those FLOPs at the chip's peak matmul rate lie in
    stages.DECODE_OVER_ROOFLINE (no schedule beats the MXU busy every cycle)."""
    from svgtpu.costmodel.specs import get_device
    from svgtpu.facts.paths import COMPILED_RECORDS
    from svgtpu.geometry import get_geometry
    files = sorted((COMPILED_RECORDS / "vae-decode").glob("*.json.gz"))
    assert files, "no compiled VAE decode record committed"
    low, high = stages.DECODE_OVER_ROOFLINE
    for path in files:
        resolution, device = path.name.split("-")[2:4]          # wan2.1-vae-<resolution>-<device>-<key>.json.gz
        record, device = stages.decode_record(get_geometry(resolution), device), get_device(device)
        flops = stages.chunk_flops(get_geometry(resolution))
        for chunk, value in record["chunks"].items():
            ratio = (value["cycles"] / device.clock_hz) / (flops[chunk] / device.matmul_flops)
            print(path.name, chunk, f"{ratio:.2f}x the FLOPs at peak")
            assert low <= ratio <= high, (path.name, chunk, ratio)


_HLO = """HloModule m

%fused (p: f32[8]) -> f32[8] {
  %p = f32[8]{0} parameter(0)
  ROOT %m = f32[8]{0} multiply(f32[8]{0} %p, f32[8]{0} %p)
}

ENTRY %main (a: f32[8]) -> f32[8] {
  %a = f32[8]{0} parameter(0)
  %f = f32[8]{0} fusion(f32[8]{0} %a), kind=kLoop, calls=%fused
  ROOT %g = f32[8]{0} fusion(f32[8]{0} %f), kind=kLoop, calls=%fused
}
"""


def _dump(folder, word: str):
    """A hand-made dump: a top-level program of 5 bundles calling fusion f (a 3-bundle program) twice and g once
    (g has no program of its own: the same HLO as f), each call written with ``word``."""
    folder.mkdir()
    (folder / "1-TLP-hlo.txt").write_text(_HLO)
    call = "  0x{:x}   :  {{ %{} = " + word + " %s1_s0, %s2_s1 /* %{} = fusion(%a) */ }}"
    tlp = ["  0x0   :  { %s1_s0 = smov 0 }", call.format(1, 10, "f"), call.format(2, 11, "f"),
           call.format(3, 12, "g"), "  0x4   :  {}"]
    (folder / "1-TLP-01-final_bundles.txt").write_text("\n".join(tlp) + "\n")
    (folder / "2-f-01-final_bundles.txt").write_text("\n".join(f"  0x{i:x}   :  {{}}" for i in range(3)) + "\n")
    return folder


def test_out_of_line_calls_read_as_the_inlined_calls_they_replace(tmp_path):
    """A large top-level program calls its ops with ``call`` (the 720p later chunk's 485 calls): rewritten, the dump
    reads as the same program written with ``inlined_call`` does, by hand 3 x 3 fusion cycles + 5 of its own."""
    from svgtpu.compiler.fusions import read_dump
    from svgtpu.compiler.vae_decode import calls_as_inlined
    inlined = read_dump(_dump(tmp_path / "inlined", "inlined_call"))
    out_of_line = _dump(tmp_path / "call", "call")
    assert read_dump(out_of_line)["ops"] == []                      # what the 720p later chunk read as before
    assert calls_as_inlined(out_of_line) == 3 and calls_as_inlined(out_of_line) == 0
    again = read_dump(out_of_line)
    assert again == inlined and again["unmatched"] == []
    assert sum(r["cycles"] for r in again["ops"]) + again["top_level"]["cycles"] == 3 * 3 + 5
