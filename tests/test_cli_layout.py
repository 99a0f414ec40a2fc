"""The CLI's layout holds: each command declared once, beside its body, and reachable from `emissions --help`."""
from __future__ import annotations

import ast
import contextlib
import importlib
import io
import inspect
import os
import pkgutil
import re
import subprocess
import sys
import unittest.mock
from pathlib import Path

import pytest

import emissions.cli as cli_package
from emissions.cli import commands

PACKAGE = Path(cli_package.__file__).parent


def declared_in_modules() -> dict[str, list[str]]:
    """Every command found in any module of emissions/cli/ (imported here, whether or not the CLI imports it),
    by its words, with the modules whose functions declare it."""
    found: dict[str, list[str]] = {}
    for module_info in pkgutil.iter_modules([str(PACKAGE)]):
        if module_info.name == "__main__":
            continue
        module = importlib.import_module(f"emissions.cli.{module_info.name}")
        for name, function in inspect.getmembers(module, inspect.isfunction):
            if function.__module__ == module.__name__ and hasattr(function, "cli_command"):
                found.setdefault(function.cli_command.name, []).append(f"{module.__name__}.{name}")
    return found


def listed_by_help() -> set[str]:
    """The commands `emissions --help` lists, and under each group those `emissions GROUP --help` lists."""
    def run(*argv: str) -> str:
        if not argv:  # the installed entry point itself, once
            result = subprocess.run([sys.executable, "-m", "emissions", "--help"], capture_output=True, text=True,
                                    timeout=60, env={**os.environ, "COLUMNS": "200"})
            assert result.returncode == 0, result.stderr
            return result.stdout
        shown = io.StringIO()  # each group's help from the same parser, in this process
        with contextlib.redirect_stdout(shown), pytest.raises(SystemExit) as exited, \
                unittest.mock.patch.dict(os.environ, {"COLUMNS": "200"}):
            cli_package.build_parser().parse_args([*argv, "--help"])
        assert exited.value.code == 0
        return shown.getvalue()

    def choices(usage: str) -> list[str]:  # a group's usage line: emissions GROUP [-h] {a,b,...} ...
        found = re.fullmatch(r"usage: emissions [a-z-]+ \[-h\] \{([a-z,-]+)\} \.\.\.", usage)
        return found.group(1).split(",") if found else []

    top = re.findall(r"^    ([a-z-]+)", run().split("positional arguments:")[1].split("options:")[0], re.M)
    listed = set()
    for word in top:
        below = choices(run(word).split("\n")[0])
        listed.update(f"{word} {action}" for action in below) if below else listed.add(word)
    return listed


def test_every_command_of_every_module_is_listed_by_emissions_help():
    declared = declared_in_modules()
    assert len(declared) >= 39  # every command the CLI had when it was split into modules
    assert set(declared) == listed_by_help()


def test_no_command_is_declared_in_two_places():
    twice = {name: where for name, where in declared_in_modules().items() if len(where) > 1}
    assert twice == {}
    names = [declared.name for declared in commands.every_command()]
    assert len(names) == len(set(names))


def test_declaring_a_command_again_is_refused_at_import():
    group = next(entry for entry in commands.TOP_LEVEL if isinstance(entry, commands.Group) and entry.name == "org")
    before = list(commands.TOP_LEVEL), list(group.commands)
    with pytest.raises(ValueError, match="the command org list is declared twice"):
        group.command("list", "list organizations")(lambda args, config: None)
    with pytest.raises(ValueError, match="the command migrate is declared twice"):
        commands.command("migrate", "apply database migrations")(lambda args, config: None)
    with pytest.raises(ValueError, match="the command org is declared twice"):
        commands.group("org", "organizations")
    assert (list(commands.TOP_LEVEL), list(group.commands)) == before


def test_arguments_are_declared_beside_their_command_only():
    """No module but the one that builds the parser calls argparse: a command's arguments sit on its body."""
    for path in PACKAGE.glob("*.py"):
        if path.name == "__init__.py":
            continue
        calls = {node.func.attr for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Call)
                 and isinstance(node.func, ast.Attribute)}
        assert not calls & {"add_argument", "add_parser", "add_subparsers", "set_defaults"}, path.name


def test_only_migrate_serve_and_quickstart_apply_migrations():
    assert {declared.name for declared in commands.every_command() if declared.migrates} == {
        "migrate", "serve", "quickstart"}
    assert {declared.name for declared in commands.every_command() if declared.database_must_exist} == {"backup"}


@pytest.mark.parametrize("path", sorted(PACKAGE.glob("*.py")), ids=lambda path: path.name)
def test_no_cli_module_is_long(path):
    assert len(path.read_text().splitlines()) <= 600
