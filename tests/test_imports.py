"""The package's import graph, walked from the source: no circles, and no module imports a higher layer.

Every ``import`` counts, module-level or inside a function (a lazy import that closes a circle is
still a circle: it only moves the failure to run time).  ``from svgtpu.a import b`` is an edge to
``svgtpu.a.b`` when that is a module, else to ``svgtpu.a``.  Circles are looked for twice: between modules,
and between the units a reader sees (each sub-package as one, each top-level module as one), where
``setting -> model -> attention -> kernels -> masks -> setting`` was a circle no single file closed.
"""

import ast
from pathlib import Path

import svgtpu

PACKAGE = Path(svgtpu.__file__).parent

#: Layers, bottom first: a module may import its own layer and those below, never one above.
#: ``svgtpu`` itself (its ``__init__``: the version, quiet libtpu) is the bottom; a name matches the
#: longest entry it equals or starts with (``entry.``).
LAYERS = [
    {"svgtpu", "svgtpu.errors", "svgtpu.tpu_env", "svgtpu.facts", "svgtpu.inputs"},
    {"svgtpu.geometry", "svgtpu.recipes", "svgtpu.setting", "svgtpu.warmup", "svgtpu.launch",
     "svgtpu.models"},
    {"svgtpu.masks"},
    {"svgtpu.styles"},
    {"svgtpu.kernels"},
    {"svgtpu.baselines"},
    {"svgtpu.course"},
    {"svgtpu.attention"},
    {"svgtpu.model"},
    {"svgtpu.toy"},
    {"svgtpu.costmodel"},
    {"svgtpu.compiler"},
    {"svgtpu.bench"},
    {"svgtpu.report"},
    {"svgtpu.explore", "svgtpu.cli.common"},   # the command registry and shared arguments, under every group
    {"svgtpu.cli", "svgtpu.__main__"},
]


def module_name(path: Path, root: Path = PACKAGE) -> str:
    parts = (root.name, *path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str, root: Path = PACKAGE) -> bool:
    rel = Path(*name.split(".")[1:])
    return (root / rel).with_suffix(".py").exists() or (root / rel / "__init__.py").exists()


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """``{module: the package's modules it imports}`` of the package at ``root``, every import statement counted."""
    graph, top = {}, root.name
    for path in sorted(root.rglob("*.py")):
        name, edges = module_name(path, root), set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                edges |= {a.name for a in node.names if a.name.split(".")[0] == top}
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == top:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    edges.add(full if is_module(full, root) else node.module)
        graph[name] = {e for e in edges if e != name}
    return graph


def unit_of(name: str) -> str:
    """The unit a module belongs to: its sub-package (``svgtpu.masks.core`` -> ``svgtpu.masks``), else itself (a
    top-level module such as ``svgtpu.setting``, or the package's own ``__init__``)."""
    return ".".join(name.split(".")[:2])


def unit_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """``graph`` with each module replaced by its unit (:func:`unit_of`), edges inside a unit dropped."""
    units = {}
    for a, edges in graph.items():
        ua = unit_of(a)
        units.setdefault(ua, set()).update(ub for b in edges if (ub := unit_of(b)) != ua)
    return units


def layer_of(name: str) -> int:
    """The layer of the longest prefix of ``name`` that names one."""
    best = None
    for i, members in enumerate(LAYERS):
        for m in members:
            if (name == m or (m != "svgtpu" and name.startswith(m + "."))) and (best is None or len(m) > len(best[1])):
                best = (i, m)
    assert best is not None, f"{name} is in no layer: add it to LAYERS"
    return best[0]


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as a list of modules, or None (depth-first search, three colours)."""
    colour, stack = {}, []

    def visit(node):
        colour[node] = "grey"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if colour.get(nxt) == "grey":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in colour and (found := visit(nxt)):
                return found
        colour[node] = "black"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in colour and (found := visit(node)):
            return found
    return None


def test_the_cycle_finder_finds_a_planted_circle_and_accepts_a_tree():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def _plant(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_a_planted_package_circle_fails_though_no_file_closes_one(tmp_path):
    """The circle this test was written for, in small: ``top`` (a top-level module) imports ``model`` (a package)
    one of whose modules imports ``masks``, one of whose modules imports ``top`` back, inside a function.  No
    module imports itself back, so the module walk passes; the unit walk must not."""
    root = _plant(tmp_path / "pkg", {
        "__init__.py": "", "top.py": "from pkg.model.shapes import SHAPES\n",
        "model/__init__.py": "", "model/shapes.py": "SHAPES = {}\n", "model/block.py": "import pkg.masks.core\n",
        "masks/__init__.py": "", "masks/core.py": "def f():\n    from pkg.top import x\n    return x\n"})
    graph = import_graph(root)
    assert graph["pkg.masks.core"] == {"pkg.top"}          # the import inside a function counts
    assert find_cycle(graph) is None
    assert find_cycle(unit_graph(graph)) == ["pkg.masks", "pkg.top", "pkg.model", "pkg.masks"]
    (root / "top.py").write_text("SHAPES = {}\n")          # the circle broken: the shapes below top
    assert find_cycle(unit_graph(import_graph(root))) is None


def test_the_package_has_no_import_circle():
    graph = import_graph()
    assert len(graph) > 40, sorted(graph)  # the walk saw the package
    cycle = find_cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_no_circle_between_packages_or_top_level_modules():
    units = unit_graph(import_graph())
    assert {"svgtpu.setting", "svgtpu.masks", "svgtpu.model", "svgtpu.report"} <= set(units), sorted(units)
    cycle = find_cycle(units)
    assert cycle is None, "import circle between packages: " + " -> ".join(cycle)


def test_no_module_imports_a_higher_layer():
    upward = sorted(f"{a} -> {b}" for a, edges in import_graph().items() for b in edges
                    if layer_of(b) > layer_of(a))
    assert not upward, "imports that point up the layers:\n" + "\n".join(upward)
