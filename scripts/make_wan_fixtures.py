"""Make the Wan parity fixtures: tiny random diffusers ``WanTransformer3DModel``s, run once, written to tests/data/wan/.

Run by hand, never by ``make test`` (the tests read only what this writes, and need neither torch nor diffusers)::

    python3 -m venv /tmp/wan-fixtures
    /tmp/wan-fixtures/bin/pip install torch==2.13.0 diffusers==0.42.1 safetensors==0.8.0   # the wan-fixtures extra
    /tmp/wan-fixtures/bin/python scripts/make_wan_fixtures.py

(pyproject.toml's ``wan-fixtures`` extra pins the three; torch's CPU wheel is enough).  Each fixture is a model built
by diffusers itself at a fixed seed, every parameter then moved off its initial value (norm scales off one, biases off
zero, so that a name mapped to the wrong tensor shows), run in float32 on CPU:

- ``t2v``: Wan 2.1 text-to-video, 2 layers, batch 2 at two timesteps, a latent grid 3 x 8 x 10 (L = 60 tokens);
- ``i2v``: Wan 2.1 image-to-video: CLIP-like image tokens through the image embedder, the blocks' added image K/V
  (diffusers splits the context as its last 512 tokens of text: the text is 512 tokens here);
- ``ti2v``: Wan 2.2 TI2V-5B's form: one timestep per token (the first frame's tokens at 0, as its pipeline runs an
  image-conditioned first frame), shift/scale/gate per token;
- ``eps``: the ``t2v`` form, 1 layer, with the patch embedding scaled down so the first LayerNorm sees a variance
  near its eps: the output then moves with the eps (1e-6 against 1e-5), which the other fixtures hardly see.

Each writes ``<name>.safetensors`` (the state dict under diffusers' names, float32) and ``<name>.npz`` (inputs and
output); ``fixtures.json`` holds each model's diffusers config, the seed, shapes and the torch / diffusers versions.
``published_shapes.json.gz``: the tensor shapes of published Wan transformers as diffusers builds them
(:data:`PUBLISHED`), made on torch's meta device (no weights).
"""

from __future__ import annotations

import gzip
import json
import pathlib
import re

import diffusers
import numpy as np
import safetensors.torch
import torch
from diffusers import WanTransformer3DModel

SEED = 65
OUT = pathlib.Path(__file__).resolve().parents[1] / "tests" / "data" / "wan"
#: The tiny shape every fixture shares: 2 heads of 16 channels (RoPE splits 8 / 4 / 4), FFN 48.
TINY = dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=4,
            text_dim=8, freq_dim=16, ffn_dim=48, num_layers=2, cross_attn_norm=True,
            qk_norm="rms_norm_across_heads", eps=1e-6, rope_max_seq_len=64)
#: Published Wan transformers as diffusers builds them (its defaults are Wan 2.1 T2V 14B's); the rest from Wan's
#: configs: Wan-Video/Wan2.1 wan/configs/wan_t2v_1_3B.py and wan_i2v_14B.py (in 36 = 16 noise + 20 condition
#: channels, CLIP ViT-H 1280, added K/V from the width) at 9737cba9c1c3, Wan-Video/Wan2.2 wan/configs/wan_ti2v_5B.py
#: (48-channel VAE, wan/modules/vae2_2.py) at 42bf4cfaa384.  Only their tensors' shapes are written.
PUBLISHED = {"wan2.1-t2v-14b": {},
             "wan2.1-t2v-1.3b": dict(num_attention_heads=12, ffn_dim=8960, num_layers=30),
             "wan2.1-i2v-14b": dict(in_channels=36, image_dim=1280, added_kv_proj_dim=5120),
             "wan2.2-ti2v-5b": dict(num_attention_heads=24, ffn_dim=14336, num_layers=30, in_channels=48,
                                    out_channels=48)}
#: diffusers' I2V attention takes the context's last 512 tokens as text (transformer_wan.py, WanAttnProcessor).
I2V_TEXT_TOKENS = 512


#: The blocks' FFN weights times 3: preactivations of standard deviation about 2, where GELU's tanh form and the exact
#: one differ most (up to 4.7e-4 at 2.7), so that exact GELU moves the output past the tolerance (at 1: 6e-5).
FFN_GAIN = 3.0


def perturb(model: torch.nn.Module, generator: torch.Generator) -> None:
    """Every parameter plus seeded noise of 0.1 x its mean magnitude (0.1 for a vector: norm scales, biases), and
    the blocks' FFN weights times :data:`FFN_GAIN`."""
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            scale = 1.0 if p.ndim == 1 else float(p.abs().mean())
            p.add_(0.1 * scale * torch.randn(p.shape, generator=generator))
            if re.fullmatch(r"blocks\.\d+\.ffn\.net\.(0\.proj|2)\.weight", name):
                p.mul_(FFN_GAIN)


def public(config) -> dict:
    """A diffusers config without its private keys (``_use_default_values`` lists a set, in no fixed order)."""
    return {k: v for k, v in config.items() if not k.startswith("_")}


def make(name: str, config: dict, inputs: dict, generator: torch.Generator, scale_patch: float = 1.0) -> dict:
    torch.manual_seed(SEED)
    model = WanTransformer3DModel(**config).eval()
    perturb(model, generator)
    if scale_patch != 1.0:
        with torch.no_grad():
            model.patch_embedding.weight.mul_(scale_patch)
            model.patch_embedding.bias.mul_(scale_patch)
    with torch.no_grad():
        out = model(**{k: torch.from_numpy(v) for k, v in inputs.items()}, return_dict=False)[0].numpy()
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    safetensors.torch.save_file(state, OUT / f"{name}.safetensors",
                                metadata={"format": "pt", "diffusers": diffusers.__version__,
                                          "torch": torch.__version__})
    np.savez_compressed(OUT / f"{name}.npz", output=out, **inputs)
    print(f"{name}: {sum(v.numel() for v in state.values())} parameters, output {out.shape}, "
          f"|output| max {np.abs(out).max():.3f}")
    return {"config": public(model.config), "inputs": {k: list(v.shape) for k, v in inputs.items()},
            "output": list(out.shape), "parameters": sum(v.numel() for v in state.values())}


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED)
    generator = torch.Generator().manual_seed(SEED)
    normal = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
    F, H, W = 3, 8, 10                                 # latent grid; (1, 2, 2) patches: 3 x 4 x 5 = 60 tokens
    L = F * (H // 2) * (W // 2)
    fixtures = {}
    fixtures["t2v"] = make("t2v", TINY, {"hidden_states": normal(2, 4, F, H, W),
                                         "timestep": np.array([999.0, 312.5], np.float32),
                                         "encoder_hidden_states": normal(2, 7, TINY["text_dim"])}, generator)
    i2v = TINY | dict(in_channels=8, image_dim=12, added_kv_proj_dim=32)
    fixtures["i2v"] = make("i2v", i2v, {"hidden_states": normal(1, 8, F, H, W),
                                        "timestep": np.array([640.0], np.float32),
                                        "encoder_hidden_states": normal(1, I2V_TEXT_TOKENS, TINY["text_dim"]),
                                        "encoder_hidden_states_image": normal(1, 5, 12)}, generator)
    per_token = np.full((1, L), 700.5, np.float32)
    per_token[:, :L // F] = 0.0                        # the first frame's tokens: the conditioning image, t = 0
    fixtures["ti2v"] = make("ti2v", TINY, {"hidden_states": normal(1, 4, F, H, W), "timestep": per_token,
                                           "encoder_hidden_states": normal(1, 7, TINY["text_dim"])}, generator)
    fixtures["eps"] = make("eps", TINY | dict(num_layers=1),
                           {"hidden_states": normal(1, 4, F, H, W), "timestep": np.array([500.0], np.float32),
                            "encoder_hidden_states": normal(1, 7, TINY["text_dim"])}, generator, scale_patch=1e-3)
    shapes = {}
    for name, config in PUBLISHED.items():   # on torch's meta device: the shapes, no memory
        with torch.device("meta"):
            model = WanTransformer3DModel(**config)
        shapes[name] = {"config": public(model.config),
                        "shapes": {k: list(v.shape) for k, v in model.state_dict().items()}}
    (OUT / "published_shapes.json.gz").write_bytes(gzip.compress(json.dumps(shapes).encode(), mtime=0))
    manifest = {"made_by": "scripts/make_wan_fixtures.py", "seed": SEED, "diffusers": diffusers.__version__,
                "torch": torch.__version__, "dtype": "float32", "device": "cpu", "fixtures": fixtures}
    (OUT / "fixtures.json").write_text(json.dumps(manifest, indent=1, default=list) + "\n")


if __name__ == "__main__":
    main()
