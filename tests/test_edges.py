"""The command line is the edge: it turns the argparse namespace into values once, and nothing below it reads one.

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
