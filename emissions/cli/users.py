"""`emissions user ...`: workspace logins."""
from __future__ import annotations

import getpass
import sys

from .. import accounts
from .. import audit
from .. import models
from .. import workspace
from .commands import CommandError, argument, arguments, group
from .render import emit, table, warn
from .values import organization, user

users = group("user", "workspace logins")

# The password comes from a prompt, or --password-stdin (one line); never echoed.
password_stdin = argument("--password-stdin", action="store_true",
                          help="read the password (at least 12 characters) from the first line of standard input")
password_options = arguments(
    password_stdin,
    argument("--password", help="kept for scripts; lands in shell history: prefer --password-stdin"))


def read_password(args, confirm: bool = True) -> str:
    """The password from --password (warned about), --password-stdin, or a prompt; never echoed."""
    if getattr(args, "password", None) is not None:
        warn("warning: --password lands in shell history and the process list; "
             "prefer the prompt or --password-stdin")
        return args.password
    if args.password_stdin or not sys.stdin.isatty():
        line = sys.stdin.readline()
        if not line:
            raise CommandError("no password on standard input")
        return line.rstrip("\r\n")
    try:
        password = getpass.getpass("Password: ")
        if confirm and getpass.getpass("Password again: ") != password:
            raise CommandError("the two passwords differ")
    except (EOFError, KeyboardInterrupt):
        raise CommandError("no password given") from None
    return password


@users.command("create", "create a workspace login for an organization")
@argument("--org", required=True)
@argument("--email", required=True)
@password_options
def user_create(args, config):
    org = organization(args.org)
    password = read_password(args)
    created = workspace.create_user(org, args.email, password, actor=audit.CLI_ACTOR)
    emit(args, {"email": created.email, "organization": org.slug})


@users.command("list", "list workspace logins")
@argument("--org", help="only this organization's")
def user_list(args, config):
    listed = [{"email": u.email, "organization": u.organization.slug, "created_at": models.isoformat(u.created_at),
               "last_sign_in_at": models.isoformat(u.last_sign_in_at)}
              for u in accounts.users(organization(args.org) if args.org else None)]
    emit(args, {"users": listed}, table(
        listed, lambda u: f"{u['email']}\t{u['organization']}\tcreated {u['created_at']}\t"
                          f"last sign-in {u['last_sign_in_at'] or '-'}",
        "no users"))


@users.command("delete", "remove a workspace login (its sessions end at once)")
@argument("email")
def user_delete(args, config):
    found = user(args.email)
    workspace.delete_user(found, actor=audit.CLI_ACTOR)
    emit(args, {"email": found.email, "deleted": True}, f"deleted {found.email}; its sessions ended")


@users.command("set-password", "set a login's password (its sessions end at once)")
@argument("email")
@password_stdin
def user_set_password(args, config):
    found = user(args.email)
    password = read_password(args)
    workspace.set_password(found, password, actor=audit.CLI_ACTOR)
    emit(args, {"email": found.email, "password_changed": True},
         f"password of {found.email} changed; its sessions ended")
