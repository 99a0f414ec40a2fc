"""Which part of the package may import which: the domain never imports the serving machinery, and
the core never imports the workspace that is built on it (read from the source with ast)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "emissions"

# The entry points that run a server: the command line (`serve`) and the test harness's sandbox server.
SERVING_CALLERS = ("emissions/serving/", "emissions/cli", "emissions/__main__.py", "emissions/testing.py")
# What sits above the workspace: the app that mounts its routes and the command line.
WORKSPACE_CALLERS = ("emissions/workspace/", "emissions/app.py", "emissions/cli", "emissions/__main__.py",
                     "emissions/testing.py", "emissions/serving/")


def module_name(path: Path) -> list[str]:
    """A file's dotted module name as parts (a package's __init__ is the package)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def imported_modules(path: Path, source: str | None = None) -> set[str]:
    """Every module a file imports, absolute, relative imports resolved; `from a import b` counts as
    `a.b` too, since b may be a module."""
    tree = ast.parse(source if source is not None else path.read_text())
    name = module_name(path)
    package = name if path.name == "__init__.py" else name[:-1]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = [*base, *(node.module.split(".") if node.module else [])]
            found.add(".".join(module))
            found.update(".".join([*module, alias.name]) for alias in node.names)
    return found


def importing(path: Path, prefix: str, source: str | None = None) -> list[str]:
    return sorted(module for module in imported_modules(path, source)
                  if module == prefix or module.startswith(prefix + "."))


def modules_outside(callers: tuple[str, ...]) -> list[Path]:
    return [path for path in sorted(PACKAGE.rglob("*.py"))
            if not str(path.relative_to(ROOT)).startswith(callers)]


@pytest.mark.parametrize("path", modules_outside(SERVING_CALLERS), ids=lambda path: str(path.relative_to(ROOT)))
def test_the_domain_never_imports_the_serving_package(path):
    assert importing(path, "emissions.serving") == []


@pytest.mark.parametrize("path", modules_outside(WORKSPACE_CALLERS), ids=lambda path: str(path.relative_to(ROOT)))
def test_the_core_never_imports_the_workspace(path):
    assert importing(path, "emissions.workspace") == []


def test_the_import_check_finds_each_form_of_import():
    module = PACKAGE / "webhooks" / "delivery.py"
    assert importing(module, "emissions.serving", "from ..serving import server") == [
        "emissions.serving", "emissions.serving.server"]
    assert importing(module, "emissions.serving", "from ..serving.writer_lock import WriterLock") == [
        "emissions.serving.writer_lock", "emissions.serving.writer_lock.WriterLock"]
    assert importing(module, "emissions.serving", "from .. import serving") == ["emissions.serving"]
    assert importing(module, "emissions.serving", "def f():\n    import emissions.serving.workers") == [
        "emissions.serving.workers"]
    assert importing(module, "emissions.serving", "from . import serving\nfrom ..servings import x") == []
    assert importing(PACKAGE / "organizations.py", "emissions.workspace", "from .workspace import accounts") == [
        "emissions.workspace", "emissions.workspace.accounts"]


def test_the_callers_of_the_serving_package_are_the_entry_points():
    callers = {str(path.relative_to(ROOT)) for path in sorted(PACKAGE.rglob("*.py"))
               if not str(path.relative_to(ROOT)).startswith("emissions/serving/")
               and importing(path, "emissions.serving")}
    assert callers and all(caller.startswith(SERVING_CALLERS) for caller in callers), callers
