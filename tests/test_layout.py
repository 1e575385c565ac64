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
