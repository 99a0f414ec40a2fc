"""The operator CLI `emissions`: a stable interface for scripts (every command takes --json).

One module per command group; each command is its body with its arguments declared above it
(commands.py). `main` parses, opens the database, runs the command and turns refusals into one line.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys

import peewee as pw
from playhouse import db_url

import emissions

from .. import accounts
from .. import backup as backups
from .. import customers as customer_records
from .. import factors as factor_records
from .. import keys as api_keys
from .. import migrations
from .. import organizations
from ..config import Config, ConfigError
from ..db import bind
from ..webhooks import endpoints as webhook_endpoints
from .commands import TOP_LEVEL, CommandError, Group

from . import analytics, customers, factors, keys, operations, orgs, service, users, webhooks

# Each module declares its commands when imported; `emissions --help` lists them in this order of modules.
COMMAND_MODULES = (service, orgs, keys, customers, analytics, users, factors, webhooks, operations)

# Refusals written for people: printed as they are, on one line, with exit status 1 (docs/cli.md).
REFUSALS = (CommandError, ConfigError, organizations.OrganizationError, api_keys.ApiKeyError,
            factor_records.FactorError, webhook_endpoints.WebhookError, customer_records.CustomerError,
            accounts.WorkspaceError, backups.BackupError)


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr like every other error (exit status 2)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The parser of every declared command, in declaration order."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    parser = Parser(prog="emissions", description="Operate the emissions calculation service.",
                    epilog="Every command takes --json (one JSON object on stdout); see docs/cli.md.")
    parser.add_argument("--version", action="version", version=f"emissions {emissions.__version__}")
    top = parser.add_subparsers(dest="command", metavar="COMMAND")

    def add(where, name, declared) -> None:
        sub = where.add_parser(name, parents=[common], help=declared.help)
        sub.set_defaults(command_declared=declared)
        exclusive = {}
        for argument in declared.arguments:
            target = sub
            if argument.exclusive is not None:
                if argument.exclusive not in exclusive:
                    exclusive[argument.exclusive] = sub.add_mutually_exclusive_group()
                target = exclusive[argument.exclusive]
            target.add_argument(*argument.names, **argument.options)

    order = [module.__name__ for module in COMMAND_MODULES]
    for entry in sorted(TOP_LEVEL, key=lambda entry: order.index(entry.module)):  # stable: as declared in a module
        if isinstance(entry, Group):
            actions = top.add_parser(entry.name, help=entry.help).add_subparsers(dest="action", required=True)
            for declared in entry.commands:
                add(actions, declared.words[-1], declared)
        else:
            add(top, entry.name, entry)
    return parser


def pending_message(count: int, database_url: str, new: bool = False) -> str:
    """The one line a command meets on a database with `count` pending migrations; it names the
    database, so that `emissions migrate` is run on that one and not on a new file elsewhere."""
    message = (f"the database {migrations.database_name(database_url)} has {count} pending "
               f"migration{'s' if count != 1 else ''}: run `emissions migrate` first")
    if new:
        message += " (the file does not exist yet: if your database is elsewhere, set DATABASE_URL to it)"
    return message


def refuse_if_pending(database, database_url: str) -> None:
    """A command other than migrate, serve and quickstart changes no schema: it stops at pending migrations."""
    waiting = migrations.pending(database)
    if waiting:
        raise CommandError(pending_message(len(waiting), database_url))


def is_new_sqlite_file(url: str) -> bool:
    """A SQLite DATABASE_URL naming a file that does not exist yet (opening it would create it)."""
    if not url.startswith("sqlite"):
        return False
    path = db_url.parse(url).get("database") or ""
    return path not in ("", ":memory:") and not path.startswith("file:") and not os.path.exists(path)


def _is_text(argument: str) -> bool:
    try:
        argument.encode("utf-8")  # bytes that were not UTF-8 arrive as lone surrogates
    except UnicodeEncodeError:
        return False
    return "\x00" not in argument


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `emissions` console command."""
    argv = sys.argv[1:] if argv is None else argv
    if not all(_is_text(argument) for argument in argv):
        print("emissions: arguments must be UTF-8 text", file=sys.stderr)
        return 2
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # a usage error (already printed as one line), --help or --version
        return stop.code
    if args.command is None:  # `emissions` alone: what it can do, as --help says it
        parser.print_help()
        return 0
    declared = args.command_declared
    try:
        config = Config.from_env()
        if declared.database_must_exist:  # before binding creates an empty database at a mistyped path
            backups.require_database(config.database_url)
        elif not declared.migrates and is_new_sqlite_file(config.database_url):  # every migration is pending
            raise CommandError(pending_message(len(migrations.available()), config.database_url, new=True))
        try:
            # A connect timeout and keepalives, but no statement timeout: a command may run long (prune, migrate).
            database = bind(config.database_url, dataclasses.replace(config.postgres_waits, statement_timeout=0))
        except ValueError as exc:  # a DATABASE_URL of an unknown kind
            raise CommandError(str(exc)) from None
        if declared.migrates:
            args.applied = migrations.run(database)
        else:
            refuse_if_pending(database, config.database_url)
        status = declared.handler(args, config)
        sys.stdout.flush()  # here, not at exit: a reader that has gone is met below, not in a traceback
    except REFUSALS as exc:
        print(f"emissions: {exc}", file=sys.stderr)
        return 1
    except pw.DatabaseError as exc:
        print(f"emissions: database error: {(str(exc).splitlines() or [type(exc).__name__])[0]}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `emissions audit | head`: the reader went before the output was written
        # stdout points at /dev/null from here, so the interpreter's own flush at exit cannot fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        print("emissions: the output was closed before all of it was written", file=sys.stderr)
        return 1
    return status or 0
