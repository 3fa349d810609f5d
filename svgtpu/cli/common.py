"""What every subcommand module shares: the registry (:func:`command`), the arguments several take, ``svgtpu info``."""

from __future__ import annotations

import argparse
from typing import Callable

from svgtpu.errors import positive_int
from svgtpu.setting import DEFAULT_KEPT, PRODUCTION

COMMANDS: dict[str, tuple[str, Callable, Callable]] = {}
#: Commands made of subcommands (``bench kernels``, ``bench ops``, ...), with their help.
GROUPS = {"bench": "attention kernel benchmarks (C4): timings, op counts, the compiler's cycles, the GPU run"}


def command(name: str, help: str, arguments: Callable[[argparse.ArgumentParser], None]):
    """Register ``run(args) -> (result_dict, table_str)`` as the subcommand ``name``."""
    def register(run):
        COMMANDS[name] = (help, arguments, run)
        return run
    return register


def flags_given(args) -> dict[str, str]:
    """``{dest: flag}`` of each option the user typed for this command (``args.argv``, as :func:`svgtpu.cli.main`
    keeps it): a flag given at its default value is still given (``--chips 8`` on the toy is refused as ignored)."""
    leaf = args.parser
    for word in args.command.split():
        leaf = next(a for a in leaf._actions if isinstance(a, argparse._SubParsersAction)).choices[word]
    by_flag = {flag: action.dest for action in leaf._actions for flag in action.option_strings}
    given = {}
    for token in args.argv:
        flag = token.split("=", 1)[0]
        if flag in by_flag and by_flag[flag] not in given:
            given[by_flag[flag]] = flag
        elif flag.startswith("--") and "=" not in token:   # an abbreviation argparse accepted
            found = [f for f in by_flag if f.startswith(flag)]
            if len(found) == 1:
                given.setdefault(by_flag[found[0]], found[0])
    return given


def refuse_repeated(parameter: str, values) -> list:
    """``values`` of a list option, refused (:class:`~svgtpu.errors.BadInput`) if one is given twice (recorded or
    run twice, never meant)."""
    from svgtpu.errors import BadInput
    seen = set()
    for value in values or ():
        if value in seen:
            raise BadInput(f"{parameter}: {value} is given twice; give each once")
        seen.add(value)
    return values


#: How far (relative) the pairs an SVG mask keeps may lie from the kept fraction asked before a command says so.
FAR_DENSITY = 0.1


def density_note(kept: float | None, geometry) -> str:
    """A line (wrapped to the width) when SVG's band + sink mask for ``kept`` on ``geometry`` (a
    :class:`~svgtpu.geometry.VideoGeometry`) keeps a share of pairs more than :data:`FAR_DENSITY` away from the
    ``kept`` asked, saying why the nearest band is that far; ``""`` when it is near or no kept fraction was asked."""
    import textwrap

    from svgtpu.facts.tables import FIT_WIDTH
    from svgtpu.masks.core import BAND_QUANTUM, svg_mask
    if kept is None:
        return ""
    mask = svg_mask(geometry, kept=kept)
    reached, L, F = mask.density(), geometry.L, geometry.F
    if abs(reached - kept) <= FAR_DENSITY * kept:
        return ""
    return textwrap.fill(f"kept {kept:g} asked, but the mask keeps {reached:.3g} of the pairs, the nearest a band comes "
                         f"on this grid: the first-frame sink alone keeps F / L = {F / L:.3g} (more frames lower it) "
                         f"and the band's half-width moves in steps of {BAND_QUANTUM} tokens (W = {mask.window} here; "
                         f"more than L = {L} tokens make a step finer)", FIT_WIDTH, subsequent_indent="  ")


def tile_arguments(p: argparse.ArgumentParser, block_q: int = PRODUCTION.block_q,
                   block_kv: int = PRODUCTION.block_kv) -> None:
    p.add_argument("--block-q", type=positive_int, default=block_q, help=f"q rows per tile (default {block_q})")
    p.add_argument("--block-kv", type=positive_int, default=block_kv, help=f"keys per tile (default {block_kv})")


def mask_arguments(p: argparse.ArgumentParser, geometry: str, default: str = f"kept {DEFAULT_KEPT}", *,
                   align: tuple[str, ...] | None = None, align_default: str | None = None) -> argparse._MutuallyExclusiveGroup:
    """``--geometry``, SVG's ``--kept`` or ``--multiplier`` (the group, for more choices) and ``--align``."""
    from svgtpu.masks.core import ALIGN_MODES
    p.add_argument("--geometry", default=geometry, help=f"preset (480p ... 2160p) or TxHxW (default {geometry})")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--kept", "--sparsity", dest="kept", type=float, help=f"SVG kept fraction in (0, 1) (default {default})")
    group.add_argument("--multiplier", type=float, help="SVG band multiplier (W = ceil(m*F/128)*128), instead of --kept")
    p.add_argument("--align", choices=align or ALIGN_MODES, default=align_default, help="tile-align the mask")
    return group


def defaults_block(parser: argparse.ArgumentParser) -> str:
    """README's ``cli-defaults`` block: every command's options that have a default, with it, read from ``parser``
    (so README and the command line agree); paths relative to the checkout."""
    from svgtpu.facts.paths import REPO_ROOT

    def shown(value) -> str:
        if isinstance(value, (list, tuple)):
            return " ".join(map(shown, value))
        text = str(value)
        return text[len(str(REPO_ROOT)) + 1:] if text.startswith(str(REPO_ROOT) + "/") else text

    rows = ["| command | defaults |", "|---|---|"]
    for name in COMMANDS:
        leaf = parser
        for word in name.split():
            leaf = next(a for a in leaf._actions if isinstance(a, argparse._SubParsersAction)).choices[word]
        given = []
        for action in leaf._actions:
            if action.default is None or action.default is False or action.default in ([], "", argparse.SUPPRESS) \
                    or not action.option_strings:
                continue
            flag = action.option_strings[0]
            given.append(f"`{flag}`" if action.default is True else f"`{flag} {shown(action.default)}`")
        rows.append(f"| `svgtpu {name}` | {', '.join(given) or 'none'} |")
    return "\n".join(rows)


# -- svgtpu info ------------------------------------------------------------------------------

@command("info", "backend, devices and versions", lambda p: None)
def run_info(args):
    import jax
    import numpy as np

    from svgtpu.facts.results import environment
    result = {**environment(), "numpy": np.__version__, "devices": [str(d) for d in jax.devices()],
              "device_count": jax.device_count()}
    return result, "\n".join(f"{k:>12}: {v}" for k, v in result.items())
