"""The house rules of the layout: vmc and lm never import each other; common imports neither;
the shared core (nnqs.nn) knows nothing of orbitals or digits; hamiltonians never imports nnqs."""
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _modules(package: str) -> list[str]:
    path = ROOT.joinpath(*package.split("."))
    return [package] + [f"{package}.{m.name}" for m in pkgutil.iter_modules([str(path)])]


def _imported_after(modules: list[str]) -> set[str]:
    code = "import sys\n" + "".join(f"import {m}\n" for m in modules) + "print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(out.stdout.split())


@pytest.mark.parametrize("package, forbidden", [
    ("nnqs.lm", ("nnqs.vmc",)),
    ("nnqs.vmc", ("nnqs.lm",)),
    ("nnqs.common", ("nnqs.vmc", "nnqs.lm")),
    ("nnqs.nn", ("nnqs.vmc", "nnqs.lm", "nnqs.common")),
    ("hamiltonians", ("nnqs",)),
])
def test_package_does_not_import(package, forbidden):
    loaded = _imported_after(_modules(package))
    wrong = sorted(m for m in loaded for f in forbidden if m == f or m.startswith(f + "."))
    assert not wrong, f"{package} imports {wrong}"
    assert any(m.startswith(package) for m in loaded)  # the check really imported the package


@pytest.mark.parametrize("package", ["nnqs", "hamiltonians"])
def test_no_import_cycle_between_modules(package):
    """Every import of a package's modules, at module level or inside a function (a lazy import
    closes a cycle just the same), forms an acyclic graph."""
    import ast

    root = ROOT / package
    modules = {}
    for path in root.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        modules[name] = path
    graph = {m: set() for m in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            graph[name] |= {t for t in targets if t in modules and t not in (name, package)}
    state: dict[str, int] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in graph[module]:
            assert state.get(target) != 1, "import cycle: " + " -> ".join(path[path.index(target):] + [target])
            if target not in state:
                visit(target, path + [target])
        state[module] = 2

    for module in graph:
        if module not in state:
            visit(module, [module])
