"""`emissions user create|list|delete|set-password`: the password from a prompt or standard input,
never required as an argument (--password still works for scripts, with a warning)."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

from emissions import cli
from emissions import workspace
from emissions.models import AuditEvent, User, WorkspaceSession
from conftest import EMISSIONS, make_org

PASSWORD = "correct horse battery"


@pytest.fixture
def emissions(config, app, monkeypatch, capsys):
    """Run `emissions ARGS` in-process with `stdin` as standard input: (status, stdout, stderr)."""
    monkeypatch.setenv("DATABASE_URL", config.database_url)

    def run(*argv, stdin=""):
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        status = cli.main(list(argv))
        out, err = capsys.readouterr()
        return status, out, err

    return run


@pytest.fixture
def acme(app):
    return make_org("acme")


def test_a_user_created_with_the_password_on_standard_input_can_sign_in(emissions, acme):
    status, out, err = emissions("user", "create", "--org", "acme", "--email", "Ada@Acme.example",
                                 "--password-stdin", "--json", stdin=PASSWORD + "\n")
    assert (status, json.loads(out), err) == (0, {"email": "ada@acme.example", "organization": "acme"}, "")
    assert workspace.authenticate_user("ada@acme.example", PASSWORD) is not None
    assert AuditEvent.get().action == "user.created" and AuditEvent.get().actor == "cli"


def test_the_password_argument_still_works_but_warns_about_shell_history(emissions, acme):
    status, out, err = emissions("user", "create", "--org", "acme", "--email", "ada@acme.example",
                                 "--password", PASSWORD, "--json")
    assert status == 0 and json.loads(out)["email"] == "ada@acme.example"
    assert "warning: --password lands in shell history" in err and len(err.strip().splitlines()) == 1


def test_a_short_or_missing_password_is_one_line_and_creates_nobody(emissions, acme):
    assert emissions("user", "create", "--org", "acme", "--email", "a@acme.example", stdin="short\n")[2] == (
        "emissions: password must be at least 12 characters\n")
    assert emissions("user", "create", "--org", "acme", "--email", "a@acme.example", stdin="")[2] == (
        "emissions: no password on standard input\n")
    assert User.select().count() == 0


def test_set_password_reads_standard_input_ends_sessions_and_takes_no_argument(emissions, acme, secret):
    user = workspace.create_user(acme, "ada@acme.example", PASSWORD, actor="cli")
    workspace.Sessions(secret).issue(user)
    status, out, _ = emissions("user", "set-password", "ada@acme.example", "--json", stdin="a brand new password\n")
    assert (status, json.loads(out)) == (0, {"email": "ada@acme.example", "password_changed": True})
    assert WorkspaceSession.select().count() == 0
    assert workspace.authenticate_user("ada@acme.example", "a brand new password") is not None
    assert emissions("user", "set-password", "ada@acme.example", "--password", "x" * 20)[0] == 2


def test_list_and_delete(emissions, acme, secret):
    user = workspace.create_user(acme, "ada@acme.example", PASSWORD, actor="cli")
    workspace.Sessions(secret).issue(user)
    status, out, _ = emissions("user", "list", "--org", "acme", "--json")
    assert [u["email"] for u in json.loads(out)["users"]] == ["ada@acme.example"]
    assert emissions("user", "list")[1].startswith("ada@acme.example\tacme\tcreated ")
    assert "last sign-in" in emissions("user", "list")[1]
    status, out, _ = emissions("user", "delete", "ada@acme.example", "--json")
    assert (status, json.loads(out)) == (0, {"email": "ada@acme.example", "deleted": True})
    assert (User.select().count(), WorkspaceSession.select().count()) == (0, 0)
    assert emissions("user", "delete", "ada@acme.example")[2] == "emissions: no user with email ada@acme.example\n"


def test_the_console_command_reads_the_password_from_a_pipe(config, app, acme):
    result = subprocess.run([str(EMISSIONS), "user", "create", "--org", "acme", "--email", "pipe@acme.example",
                             "--json"], input=PASSWORD + "\n", capture_output=True, text=True, timeout=60,
                            env={**os.environ, "DATABASE_URL": config.database_url})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["email"] == "pipe@acme.example" and result.stderr == ""
