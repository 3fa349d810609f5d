"""Rectified-flow (flow-matching) training of the toy DiT on synthetic video.

A clean video ``x0`` and Gaussian noise ``e`` are mixed at a time ``t`` drawn logit-normal,
``x_t = (1 - t) x0 + t e``, and the model regresses the straight-line velocity ``e - x0``.
Labels are dropped to the null label with probability ``label_dropout`` so the same model gives
the unconditional prediction for classifier-free guidance.  Optimizer: AdamW with linear warm-up
and cosine decay, gradient clipping at 1.
"""

from __future__ import annotations

import json
import math
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm.auto import tqdm

from svgtpu.toy import data
from svgtpu.toy.dit import DiTConfig, Params, count_params, forward, init_params, save_checkpoint
from svgtpu.geometry import check_positive_int
from svgtpu.facts.results import provenance
from svgtpu.errors import BadInput

#: Named model sizes.  ``toy`` is the shipped checkpoint; ``tiny`` is for tests.
CONFIGS: dict[str, DiTConfig] = {
    "toy": DiTConfig(),  # the defaults are the shipped checkpoint's model
    "tiny": DiTConfig(heads=1, head_dim=64, depth=1, mlp_ratio=2, context_tokens=2, freq_dim=64),
}


def get_config(name: str) -> DiTConfig:
    if name not in CONFIGS:
        raise BadInput(f"config must be one of {', '.join(CONFIGS)}, got {name!r}")
    return CONFIGS[name]


def flow_matching_loss(params: Params, config: DiTConfig, x0: jax.Array, labels: jax.Array,
                       key: jax.Array, label_dropout: float = 0.1) -> jax.Array:
    """Mean squared error of the predicted velocity against ``noise - x0``."""
    k_t, k_noise, k_drop = jax.random.split(key, 3)
    batch = x0.shape[0]
    t = jax.nn.sigmoid(jax.random.normal(k_t, (batch,)))
    noise = jax.random.normal(k_noise, x0.shape)
    labels = jnp.where(jax.random.bernoulli(k_drop, label_dropout, (batch,)), config.num_labels, labels)
    x_t = (1 - t)[:, None, None, None, None] * x0 + t[:, None, None, None, None] * noise
    velocity = forward(params, config, x_t, t, labels)
    return jnp.mean((velocity - (noise - x0)) ** 2)


def make_optimizer(steps: int, lr: float, warmup: int) -> optax.GradientTransformation:
    schedule = optax.warmup_cosine_decay_schedule(0.0, lr, min(warmup, max(steps - 1, 1)), max(steps, 2),
                                                  end_value=lr * 0.1)
    return optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(schedule, weight_decay=0.01))


def train(config: DiTConfig, *, steps: int, seed: int = 0, batch_size: int = 8, lr: float = 3e-4,
          warmup: int = 100, label_dropout: float = 0.1, progress: bool = True,
          fixed_batch: bool = False, init: Params | None = None) -> tuple[Params, dict]:
    """Train from scratch, or go on from ``init`` params with a fresh optimizer; returns
    ``(params, history)`` with the per-step losses.

    ``fixed_batch=True`` reuses one batch every step (tests: the loss must then fall).
    """
    check_positive_int("steps", steps)
    check_positive_int("batch_size", batch_size)
    if not 0.0 <= label_dropout < 1.0:
        raise BadInput(f"label_dropout must be in [0, 1), got {label_dropout}")
    if not (lr > 0 and math.isfinite(lr)):
        raise BadInput(f"lr must be a positive number, got {lr}")
    if isinstance(warmup, bool) or not isinstance(warmup, (int, np.integer)) or warmup < 0:
        raise BadInput(f"warmup must be a non-negative integer (steps), got {warmup!r}")
    key = jax.random.PRNGKey(seed)
    key, init_key = jax.random.split(key)
    params = init_params(config, init_key) if init is None else init
    optimizer = make_optimizer(steps, lr, warmup)
    opt_state = optimizer.init(params)

    @jax.jit
    def update(params, opt_state, x0, labels, key):
        loss, grads = jax.value_and_grad(flow_matching_loss)(params, config, x0, labels, key, label_dropout)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    losses = []
    start = time.perf_counter()
    bar = tqdm(range(steps), desc="train", disable=not progress)
    for step in bar:
        x0, labels = data.make_batch(seed if fixed_batch else seed * 1_000_003 + step, batch_size)
        params, opt_state, loss = update(params, opt_state, jnp.asarray(x0), jnp.asarray(labels),
                                         jax.random.fold_in(key, step))
        losses.append(float(loss))
        if step % 10 == 0:
            bar.set_postfix(loss=f"{np.mean(losses[-50:]):.4f}")
    history = {"steps": steps, "seed": seed, "batch_size": batch_size, "lr": lr, "warmup": warmup,
               "label_dropout": label_dropout, "losses": losses, "wall_s": time.perf_counter() - start}
    return params, history


def loss_curve_path(checkpoint: str) -> str:
    """The training record written beside a checkpoint: ``<name>.loss.json``."""
    return os.path.splitext(checkpoint)[0] + ".loss.json"


def save_training(path: str, params: Params, config: DiTConfig, history: dict, *, config_name: str,
                  init: str | None = None, command: str | None = None) -> dict:
    """Save ``params`` at ``path`` and the run's record next to it as ``<name>.loss.json``.

    A run that went on from the checkpoint ``init`` carries the stages that made it (read from
    ``init``'s own ``.loss.json``), so the record of the shipped checkpoint lists every command
    that reproduces it.  Returns the record without the per-step losses.  Both files are written atomically.
    """
    from svgtpu.facts.outputs import write_text
    save_checkpoint(path, params, config)
    losses = history["losses"]
    tail = max(1, len(losses) // 20)
    stage = {"command": command, "first_loss": float(np.mean(losses[:tail])),
             "final_loss": float(np.mean(losses[-tail:])), "init": init, **history}
    previous = os.path.splitext(init)[0] + ".loss.json" if init else None
    stages = []
    if previous and os.path.exists(previous):
        with open(previous) as f:
            stages = json.load(f).get("stages", [])
    stages.append(stage)
    curve_path = loss_curve_path(path)
    record = {"config": config_name, "model": json.loads(config.to_json()), "params": count_params(params),
              "checkpoint": path, "loss_curve": curve_path, "checkpoint_bytes": os.path.getsize(path),
              **{k: v for k, v in stage.items() if k != "losses"},
              "total_steps": sum(s["steps"] for s in stages), "total_wall_s": sum(s["wall_s"] for s in stages),
              "reproduce": [s["command"] for s in stages], "provenance": provenance("measured")}
    write_text(curve_path, json.dumps({**record, "stages": stages}))
    return record


def train_and_save(config_name: str, out: str | None = None, *, steps: int, seed: int = 0, batch_size: int = 4,
                   lr: float = 5e-4, warmup: int = 50, init: str | None = None, command: str | None = None,
                   force: bool = False) -> dict:
    """``svgtpu train``: train the ``config_name`` model (going on from the checkpoint ``init``, whose
    model it must be) and save it at ``out`` (default: a fresh dated path beside
    :data:`~svgtpu.facts.paths.TRAINED_CHECKPOINT`, under ``build/``) with its record (:func:`save_training`).  A
    file that exists (the checkpoint or its record; the shipped checkpoint above all) is overwritten only with
    ``force``."""
    from svgtpu.errors import user_file
    from svgtpu.facts.outputs import check_output, dated_path
    from svgtpu.facts.paths import TRAINED_CHECKPOINT
    from svgtpu.toy.dit import load_checkpoint
    out = str(dated_path(TRAINED_CHECKPOINT) if out is None else out)
    if not out.endswith(".npz"):
        raise BadInput(f"out must be a .npz path (the checkpoint), got {out!r}")
    config, params = get_config(config_name), None
    check_output("out", out, derived=(loss_curve_path(out),), force=force, new=not force)   # before the work
    if init:
        params, init_config = load_checkpoint(init)
        if init_config != config:
            raise BadInput(f"init checkpoint {init} is not a {config_name!r} model")
    params, history = train(config, steps=steps, seed=seed, batch_size=batch_size, lr=lr, warmup=warmup, init=params)
    with user_file("out", out):
        return save_training(out, params, config, history, config_name=config_name, init=init, command=command)


def format_training(record: dict) -> str:
    """:func:`train_and_save`'s record as one table row, and the two files it wrote."""
    from svgtpu.facts.tables import format_table
    return format_table([{k: record[k] for k in ("config", "params", "steps", "batch_size", "first_loss", "final_loss",
                                                  "wall_s", "checkpoint_bytes")}]) + (
        f"\nwrote {record['checkpoint']} and its training record {record['loss_curve']}")


__all__ = ["CONFIGS", "get_config", "flow_matching_loss", "make_optimizer", "train", "loss_curve_path", "save_training",
           "train_and_save", "format_training"]
