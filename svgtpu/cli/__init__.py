"""The svgtpu command line: each subcommand prints a table, or one JSON object with --json.

A subcommand is a function ``run(args) -> (result, table)`` registered with :func:`command` (a name
with a space, ``bench kernels``, is a subcommand of ``bench``): it parses, calls the module that does
the work and prints.  The result is a JSON-able dict and the table the human rendering of it (a
third item, if returned, is the exit status).  Bad input (:class:`svgtpu.errors.BadInput`, raised by
validation where the input enters) is one line on stderr and exit status 2; anything else is a bug
and keeps its traceback (exit status 1).  ``--kept`` is the fraction of (q, k) pairs a sparse mask
keeps; ``--sparsity`` is accepted for it, SVG's name (which means the same kept fraction).

One module per command group registers its subcommands (:mod:`~svgtpu.cli.masks`, ``report``, ``toy``,
``costmodel``, ``bench``, ``compiler``; :mod:`~svgtpu.cli.common` the registry and shared arguments); this
one builds the parser and runs a command.
"""

from __future__ import annotations

import argparse
import json
import sys

# each module registers its subcommands on import, in the order --help lists them
from svgtpu.cli import common, masks, report, toy, costmodel, bench, compiler, model  # noqa: F401
from svgtpu.cli.common import COMMANDS, GROUPS
from svgtpu.errors import BadInput
from svgtpu.inputs.environment import check_environment


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (``svgtpu tiles: error: ...``) and exit status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (--help lists the arguments)\n")


def _non_empty(text: str) -> str:
    """An ``argparse`` type: a name or value given as an empty (or blank) string is refused, never read as the
    default (``--only ""`` ran every notebook, ``--resolution ""`` the production one)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"must not be empty, got {text!r}")
    return text


def _refuse_empty_strings(parser: argparse.ArgumentParser) -> None:
    """Every string argument of ``parser`` (one without a type of its own) through :func:`_non_empty`."""
    for action in parser._actions:
        if action.nargs != 0 and action.type is None and action.default != "":
            action.type = _non_empty


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="svgtpu", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    groups = {}
    for name, (help_text, arguments, _) in COMMANDS.items():
        group, _, leaf = name.rpartition(" ")
        if group and group not in groups:
            groups[group] = sub.add_parser(group, help=GROUPS[group], description=GROUPS[group]).add_subparsers(
                dest="subcommand", required=True, metavar="WHAT")
        # help is %-formatted (a percent sign is written %%), a description is printed as it is
        p = (groups[group] if group else sub).add_parser(leaf, help=help_text, description=help_text.replace("%%", "%"))
        p.set_defaults(command=name)
        p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
        if arguments is not None:
            arguments(p)
        _refuse_empty_strings(p)
    return parser


#: The exit status after Ctrl-C: 128 + SIGINT, as a shell reports a command the signal ended.
INTERRUPTED = 130


def main(argv: list[str] | None = None) -> int:
    """Run ``svgtpu ARGV``; its exit status (2: bad input, one line; 130: interrupted, one line)."""
    try:
        return _main(argv)
    except KeyboardInterrupt:   # every file is written whole or not at all (svgtpu.facts.outputs.atomic_path)
        print("svgtpu: interrupted (Ctrl-C); no file was left half-written", file=sys.stderr)
        return INTERRUPTED


def _main(argv: list[str] | None) -> int:
    from svgtpu.launch import fake_host_devices
    fake_host_devices(sys.argv[1:] if argv is None else argv)   # --devices N on a CPU
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)   # for a launcher that reruns the command
    args.parser = parser   # svgtpu paper writes its defaults into README
    _, _, run = COMMANDS[args.command]
    try:
        check_environment()   # each SVGTPU_* variable as its flag, before any work
        result, table, *status = run(args)  # a run may add an exit status (compile: 1 when refused)
    except BadInput as error:  # bad input: one line; anything else is a bug, with its traceback
        print(f"svgtpu {args.command}: error: {' '.join(str(error).split())}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2) if args.json else table)
    return status[0] if status else 0
