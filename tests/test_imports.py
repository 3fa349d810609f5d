"""The package's import graph, walked from the source: no circles, and no module imports a higher layer.

Every ``import`` counts, module-level or inside a function (a lazy import that closes a circle is
still a circle: it only moves the failure to run time).  ``from svgtpu.a import b`` is an edge to
``svgtpu.a.b`` when that is a module, else to ``svgtpu.a``.
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


def module_name(path: Path) -> str:
    parts = ("svgtpu", *path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    rel = Path(*name.split(".")[1:])
    return (PACKAGE / rel).with_suffix(".py").exists() or (PACKAGE / rel / "__init__.py").exists()


def import_graph() -> dict[str, set[str]]:
    graph = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name, edges = module_name(path), set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                edges |= {a.name for a in node.names if a.name.split(".")[0] == "svgtpu"}
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "svgtpu":
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    edges.add(full if is_module(full) else node.module)
        graph[name] = {e for e in edges if e != name}
    return graph


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


def test_the_package_has_no_import_circle():
    graph = import_graph()
    assert len(graph) > 40, sorted(graph)  # the walk saw the package
    cycle = find_cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_no_module_imports_a_higher_layer():
    upward = sorted(f"{a} -> {b}" for a, edges in import_graph().items() for b in edges
                    if layer_of(b) > layer_of(a))
    assert not upward, "imports that point up the layers:\n" + "\n".join(upward)
