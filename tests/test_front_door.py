"""A newcomer's first minutes: another port, the workspace and a sign-in from quickstart's own words,
`--scopes all`, and the commands that migrate."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from emissions.cli import service as cli_service
from emissions import migrations
from emissions import db as db_setup
from emissions import models
from emissions.models import SCOPES
from conftest import EMISSIONS, free_port, output_until_serving

README = Path(__file__).resolve().parent.parent / "README.md"
PASSWORD = "correct horse battery"


@pytest.fixture(autouse=True)
def migrated(request):
    """Commands run in-process meet a migrated database, as after `emissions migrate`."""
    if "emissions" in request.fixturenames:
        migrations.run(db_setup.bind(request.getfixturevalue("config").database_url))


def environment_without_database_url() -> dict:
    return {name: value for name, value in os.environ.items() if name != "DATABASE_URL"}


def stop(process: subprocess.Popen) -> tuple[str, str]:
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    return out, err


def test_the_readme_says_how_to_pick_another_port_right_after_the_first_command():
    section = README.read_text(encoding="utf-8").split("## Two commands", 1)[1]
    first_block_end = section.index("```", section.index("```sh") + 5) + 3
    following = section[first_block_end:].strip().split("\n\n", 1)[0]
    assert "emissions quickstart" in section[:first_block_end]
    assert re.search(r"emissions quickstart --port [0-9]+", following), following


def test_quickstart_prints_the_workspace_and_a_sign_in_command_that_works_as_printed(tmp_path):
    port = free_port()
    process = subprocess.Popen([str(EMISSIONS), "quickstart", "--port", str(port)], cwd=tmp_path,
                               env=environment_without_database_url(), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        text = output_until_serving(process)
        workspace = f"http://127.0.0.1:{port}/workspace"
        assert f"The workspace: {workspace}\n" in text
        [command] = [line for line in text.splitlines() if " user create --org sandbox " in line]
        assert command == f"{EMISSIONS} user create --org sandbox --email you@example.com"
        made = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=environment_without_database_url(),
                              input=f"{PASSWORD}\n", capture_output=True, text=True, timeout=60)
        assert made.returncode == 0, made.stderr
        browser = requests.Session()
        page = browser.get(f"{workspace}/login", timeout=10)
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
        signed_in = browser.post(f"{workspace}/login", data={"csrf": csrf, "email": "you@example.com",
                                                             "password": PASSWORD}, timeout=30)
        for _ in range(1000):  # the page that waits for the password check looks again at once, as a browser does
            if "Signing you in" not in signed_in.text:
                break
            signed_in = browser.get(f"{workspace}/login/wait", timeout=30)
        assert signed_in.status_code == 200 and "Overview" in signed_in.text, signed_in.text
        assert signed_in.url == workspace
    finally:
        stop(process)


def test_quickstart_with_json_gives_the_workspace_and_the_sign_in_command(tmp_path):
    port = free_port()
    process = subprocess.Popen([str(EMISSIONS), "quickstart", "--port", str(port), "--json"], cwd=tmp_path,
                               env=environment_without_database_url(), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        announced = json.loads(process.stdout.readline())
    finally:
        stop(process)
    assert announced["workspace"] == f"http://127.0.0.1:{port}/workspace"
    assert announced["sign_in"] == f"{EMISSIONS} user create --org sandbox --email you@example.com"


def test_scopes_all_means_the_four_scopes(ok):
    ok("org", "create", "--name", "Acme", "--slug", "acme")
    created = ok("key", "create", "--org", "acme", "--env", "test", "--scopes", "all")
    assert created["scopes"] == sorted(SCOPES) and len(SCOPES) == 4
    [listed] = ok("key", "list", "--org", "acme")["keys"]
    assert listed["scopes"] == sorted(SCOPES)


def test_all_is_no_scope_beside_others(ok, fails):
    ok("org", "create", "--name", "Acme", "--slug", "acme")
    assert "unknown scope(s): all" in fails("key", "create", "--org", "acme", "--env", "test",
                                            "--scopes", "all,emissions:read")


@pytest.mark.parametrize("command", ["serve", "quickstart"])
def test_serve_and_quickstart_migrate_a_new_database_then_other_commands_run(tmp_path, command):
    port = free_port()
    process = subprocess.Popen([str(EMISSIONS), command, "--port", str(port)], cwd=tmp_path,
                               env=environment_without_database_url(), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        assert f"Serving on http://127.0.0.1:{port}" in output_until_serving(process)
    finally:
        stop(process)
    listed = subprocess.run([str(EMISSIONS), "org", "list", "--json"], cwd=tmp_path,
                            env=environment_without_database_url(), capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    slugs = [org["slug"] for org in json.loads(listed.stdout)["organizations"]]
    assert slugs == (["sandbox"] if command == "quickstart" else [])


def test_migrate_then_org_list_on_an_unmigrated_postgres_schema(tmp_path):
    """The pending check reads the schema the URL names (its search_path), creating nothing there."""
    from test_migrations import empty_postgres_schema
    with empty_postgres_schema("front_door") as url:
        environment = {**environment_without_database_url(), "DATABASE_URL": url}
        refused = subprocess.run([str(EMISSIONS), "org", "list"], env=environment, capture_output=True, text=True,
                                 timeout=60)
        count = len(migrations.available())
        assert (refused.returncode, refused.stderr) == (
            1, f"emissions: the database {migrations.database_name(url)} has {count} pending migrations: run "
               "`emissions migrate` first\n")
        database = db_setup.open_database(url)
        assert database.execute_sql("SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()"
                                    ).fetchone()[0] == 0
        database.close()
        assert subprocess.run([str(EMISSIONS), "migrate"], env=environment, capture_output=True,
                              timeout=60).returncode == 0
        listed = subprocess.run([str(EMISSIONS), "org", "list", "--json"], env=environment, capture_output=True,
                                text=True, timeout=60)
        assert (listed.returncode, json.loads(listed.stdout)) == (0, {"organizations": []})


@pytest.mark.parametrize("program, expected", [
    (".venv/bin/emissions", ".venv/bin/emissions"),
    ("/opt/emissions/dist/emissions.pyz", "python3 /opt/emissions/dist/emissions.pyz"),
    ("/srv/app/emissions/__main__.py", "{python} -m emissions"),
])
def test_the_sign_in_command_is_the_emissions_command_as_it_was_typed(monkeypatch, program, expected):
    monkeypatch.setattr("sys.argv", [program, "quickstart"])
    assert cli_service.sign_in_command() == (expected.format(python=sys.executable)
                                     + " user create --org sandbox --email you@example.com")
