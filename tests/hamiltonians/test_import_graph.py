"""The modules of `hamiltonians` import each other in one direction only: no cycle, counting
imports inside functions too (a lazy import hides a cycle from Python but not from a reader)."""
import ast
from pathlib import Path

import hamiltonians

PACKAGE = Path(hamiltonians.__file__).parent


def _internal_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("hamiltonians"):
            base = node.module.split(".")
            names.update(base[1] if len(base) > 1 else alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name.split(".")[1] for a in node.names if a.name.startswith("hamiltonians."))
    return names


def _graph() -> dict[str, set[str]]:
    modules = {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    return {m: _internal_imports(PACKAGE / f"{m}.py") & modules - {m} for m in modules}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path + [node, nxt]
            if nxt not in state and (found := visit(nxt, path + [node])):
                return found
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start, [])):
            return found
    return None


def test_cycle_finder_finds_a_planted_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) is not None
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_no_import_cycle_between_hamiltonians_modules():
    graph = _graph()
    assert {"fcidump", "integrals", "molecular"} <= set(graph)
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))
    assert "integrals" not in graph["fcidump"] and "molecular" in graph["fcidump"]
