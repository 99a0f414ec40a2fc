"""How a command is declared: its arguments stacked on its body, as sqlite-utils' commands read.

    @orgs.command("update", "change an organization")
    @argument("slug")
    @argument("--status", choices=["active", "suspended"])
    def org_update(args, config): ...

A body takes the parsed arguments and the Config and returns an exit status (None is 0).
"""
from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field

Handler = Callable[[argparse.Namespace, object], "int | None"]


class CommandError(Exception):
    """A command that cannot be carried out; its message is the one line printed on stderr."""


@dataclass
class Argument:
    """One add_argument call; `exclusive` names a mutually exclusive group of the command's."""

    names: tuple[str, ...]
    options: dict
    exclusive: str | None = None


@dataclass
class Command:
    """A command: its words (`("org", "create")` or `("migrate",)`), help, arguments and body."""

    words: tuple[str, ...]
    help: str
    handler: Handler
    arguments: list[Argument]
    migrates: bool = False  # applies pending migrations first; every other command refuses to run on them
    database_must_exist: bool = False  # checked before binding, which would create an empty one

    @property
    def name(self) -> str:
        return " ".join(self.words)

    @property
    def module(self) -> str:
        """The module that declares it."""
        return self.handler.__module__


@dataclass
class Group:
    """A command word with commands under it (`emissions org ...`)."""

    name: str
    help: str
    commands: list[Command] = field(default_factory=list)

    @property
    def module(self) -> str:
        """The module that declares its commands."""
        return self.commands[0].module if self.commands else ""

    def command(self, name: str, help: str, **declared) -> Callable[[Handler], Handler]:
        """Declare the function below as `emissions <group> <name>`."""
        return _declare((self.name, name), help, self.commands, **declared)


# The top level as declared; `emissions --help` lists it module by module (cli.COMMAND_MODULES), as declared in each.
TOP_LEVEL: list[Command | Group] = []


def group(name: str, help: str) -> Group:
    """A new command group, listed where it is declared."""
    found = Group(name, help)
    _claim(name)
    TOP_LEVEL.append(found)
    return found


def command(name: str, help: str, **declared) -> Callable[[Handler], Handler]:
    """Declare the function below as the top-level command `emissions <name>`."""
    return _declare((name,), help, TOP_LEVEL, **declared)


def argument(*names: str, exclusive: str | None = None, **options) -> Callable[[Handler], Handler]:
    """An argparse argument of the command declared above it (arguments read top to bottom)."""
    def add(handler: Handler) -> Handler:
        handler.__dict__.setdefault("cli_arguments", []).insert(0, Argument(names, options, exclusive))
        return handler
    return add


def arguments(*stacked: Callable[[Handler], Handler]) -> Callable[[Handler], Handler]:
    """Several `argument`s shared by commands, as one decorator."""
    def add(handler: Handler) -> Handler:
        for each in reversed(stacked):
            handler = each(handler)
        return handler
    return add


def _claim(name: str) -> None:
    if any(entry.name == name for entry in TOP_LEVEL):
        raise ValueError(f"the command {name} is declared twice")


def _declare(words: tuple[str, ...], help: str, where: list, **declared) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        if hasattr(handler, "cli_command"):
            raise ValueError(f"{handler.__name__} is already the command {handler.cli_command.name}")
        if len(words) == 1:
            _claim(words[0])
        elif any(each.words == words for each in where):
            raise ValueError(f"the command {' '.join(words)} is declared twice")
        declaration = Command(words, help, handler, handler.__dict__.pop("cli_arguments", []), **declared)
        handler.cli_command = declaration
        where.append(declaration)
        return handler
    return register


def every_command() -> list[Command]:
    """Every declared command, as declared."""
    return [each for entry in TOP_LEVEL for each in (entry.commands if isinstance(entry, Group) else [entry])]


def whole_number(minimum: int, maximum: int):
    """An argparse type: a whole number within [minimum, maximum], or a usage error."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(f"must be from {minimum} to {maximum}")
        return value
    return parse


ENVIRONMENTS = ["test", "live"]
