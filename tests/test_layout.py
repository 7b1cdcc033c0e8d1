"""The package's shape: the pipeline shows in its folders, and no module imports itself back.

Every import counts, also the ones inside functions: a lazy import that closes a loop is still
a loop in the design (incident -> tracebacks -> incident was one), it only fails later. An
import of a module's own package (`from triage import __version__`) does not: Python has
imported that package before the module runs.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "triage"
# errors.py and record.py: the base every stage shares (its errors, its value classes), no stage of its own
TOP_LEVEL_MODULES = {"__init__.py", "__main__.py", "errors.py", "record.py"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges = graph.setdefault(name, set())
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: resolve against this module's package
                    anchor = name.split(".") if is_package else name.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                # `from pkg import mod` imports the module; `from mod import name` the module
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            # A module's own packages are imported before it runs (`from triage import
            # __version__`): not an edge of the design.
            edges.update(t for t in targets if t in modules and not (name + ".").startswith(t + "."))
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle as the list of modules on it, or None (iterative DFS, three colours)."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    for start in sorted(graph):
        if state.get(start):
            continue
        path, stack = [start], [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph[nxt])))
    return None


def test_only_entry_points_at_the_top_of_the_package():
    loose = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in TOP_LEVEL_MODULES)
    assert loose == [], f"modules at the top of triage/ belong in a subpackage: {loose}"


def test_every_subpackage_says_what_goes_in_and_out():
    for init in PACKAGE.glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc, f"{init.relative_to(PACKAGE.parent)} has no docstring"


def test_no_import_cycle():
    assert find_cycle(import_graph()) is None, f"import cycle: {' -> '.join(find_cycle(import_graph()))}"


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_graph_sees_lazy_and_package_imports():
    graph = import_graph()
    # a function-level import (cli/runbook.py imports the search module inside run())
    assert "triage.runbook.search" in graph["triage.cli.runbook"]
    # `from triage.logs import facts` is an edge to the module, not only to the package
    assert "triage.logs.facts" in graph["triage.logs.parse"]
