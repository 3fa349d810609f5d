"""The command line is the edge: it turns the argparse namespace into values once, and nothing below it reads one;
a tile's default is the setting's, applied there and at the edges only.

A function outside ``svgtpu/cli/`` that reads attributes off a parameter named as a namespace is named (``args``,
``namespace``, ``ns``, ``opts``, ``options``: the names the package gave its namespaces; a parameter named ``args``
that is a tuple of arrays, as in ``compile_program(fn, args)``, reads no attribute and passes).  Modules that are
their own ``python -m`` entry point may parse inside their ``main``.
"""

import ast
from pathlib import Path

import svgtpu

PACKAGE = Path(svgtpu.__file__).parent
NAMESPACE_NAMES = {"args", "namespace", "ns", "opts", "options"}


def namespace_readers(source: str) -> list[str]:
    """``function(parameter)`` for each function in ``source`` reading an attribute (or ``getattr``) off a
    parameter named as a namespace."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.name == "main":
            continue
        params = {a.arg for a in node.args.args + node.args.kwonlyargs + node.args.posonlyargs} & NAMESPACE_NAMES
        for inner in ast.walk(node):
            read = (isinstance(inner, ast.Attribute) and isinstance(inner.value, ast.Name) and inner.value.id in params)
            got = (isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id == "getattr"
                   and inner.args and isinstance(inner.args[0], ast.Name) and inner.args[0].id in params)
            if read or got:
                found.append(f"{node.name}({(inner.value if read else inner.args[0]).id})")
                break
    return found


def test_the_finder_names_a_namespace_reader_and_passes_arrays():
    assert namespace_readers("def f(args):\n    return args.kept\n") == ["f(args)"]
    assert namespace_readers("def f(opts):\n    return getattr(opts, 'json', False)\n") == ["f(opts)"]
    assert namespace_readers("def f(fn, args):\n    return fn(*args)\n") == []
    assert namespace_readers("def f(setting):\n    return setting.kept\n") == []


def test_no_function_below_the_command_line_reads_the_namespace():
    readers = {str(path.relative_to(PACKAGE)): found for path in sorted(PACKAGE.rglob("*.py"))
               if path.relative_to(PACKAGE).parts[0] != "cli" and (found := namespace_readers(path.read_text()))}
    assert not readers, f"functions below svgtpu/cli/ reading the argparse namespace: {readers}"


TILE_NAMES = {"block_q", "block_kv", "block_kv_compute", "tile", "tiles"}
#: The names a tile's sides go under as loose numbers (``bq``, ``block``: the same numbers by other names).
LOOSE_TILE_NAMES = TILE_NAMES | {"bq", "bkv", "block"}
#: Where a tile default may be applied: the setting, and the edges (the command line, the explorer).
EDGES = ("setting.py", "cli/", "explore.py")
#: Entry points of a kernel or a lesson that take their own small tile, as Splash's BlockSizes does.
ENTRY_POINTS = {"kernels/mosaic_gpu.py:MosaicConfig.block_q", "kernels/mosaic_gpu.py:MosaicConfig.block_kv",
                "kernels/row_ranges.py:range_walk_attention(block_q)",
                "kernels/row_ranges.py:range_walk_attention(block_kv)",
                "course/lessons_by_hand.py:mha_flash_attention(block_q)",
                "course/lessons_by_hand.py:mha_flash_attention(block_kv)"}


def _is_default(value: ast.expr) -> bool:
    """A default that is a tile: a number or a named value (``PRODUCTION.block_q``, ``TILES``); not None, not an
    empty record field (``{}``, ``''``)."""
    if isinstance(value, ast.Constant):
        return isinstance(value.value, int) and not isinstance(value.value, bool)
    if isinstance(value, ast.Call) and ast.unparse(value.func) in ("field", "dataclasses.field"):  # a required field
        return any(k.arg in ("default", "default_factory") and _is_default(k.value) for k in value.keywords)
    return any(isinstance(n, (ast.Name, ast.Attribute)) for n in ast.walk(value))


def tile_defaults(source: str, where: str) -> set[str]:
    """``where:function(parameter)`` or ``where:Record.field`` for each tile-named parameter or dataclass field of
    ``source`` (:data:`LOOSE_TILE_NAMES`: a square tile's ``block`` too) given a default (:func:`_is_default`)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            positional = a.posonlyargs + a.args
            pairs = list(zip(positional[len(positional) - len(a.defaults):], a.defaults))
            pairs += [(k, d) for k, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
            found |= {f"{where}:{node.name}({arg.arg})" for arg, d in pairs
                      if arg.arg in LOOSE_TILE_NAMES and _is_default(d)}
        elif isinstance(node, ast.ClassDef):
            found |= {f"{where}:{node.name}.{s.target.id}" for s in node.body
                      if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                      and s.target.id in LOOSE_TILE_NAMES
                      and s.value is not None and _is_default(s.value)}
    return found


def test_the_tile_default_finder_names_functions_and_records():
    source = ("def f(x, block_q=PRODUCTION.block_q, *, tiles=TILES, block_kv=None): pass\n"
              "class R:\n    block_kv: int = 128\n    tile: str = ''\n"
              "class C:\n    block_q: int = dataclasses.field(kw_only=True)\n"
              "    block_kv: int = field(kw_only=True, default=SMALL.block_kv)\n"
              "def g(*, block: int = SMALL.block_q, bq: int, bkv=None): pass\n")
    assert tile_defaults(source, "m.py") == {"m.py:f(block_q)", "m.py:f(tiles)", "m.py:R.block_kv", "m.py:C.block_kv",
                                             "m.py:g(block)"}


def test_a_tile_default_is_applied_only_in_the_setting_and_at_the_edges():
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        if not where.startswith(EDGES):
            found |= tile_defaults(path.read_text(), where)
    assert not found - ENTRY_POINTS, f"tile defaults outside the setting and the edges: {sorted(found - ENTRY_POINTS)}"
    assert not ENTRY_POINTS - found, f"no longer found (take them off the list): {sorted(ENTRY_POINTS - found)}"


#: Kernel and compiler entry points: they take a tile as numbers, as Splash's ``BlockSizes`` does (the kernels, the
#: baselines they are timed against, the compiler's variants and the course's lessons).
TILE_ENTRY_PACKAGES = ("kernels/", "baselines/", "compiler/", "course/")
#: Functions outside those packages that are a kernel's entry point all the same, and why.
LOOSE_TILE_ENTRY_POINTS = {
    "costmodel/kernel_work.py:counted_work": "traces our kernel's jaxpr at one update width (block_kv_compute) and "
                                             "builds the kernel's KernelConfig itself, as a kernel takes its tile"}


#: Annotations that hold loose numbers, though their names are capitalised (``Tuple[int, int]``, ``Optional[int]``).
CONTAINERS = {"Tuple", "List", "Sequence", "Iterable", "Optional", "Union", "Any"}


def _is_record(annotation: ast.expr | None) -> bool:
    """An annotation naming one record (``Tile``, ``KernelConfig``, ``Setting``, ``cm.Setup``; or one of them
    ``| None``), or a sequence of records (``Sequence[Tile]``): a tile as one value, not loose numbers.  No
    annotation, ``int``, ``tuple[int, int]``: loose."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):   # a quoted annotation
        return _is_record(ast.parse(annotation.value, mode="eval").body)
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        sides = (annotation.left, annotation.right)
        return any(map(_is_record, sides)) and all(
            _is_record(x) or (isinstance(x, ast.Constant) and x.value is None) for x in sides)
    if isinstance(annotation, ast.Subscript):   # ``Sequence[Tile]``, ``tuple[Tile, ...]``: records, one by one
        items = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
        items = [x for x in items if not (isinstance(x, ast.Constant) and x.value is Ellipsis)]
        return bool(items) and all(map(_is_record, items))
    name = (annotation.attr if isinstance(annotation, ast.Attribute)
            else annotation.id if isinstance(annotation, ast.Name) else "")
    return name[:1].isupper() and name not in CONTAINERS


def loose_tile_functions(source: str) -> list[str]:
    """The functions of ``source`` with a parameter named as a tile's side (:data:`LOOSE_TILE_NAMES`) that is not
    annotated as one record (:func:`_is_record`)."""
    return [node.name for node in ast.walk(ast.parse(source)) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and any(a.arg in LOOSE_TILE_NAMES and not _is_record(a.annotation)
                    for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs)]


def test_the_loose_tile_finder_names_each_function_once():
    source = ("def f(x, bq, bkv): pass\ndef g(setting): pass\nclass R:\n    def m(self, *, block=128): pass\n"
              "def h(mask, block_q, block_kv, tile=None): pass\n"
              "def k(tiles: Tiles, tile: 'cm.TileRecipe | None' = None): pass\n"
              "def n(tile: tuple[int, int], tiles: Tuple[int, int] | None): pass\ndef p(block: int | None): pass\n"
              "def s(tiles: Sequence[Tile] | None, tile: 'tuple[Tile, ...]'): pass\ndef u(tiles: list[int]): pass\n")
    assert sorted(loose_tile_functions(source)) == ["f", "h", "m", "n", "p", "u"]


def test_only_the_entry_points_take_a_tile_as_loose_numbers():
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        names = [n for n in loose_tile_functions(path.read_text()) if f"{where}:{n}" not in LOOSE_TILE_ENTRY_POINTS]
        if not where.startswith(EDGES + TILE_ENTRY_PACKAGES) and names:
            found[where] = names
    assert not found, f"functions taking a tile as loose numbers outside the kernel and compiler entry points: {found}"
    gone = [e for e in LOOSE_TILE_ENTRY_POINTS if e.partition(":")[2] not in
            loose_tile_functions((PACKAGE / e.partition(":")[0]).read_text())]
    assert not gone, f"entry points that no longer take a tile as loose numbers (take them off the list): {gone}"


def test_the_kept_rule_is_written_once():
    """One kept rule (svgtpu.setting.mask_density) and one positive-multiplier check (check_multiplier): no other
    module refuses a kept fraction beside a multiplier or a multiplier not above 0 in words of its own."""
    rule = ("kept or multiplier", "kept and multiplier", "exactly one of kept", "multiplier must be positive",
            "multiplier must be a positive")
    writers = sorted(path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py")
                     if any(isinstance(n, ast.Constant) and isinstance(n.value, str) and any(r in n.value for r in rule)
                            for n in ast.walk(ast.parse(path.read_text())))
                     or any(isinstance(n, ast.JoinedStr) and any(r in ast.unparse(n) for r in rule)
                            for n in ast.walk(ast.parse(path.read_text()))))
    assert writers == ["setting.py"], writers
