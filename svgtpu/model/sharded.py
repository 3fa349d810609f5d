"""One Wan block as a program over a ``("data", "seq")`` mesh of devices: what the TPU compile reads and the TPU run times.

The batch (one sample, or the CFG pair) over ``data``; Ulysses over ``seq``
(:func:`svgtpu.attention.sharding.ulysses_local`: q, k, v and the output re-sharded by all-to-alls around
self-attention); abstract bf16 weights (``jax.eval_shape``), replicated, or, with ``shard_weights``, every
2-D weight whose rows divide over ``seq`` sharded over it and all-gathered inside the block; called at the
production setting's last step and layer (:meth:`svgtpu.setting.Setting.sparse_call`: past SVG's dense
warm-up).  ``svgtpu compile --what wan-block`` compiles it (:mod:`svgtpu.compiler.wan_block`), ``svgtpu bench
tpu`` times it (:mod:`svgtpu.bench.tpu`).
"""

from __future__ import annotations

from svgtpu.errors import BadInput
from svgtpu.geometry import VideoGeometry
from svgtpu.models import ModelConfig
from svgtpu.setting import PRODUCTION


def block_program(model: ModelConfig, geometry: VideoGeometry, devices, data: int, attention, *,
                  shard_weights: bool = False, name: str = "block"):
    """``(fn, abstract args)``: one :class:`~svgtpu.model.wan.WanBlock` of ``model`` at ``geometry`` on every
    device of ``devices`` (a ``data x rest`` mesh) with self-attention ``attention`` (``[B, H, L, d]``, run
    per device on whole sequences); ``name`` labels a refusal."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    from svgtpu.attention.sharding import ulysses_local
    from svgtpu.model.wan import WanBlock
    seq = len(devices) // data
    if model.heads % seq or geometry.L % seq:
        raise BadInput(f"{name}: heads ({model.heads}) and tokens ({geometry.L}) must divide over {seq} devices")
    mesh = Mesh(np.array(devices).reshape(data, seq), ("data", "seq"))
    block = WanBlock(model)
    shapes = jax.eval_shape(lambda key: block.init(jax.random.split(key, block.INIT_KEYS), jnp.bfloat16),
                            jax.random.key(0))
    pspec = jax.tree.map(lambda a: P("seq") if shard_weights and a.ndim == 2 and a.shape[0] % seq == 0 else P(),
                         shapes)
    attend = ulysses_local(attention)

    def local(p, x, t_mod, context, angles, key):
        with jax.named_scope("weight_gather"):
            p = jax.tree.map(lambda w, s: jax.lax.all_gather(w, "seq", axis=0, tiled=True) if s != P() else w,
                             p, pspec)
        return block(p, x, t_mod, context, angles, attention=attend, key=jax.random.wrap_key_data(key),
                     **PRODUCTION.sparse_call())[0]

    specs = (pspec, P("data", "seq"), P("data"), P("data"), P("seq"), P())
    fn = jax.shard_map(local, mesh=mesh, in_specs=specs, out_specs=P("data", "seq"), check_vma=False)

    def arg(shape, dtype, spec):
        return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, spec))
    D, L = model.dim, geometry.L
    args = (jax.tree.map(lambda a, s: arg(a.shape, a.dtype, s), shapes, pspec),
            arg((data, L, D), jnp.float32, P("data", "seq")), arg((data, 6, D), jnp.float32, P("data")),
            arg((data, model.text_len, D), jnp.bfloat16, P("data")),
            arg((L, model.head_dim // 2), jnp.float32, P("seq")), arg((2,), jnp.uint32, P()))
    return fn, args


__all__ = ["block_program"]
