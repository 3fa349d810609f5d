"""Wan checkpoints into :class:`~svgtpu.model.dit.WanDiT`'s parameters: safetensors in, no torch, no download.

Two namings are read (a block's ``self_attn`` says Wan's), from one file or a folder of shards:

- **diffusers** (``WanTransformer3DModel``'s state dict, diffusers 0.42 ``transformer_wan.py``):
  ``blocks.N.attn1.to_q``, ``attn2.add_k_proj``, ``ffn.net.0.proj``, ``condition_embedder.time_embedder.linear_1``,
  ``proj_out`` ...;
- **wan** (Wan's own ``WanModel``, ``wan/modules/model.py`` of :data:`~svgtpu.recipes.WAN_REPO` at
  :data:`~svgtpu.recipes.WAN_COMMIT`): ``blocks.N.self_attn.q``, ``cross_attn.k_img``, ``ffn.0``, ``time_embedding.0``,
  ``head.head`` ...; renamed to diffusers' names by :data:`WAN_TO_DIFFUSERS`, the table of diffusers' own converter
  (``convert_wan_transformer_to_diffusers`` in ``diffusers/loaders/single_file_utils.py``, 0.42), Wan's ``norm3``
  (its cross-attention norm) being diffusers' ``norm2``.

Torch's ``Linear`` weight is ``[out, in]``, ours ``[in, out]`` (transposed); the patch embedding's ``Conv3d`` weight
``[dim, C, pt, ph, pw]`` is a Linear on each patch's ``(c, pt, ph, pw)`` values; cross-attention's k and v (and the
image's) are one ``[dim, 2 dim]`` matmul here.  The model's shape is read from the tensors (layers, width, FFN,
channels, patch, text / image / frequency widths); the heads are not in any tensor (Wan's q/k norms span all heads),
so they come from a diffusers ``config.json`` or from Wan's head width of 128, which every published Wan has.  A
shape equal to a published model's (:data:`~svgtpu.models.MODELS`) returns that very config object: the one
the compiled block and the cost model run.  Anything missing, extra or mis-shaped is refused in one line naming it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path

import numpy as np

from svgtpu.errors import BadInput
from svgtpu.models import MODELS, ModelConfig

#: Wan's checkpoint names -> diffusers', applied in order to each name (diffusers 0.42's
#: ``convert_wan_transformer_to_diffusers`` table, the rows for the T2V, I2V and TI2V transformer).
WAN_TO_DIFFUSERS = (
    ("time_embedding.0", "condition_embedder.time_embedder.linear_1"),
    ("time_embedding.2", "condition_embedder.time_embedder.linear_2"),
    ("text_embedding.0", "condition_embedder.text_embedder.linear_1"),
    ("text_embedding.2", "condition_embedder.text_embedder.linear_2"),
    ("time_projection.1", "condition_embedder.time_proj"),
    ("cross_attn", "attn2"), ("self_attn", "attn1"),
    (".o.", ".to_out.0."), (".q.", ".to_q."), (".k.", ".to_k."), (".v.", ".to_v."),
    (".k_img.", ".add_k_proj."), (".v_img.", ".add_v_proj."), (".norm_k_img.", ".norm_added_k."),
    ("head.modulation", "scale_shift_table"), ("head.head", "proj_out"), ("modulation", "scale_shift_table"),
    ("ffn.0", "ffn.net.0.proj"), ("ffn.2", "ffn.net.2"),
    ("norm2", "norm__swap"), ("norm3", "norm2"), ("norm__swap", "norm3"),
    ("img_emb.proj.0", "condition_embedder.image_embedder.norm1"),
    ("img_emb.proj.1", "condition_embedder.image_embedder.ff.net.0.proj"),
    ("img_emb.proj.3", "condition_embedder.image_embedder.ff.net.2"),
    ("img_emb.proj.4", "condition_embedder.image_embedder.norm2"),
)
#: Tensors diffusers itself drops on load (``WanTransformer3DModel._keys_to_ignore_on_load_unexpected``).
IGNORED = re.compile(r"blocks\.\d+\.attn2\.norm_added_q\.weight")
#: Every published Wan's head width (Wan 2.1 14B: 5120 / 40, 1.3B: 1536 / 12; Wan 2.2 5B: 3072 / 24).
WAN_HEAD_DIM = 128

_TOP_LINEARS = {"patch_embed": "patch_embedding", "time_in": "condition_embedder.time_embedder.linear_1",
                "time_out": "condition_embedder.time_embedder.linear_2", "time_proj": "condition_embedder.time_proj",
                "text_in": "condition_embedder.text_embedder.linear_1",
                "text_out": "condition_embedder.text_embedder.linear_2", "head": "proj_out"}
_IMAGE_LINEARS = {"image_in": "condition_embedder.image_embedder.ff.net.0.proj",
                  "image_out": "condition_embedder.image_embedder.ff.net.2"}
_IMAGE_NORMS = {"image_norm_in": "condition_embedder.image_embedder.norm1",
                "image_norm_out": "condition_embedder.image_embedder.norm2"}
#: A block's parameters (:meth:`svgtpu.model.wan.WanBlock.init`) and the diffusers Linears each is made of.
_BLOCK_LINEARS = {"q": ("attn1.to_q",), "k": ("attn1.to_k",), "v": ("attn1.to_v",), "o": ("attn1.to_out.0",),
                  "cross_q": ("attn2.to_q",), "cross_kv": ("attn2.to_k", "attn2.to_v"),
                  "cross_o": ("attn2.to_out.0",), "mlp_in": ("ffn.net.0.proj",), "mlp_out": ("ffn.net.2",),
                  "cross_image_kv": ("attn2.add_k_proj", "attn2.add_v_proj")}
_BLOCK_SCALES = {"q_norm": "attn1.norm_q", "k_norm": "attn1.norm_k", "cross_q_norm": "attn2.norm_q",
                 "cross_k_norm": "attn2.norm_k", "cross_image_k_norm": "attn2.norm_added_k"}


def _files(path: str | Path) -> list[Path]:
    """A safetensors file, or a folder's ``*.safetensors`` (a sharded checkpoint) in name order."""
    path = Path(path)
    files = sorted(path.glob("*.safetensors")) if path.is_dir() else [path]
    if not files or not all(f.is_file() for f in files):
        raise BadInput(f"{path} is neither a safetensors file nor a folder holding some")
    return files


def _read(path: str | Path, read) -> dict:
    """``{name: read(open file, name)}`` over every tensor of the file(s) at ``path`` (:func:`_files`); a truncated
    or corrupted file, or a tensor name in two shards, is refused."""
    from safetensors import SafetensorError, safe_open
    out = {}
    for file in _files(path):
        try:
            with safe_open(file, framework="numpy") as f:
                for name in f.keys():
                    if name in out:
                        raise BadInput(f"tensor {name!r} is in two files of {path}")
                    out[name] = read(f, name)
        except (SafetensorError, ValueError, OSError) as error:
            raise BadInput(f"{file} is not a readable safetensors file ({' '.join(str(error).split())})")
    return out


def read_shapes(path: str | Path) -> dict[str, tuple[int, ...]]:
    """Every tensor's shape in the safetensors file(s) at ``path``, read from the header alone (checked against
    the file's length: a truncated or corrupted file is refused)."""
    return _read(path, lambda f, name: tuple(f.get_slice(name).get_shape()))


def read_tensors(path: str | Path) -> dict[str, np.ndarray]:
    """Every tensor of the safetensors file(s) at ``path``, as numpy arrays (bfloat16 through ml_dtypes)."""
    return _read(path, lambda f, name: f.get_tensor(name))


def diffusers_names(tensors: dict[str, np.ndarray]) -> tuple[str, dict[str, np.ndarray]]:
    """``(naming, tensors under diffusers' names)``: Wan's own checkpoint names (a ``self_attn`` block, an
    optional ``model.diffusion_model.`` prefix) renamed by :data:`WAN_TO_DIFFUSERS`, diffusers' kept."""
    if not any(".self_attn." in name for name in tensors):
        return "diffusers", dict(tensors)
    renamed = {}
    for name, value in tensors.items():
        name = name.removeprefix("model.diffusion_model.")
        for old, new in WAN_TO_DIFFUSERS:
            name = name.replace(old, new)
        renamed[name] = value
    return "wan", renamed


def _shape(shapes: dict, name: str, axis: int) -> int:
    if name not in shapes or len(shapes[name]) <= axis:
        raise BadInput(f"missing tensor {name!r} (the model's shape is read from it), or its shape "
                       f"{shapes.get(name)} has no axis {axis}")
    return int(shapes[name][axis])


def infer_config(shapes: dict[str, tuple[int, ...]], config: dict | None = None, source: str = "a checkpoint"
                 ) -> ModelConfig:
    """The model's shape from the shapes of diffusers-named tensors, the heads (and eps) from a diffusers ``config``
    dict when given (else :data:`WAN_HEAD_DIM` wide): a published model's own config object when the shape is one,
    else one named ``loaded``."""
    config = config or {}
    dim = _shape(shapes, "patch_embedding.weight", 0)
    patch = tuple(int(s) for s in shapes["patch_embedding.weight"][2:])
    if len(patch) != 3:
        raise BadInput(f"tensor 'patch_embedding.weight' has shape {list(shapes['patch_embedding.weight'])}"
                       f", a Conv3d's has 5 axes")
    head_dim = int(config.get("attention_head_dim", WAN_HEAD_DIM))
    if dim % head_dim:
        raise BadInput(f"width {dim} does not split into heads of {head_dim} (give the model's config.json)")
    layers = 1 + max((int(m.group(1)) for k in shapes if (m := re.match(r"blocks\.(\d+)\.", k))), default=-1)
    if layers == 0:
        raise BadInput("missing tensor 'blocks.0.scale_shift_table' (no transformer block)")
    in_channels = _shape(shapes, "patch_embedding.weight", 1)
    out_channels = _shape(shapes, "proj_out.weight", 0) // math.prod(patch)
    image = "condition_embedder.image_embedder.norm1.weight"
    found = ModelConfig(
        "loaded", layers=layers, dim=dim, heads=dim // head_dim, head_dim=head_dim,
        ffn=_shape(shapes, "blocks.0.ffn.net.0.proj.weight", 0), text_len=512,
        patch_in=in_channels * math.prod(patch), source=source, patch=patch,
        qk_norm="model" if "blocks.0.attn1.norm_q.weight" in shapes else None,
        cross_norm="blocks.0.norm2.weight" in shapes, cross_qk_norm="blocks.0.attn2.norm_q.weight" in shapes,
        eps=float(config.get("eps", 1e-6)),
        freq_dim=_shape(shapes, "condition_embedder.time_embedder.linear_1.weight", 1),
        text_dim=_shape(shapes, "condition_embedder.text_embedder.linear_1.weight", 1),
        image_dim=_shape(shapes, image, 0) if image in shapes else None,
        out_channels=None if out_channels == in_channels else out_channels)
    return published(found) or found


def published(config: ModelConfig) -> ModelConfig | None:
    """The first of :data:`~svgtpu.models.MODELS` whose every field but name and source equals ``config``'s."""
    shape = lambda c: dataclasses.replace(c, name="", source="")  # noqa: E731
    return next((m for m in MODELS.values() if shape(m) == shape(config)), None)


def expected_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor a diffusers state dict of ``config`` holds, with its shape, in a fixed order."""
    c, D = config, config.dim
    out = {"patch_embedding.weight": (D, c.in_channels, *c.patch), "patch_embedding.bias": (D,)}

    def linear(name, fan_in, fan_out):
        out[f"{name}.weight"], out[f"{name}.bias"] = (fan_out, fan_in), (fan_out,)
    linear(_TOP_LINEARS["time_in"], c.freq_dim, D)
    linear(_TOP_LINEARS["time_out"], D, D)
    linear(_TOP_LINEARS["time_proj"], D, 6 * D)
    linear(_TOP_LINEARS["text_in"], c.text_dim, D)
    linear(_TOP_LINEARS["text_out"], D, D)
    if c.image_dim is not None:
        for norm, width in zip(_IMAGE_NORMS.values(), (c.image_dim, D)):
            out[f"{norm}.weight"], out[f"{norm}.bias"] = (width,), (width,)
        linear(_IMAGE_LINEARS["image_in"], c.image_dim, c.image_dim)
        linear(_IMAGE_LINEARS["image_out"], c.image_dim, D)
    norms = {"q_norm": c.qk_norm, "k_norm": c.qk_norm, "cross_q_norm": c.cross_qk_norm, "cross_k_norm": c.cross_qk_norm,
             "cross_image_k_norm": c.cross_qk_norm and c.image_dim is not None}
    for i in range(c.layers):
        for ours, names in _BLOCK_LINEARS.items():
            if ours != "cross_image_kv" or c.image_dim is not None:
                fan_in, fan_out = (c.ffn, D) if ours == "mlp_out" else (D, c.ffn if ours == "mlp_in" else D)
                for name in names:
                    linear(f"blocks.{i}.{name}", fan_in, fan_out)
        for ours, name in _BLOCK_SCALES.items():
            if norms[ours]:
                out[f"blocks.{i}.{name}.weight"] = (c.head_dim if c.qk_norm == "head" and ours in ("q_norm", "k_norm")
                                                    else D,)
        if c.cross_norm:
            out[f"blocks.{i}.norm2.weight"], out[f"blocks.{i}.norm2.bias"] = (D,), (D,)
        out[f"blocks.{i}.scale_shift_table"] = (1, 6, D)
    out["scale_shift_table"] = (1, 2, D)
    linear(_TOP_LINEARS["head"], D, c.patch_out)
    return out


def check_tensors(tensors: dict[str, tuple[int, ...]], config: ModelConfig) -> None:
    """Refuse, in one line, the first tensor of ``config`` missing from ``tensors`` (diffusers' names -> shapes),
    then the first extra one, then the first whose shape is not ``config``'s."""
    want = expected_shapes(config)
    missing = [name for name in want if name not in tensors]
    if missing:
        raise BadInput(f"missing tensor {missing[0]!r} ({len(missing)} missing) for {config.name}")
    extra = sorted(name for name in tensors if name not in want and not IGNORED.fullmatch(name))
    if extra:
        raise BadInput(f"unexpected tensor {extra[0]!r} ({len(extra)} extra) for {config.name}")
    for name, shape in want.items():
        if tuple(tensors[name]) != shape:
            raise BadInput(f"tensor {name!r} has shape {list(tensors[name])}, {config.name} needs "
                           f"{list(shape)}")


def to_params(tensors: dict[str, np.ndarray], config: ModelConfig, dtype=None) -> dict:
    """:class:`~svgtpu.model.dit.WanDiT`'s parameter dict from checked diffusers-named ``tensors`` (numpy arrays, in
    ``dtype`` when given, else their own)."""
    cast = (lambda a: np.asarray(a, dtype)) if dtype is not None else np.asarray  # noqa: E731

    def linear(*names):
        w = np.concatenate([tensors[f"{n}.weight"].reshape(tensors[f"{n}.weight"].shape[0], -1) for n in names])
        return {"w": cast(w.T), "b": cast(np.concatenate([tensors[f"{n}.bias"] for n in names]))}
    params = {ours: linear(name) for ours, name in _TOP_LINEARS.items()}
    params["head_modulation"] = cast(tensors["scale_shift_table"].reshape(2, config.dim))
    if config.image_dim is not None:
        params |= {ours: linear(name) for ours, name in _IMAGE_LINEARS.items()}
        params |= {ours: {"scale": cast(tensors[f"{name}.weight"]), "bias": cast(tensors[f"{name}.bias"])}
                   for ours, name in _IMAGE_NORMS.items()}
    params["blocks"] = []
    for i in range(config.layers):
        block = {"modulation": cast(tensors[f"blocks.{i}.scale_shift_table"].reshape(6, config.dim))}
        block |= {ours: linear(*(f"blocks.{i}.{n}" for n in names)) for ours, names in _BLOCK_LINEARS.items()
                  if f"blocks.{i}.{names[0]}.weight" in tensors}
        block |= {ours: cast(tensors[f"blocks.{i}.{name}.weight"]) for ours, name in _BLOCK_SCALES.items()
                  if f"blocks.{i}.{name}.weight" in tensors}
        if config.cross_norm:
            block["cross_norm"] = {"scale": cast(tensors[f"blocks.{i}.norm2.weight"]),
                                   "bias": cast(tensors[f"blocks.{i}.norm2.bias"])}
        params["blocks"].append(block)
    return params


def read_config_json(path: str | Path | None) -> dict:
    """A diffusers ``config.json`` as a dict (``{}`` for None); an unreadable one is refused."""
    if path is None:
        return {}
    try:
        config = json.loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        raise BadInput(f"--config {path}: not a readable JSON file ({' '.join(str(error).split())})")
    if not isinstance(config, dict):
        raise BadInput(f"--config {path}: a diffusers config.json holds one object, got {type(config).__name__}")
    return config


def check(path: str | Path, config: ModelConfig | dict | None = None) -> tuple[ModelConfig, str, dict]:
    """``(config, naming, shapes)`` of the checkpoint at ``path`` from its header alone (no tensor read): ``config``
    a :class:`ModelConfig` the tensors must fit, a diffusers ``config.json`` dict (heads, eps), or None (read from the
    tensors, heads :data:`WAN_HEAD_DIM` wide); anything missing, extra or mis-shaped is refused in one line."""
    naming, shapes = diffusers_names(read_shapes(path))
    if not isinstance(config, ModelConfig):
        config = infer_config(shapes, config, source=str(path))
    check_tensors(shapes, config)
    return config, naming, shapes


def load(path: str | Path, config: ModelConfig | dict | None = None, dtype=None) -> tuple[ModelConfig, dict]:
    """``(config, params)``: the Wan checkpoint at ``path`` (a safetensors file or a folder of shards, diffusers' or
    Wan's names) checked as :func:`check` does, its tensors as :class:`~svgtpu.model.dit.WanDiT`'s parameters
    (numpy, in ``dtype`` when given)."""
    config, _, _ = check(path, config)
    _, tensors = diffusers_names(read_tensors(path))
    return config, to_params(tensors, config, dtype)


__all__ = ["IGNORED", "WAN_HEAD_DIM", "WAN_TO_DIFFUSERS", "check", "check_tensors", "diffusers_names",
           "expected_shapes", "infer_config", "load", "published", "read_config_json", "read_shapes", "read_tensors",
           "to_params"]
