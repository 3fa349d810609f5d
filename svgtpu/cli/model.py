"""``svgtpu weights``: check a Wan checkpoint against the model it loads as, from its header alone."""

from __future__ import annotations

import argparse
import dataclasses
import math

from svgtpu.cli.common import command


def _weights_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", help="a Wan transformer checkpoint: a safetensors file or a folder of shards (diffusers' "
                                "or Wan's own names)")
    p.add_argument("--config", help="the model's diffusers config.json, for its heads and eps (default: heads of "
                                    "128 channels and eps 1e-6, as every published Wan)")


def _format(result: dict, config) -> str:
    model = (f"the published {config.name} (the config the compiled block and the cost model run)"
             if result["published"] else "no published Wan's shape")
    image = f", image {config.image_dim}" if config.image_dim is not None else ""
    return "\n".join([
        result["path"],
        f"{result['naming']} names, {result['tensors']} tensors, {result['parameters']:,} parameters, each present "
        f"once and of its shape",
        f"model: {model}",
        f"  {config.layers} layers, dim {config.dim} = {config.heads} heads x {config.head_dim}, FFN {config.ffn}, "
        f"patch {config.patch}, eps {config.eps:g}",
        f"  latent channels {config.in_channels} in, {config.out_channels or config.in_channels} out; text "
        f"{config.text_dim}, time {config.freq_dim}{image}"])


@command("weights", "check a Wan checkpoint (safetensors, diffusers' or Wan's names) against the model it loads "
                    "as; a missing, extra or mis-shaped tensor is refused", _weights_arguments)
def run_weights(args):
    from svgtpu.model import weights
    config, naming, shapes = weights.check(args.path, weights.read_config_json(args.config))
    result = {"path": args.path, "naming": naming, "tensors": len(shapes),
              "parameters": sum(math.prod(s) for s in shapes.values()), "model": config.name,
              "published": weights.published(config) is config,
              "config": dataclasses.asdict(config) | {"patch": list(config.patch)}}
    return result, _format(result, config)
