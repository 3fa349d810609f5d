"""Benchmarks that keep the cost model honest on this CPU: its rates, measured now, the toy
DiT's self-attention share, modeled with those rates and timed, and how the toy's attention time
grows with the clip length.

The cost model (:mod:`svgtpu.costmodel`) is what predicts; this module only measures.
"""

from __future__ import annotations

import functools

import numpy as np

from svgtpu.errors import BadInput
from svgtpu.costmodel import XLA_UNFUSED, DeviceSpec, Efficiency, ModelConfig, Setup, forward_breakdown
from svgtpu.facts.results import provenance
from svgtpu.bench.timing import interleaved_times, paired_ratio


def calibrate_cpu(seed: int = 0, rounds: int = 5) -> DeviceSpec:
    """A :class:`~svgtpu.costmodel.DeviceSpec` of this CPU, measured now with jitted JAX (f32).

    Matmul rate: a 1024^3 matmul.  Memory rate: ``y = x + 1`` over 128 MB (read + write).  Vector
    rate: 16 chained multiply-adds on a cache-resident 64k array.  Exp rate: ``exp`` on that array.
    Interleaved timing (:mod:`svgtpu.bench.timing`), fastest of 3 per round, median over ``rounds``.
    """
    import jax
    import jax.numpy as jnp

    key = jax.random.PRNGKey(seed)
    a = jax.random.normal(key, (1024, 1024), jnp.float32)
    big = jax.random.normal(key, (32 * 1024 * 1024,), jnp.float32)
    small = jax.random.normal(key, (64 * 1024,), jnp.float32)

    def fma_chain(x):
        for _ in range(16):
            x = x * 0.999 + 0.001
        return x

    mm, add, vec, ex = jax.jit(lambda x: x @ x), jax.jit(lambda x: x + 1.0), jax.jit(fma_chain), jax.jit(jnp.exp)
    times = interleaved_times({"matmul": lambda: mm(a), "memory": lambda: add(big), "vector": lambda: vec(small),
                               "exp": lambda: ex(small)}, rounds=rounds, repeats=3, progress=False)
    t = {name: float(np.median(v)) for name, v in times.items()}
    return DeviceSpec("cpu", matmul_flops=2 * 1024 ** 3 / t["matmul"], hbm_bandwidth=2 * big.nbytes / t["memory"],
                      hbm_bytes=24e9, vector_ops=32 * small.size / t["vector"], exp_ops=small.size / t["exp"],
                      matmul_tile=None, family="cpu",
                      source="measured on this CPU by svgtpu.bench.cpu.calibrate_cpu")


def toy_attention_share_measured_vs_modeled(device: DeviceSpec | None = None, *, config=None, batch: int = 2,
                                            rounds: int = 9, seed: int = 0) -> dict:
    """The toy DiT's self-attention share of a forward pass: modeled with CPU-measured rates vs
    measured by timing.  ``config``: a :class:`svgtpu.toy.dit.DiTConfig` (default: the shipped toy's
    shape; vary ``frames`` to sweep the sequence length).

    Modeled: :func:`~svgtpu.costmodel.forward_breakdown` on the toy config with ``device`` (default
    :func:`calibrate_cpu`), f32 values, unfused XLA attention (one ``L x L`` tile per head: the whole
    score matrix passes through memory), efficiencies 1 (the rates were measured on the same kinds
    of op), no stages or host time.  Measured: jitted forward pass (dense attention) vs ``depth``
    calls of the jitted dense attention on the same q/k/v shapes, interleaved over ``rounds``
    rounds; median of the per-round shares.
    """
    import jax
    import jax.numpy as jnp

    from svgtpu.toy import dit

    config = config or dit.DiTConfig()
    device = device or calibrate_cpu(seed)
    model, g = ModelConfig.from_dit(config), config.geometry
    setup = Setup.of(model, g, device, chips=1, steps=1, cfg=False, block_q=g.L, block_kv=g.L,
                  multiplier=1.0, kept=None, efficiency=Efficiency(1.0, 1.0, 1.0, 1.0, 1.0),
                  work=XLA_UNFUSED, dtype_bytes=4, parts=frozenset())
    breakdown = {k: v * batch for k, v in forward_breakdown(setup).items()}
    modeled = breakdown["self_attention"] / sum(breakdown.values())

    key = jax.random.PRNGKey(seed)
    params = dit.init_params(config, key)
    video = jax.random.normal(key, (batch, config.frames, config.height, config.width, config.channels))
    t = jnp.linspace(0.2, 0.8, batch)
    labels = jnp.zeros((batch,), jnp.int32)
    fwd = jax.jit(lambda p, x: dit.forward(p, config, x, t, labels))
    times = interleaved_times({"forward": lambda: fwd(params, video), "attention": _attention_call(config, batch, seed)},
                              rounds=rounds, desc="toy DiT timing", progress=False)
    return {"model": "toy", "L": g.L, "batch": batch, "device": device.as_dict(),
            "modeled_attention_share": modeled, "modeled_forward_seconds": sum(breakdown.values()),
            "measured_attention_share": paired_ratio(times, "attention", "forward"),
            "measured_forward_seconds": float(np.median(times["forward"])),
            "measured_attention_seconds": float(np.median(times["attention"])),
            "provenance": {"modeled": provenance("modeled", device="cpu"), "measured": provenance("measured")}}


@functools.cache
def _jitted_dense_attention():
    """The toy's dense attention, jitted once: the share and the scaling timings of one length share its compile."""
    import jax

    from svgtpu.toy import dit
    return jax.jit(dit.dense_attention)


def _attention_call(config, batch: int, seed: int):
    """A call running what one forward pass of the toy ``config`` spends in self-attention: ``depth`` calls of
    the jitted dense attention on random q/k/v of its shapes."""
    import jax

    qkv = jax.random.normal(jax.random.PRNGKey(seed), (3, batch, config.heads, config.geometry.L, config.head_dim))
    attn = _jitted_dense_attention()
    return lambda: [attn(*qkv) for _ in range(config.depth)]


def toy_attention_scaling(configs, *, batch: int = 2, rounds: int = 9, seed: int = 0) -> dict:
    """The toy DiT's self-attention seconds per forward pass at each of ``configs``' lengths (toy
    :class:`svgtpu.toy.dit.DiTConfig` shapes), the lengths timed in turn within every round
    (:func:`svgtpu.bench.timing.interleaved_times`): a change in this machine's load lands on every length
    of a round alike instead of on whichever length was being timed, so it cannot bend the fitted growth,
    and resampling whole rounds (:func:`svgtpu.compiler.scaling.bootstrap_exponent`) shows how far it moves it.

    ``{"L": [...], "median_seconds": [...], "rounds": [[seconds of round 0, 1, ...] per length], ...}``.
    """
    lengths = [c.geometry.L for c in configs]
    if len(set(lengths)) != len(lengths) or len(lengths) < 2:
        raise BadInput(f"configs must give at least two different lengths, got L = {lengths}")
    times = interleaved_times({c.geometry.L: _attention_call(c, batch, seed) for c in configs}, rounds=rounds,
                              desc="toy attention by length", progress=False)
    return {"model": "toy", "batch": batch, "rounds_timed": rounds, "L": lengths,
            "median_seconds": [float(np.median(times[L])) for L in lengths],
            "rounds": [[float(t) for t in times[L]] for L in lengths], "provenance": provenance("measured")}


__all__ = ["calibrate_cpu", "toy_attention_share_measured_vs_modeled", "toy_attention_scaling"]
