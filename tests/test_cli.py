"""The operator CLI of decisions section 9: --json shapes, effects seen through the API, one-line errors."""
from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest
import requests

import emissions as package
from emissions import sandbox
from emissions.cli import service as cli_service
from emissions import factor_files
from emissions import migrations
from emissions import db as db_setup
from emissions import models
from conftest import EMISSIONS, LiveServer, auth_headers, free_port, logistics_body, output_until_serving

KEY_FORMAT = re.compile(r"^service_(test|live)_[0-9A-Za-z]{32,}$")
ORG_FIELDS = {"slug", "name", "status", "entitled", "live_capacity", "test_capacity"}
FACTOR_FIELDS = {"reference", "version", "status", "mode", "value", "ttw", "wtt", "source_row", "radiative_forcing",
                 "publication", "unit", "name", "source", "region", "valid_from", "valid_to", "organization"}


def calculate(client, key: str, idempotency_key: str = "idem-1", **overrides):
    return client.post_json("/v1/emissions/logistics", logistics_body(**overrides),
                            headers=auth_headers(key, idempotency_key), status="*")


@pytest.fixture(autouse=True)
def migrated(request):
    """Commands run in-process (`emissions`, `ok`, `fails`) meet a migrated database, as after `emissions migrate`."""
    if "emissions" in request.fixturenames:
        migrations.run(db_setup.bind(request.getfixturevalue("config").database_url))


# --- as a real subprocess ------------------------------------------------------------------------

def run_command(*argv, cwd: Path, **env) -> subprocess.CompletedProcess:
    environment = {name: value for name, value in os.environ.items() if name != "DATABASE_URL"}
    environment.update(env)
    return subprocess.run([str(EMISSIONS), *argv], cwd=cwd, env=environment, capture_output=True, text=True,
                          timeout=60)


def test_migrate_applies_every_migration_once(tmp_path):
    names = sorted(path.stem for path in migrations.available())
    url = f"sqlite:///{tmp_path / 'cli.sqlite3'}"
    first = run_command("migrate", "--json", cwd=tmp_path, DATABASE_URL=url)
    assert (first.returncode, first.stderr) == (0, "")
    assert json.loads(first.stdout) == {"applied": names}
    again = run_command("migrate", "--json", cwd=tmp_path, DATABASE_URL=url)
    assert json.loads(again.stdout) == {"applied": []}
    assert "0001_initial" in names


def test_without_database_url_the_database_is_a_file_in_the_working_directory(tmp_path):
    migrated = run_command("migrate", cwd=tmp_path)
    assert migrated.returncode == 0, migrated.stderr
    assert migrated.stdout.startswith(f"database: {tmp_path / 'emissions.sqlite3'}\napplied: 0001_initial, ")
    assert (tmp_path / "emissions.sqlite3").exists()
    result = run_command("org", "create", "--name", "Acme", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr


def sqlite_tables(path: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(path)) as connection:
        return [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]


def test_a_command_on_a_new_database_exits_1_naming_migrate_and_creates_nothing(tmp_path):
    result = run_command("org", "list", cwd=tmp_path)
    count = len(migrations.available())
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        f"emissions: the database {tmp_path / 'emissions.sqlite3'} has {count} pending migrations: run `emissions "
        "migrate` first (the file does not exist yet: if your database is elsewhere, set DATABASE_URL to it)\n")
    assert not (tmp_path / "emissions.sqlite3").exists()


def test_a_command_run_from_another_directory_names_the_database_it_would_use(tmp_path):
    (tmp_path / "home").mkdir()
    (tmp_path / "elsewhere").mkdir()
    assert run_command("migrate", cwd=tmp_path / "home").returncode == 0
    result = run_command("org", "list", cwd=tmp_path / "elsewhere")
    assert result.returncode == 1
    assert f"the database {tmp_path / 'elsewhere' / 'emissions.sqlite3'} has " in result.stderr
    up_to_date = run_command("migrate", cwd=tmp_path / "home")
    assert up_to_date.stdout == f"database: {tmp_path / 'home' / 'emissions.sqlite3'}\napplied: nothing, up to date\n"


def test_a_postgresql_database_is_named_without_its_password():
    assert migrations.database_name("postgresql://app:s3cret@db.example:5432/emissions?sslmode=require") == (
        "postgresql://app@db.example:5432/emissions?sslmode=require")
    assert migrations.database_name("postgresql://:s3cret@db.example/emissions") == "postgresql://db.example/emissions"
    assert migrations.database_name("postgresql://db.example/emissions") == "postgresql://db.example/emissions"


def test_a_command_on_an_unmigrated_database_exits_1_and_creates_no_tables(tmp_path):
    sqlite3.connect(tmp_path / "emissions.sqlite3").close()  # an empty file, as a mistaken touch leaves
    result = run_command("org", "list", "--json", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.count("\n") == 1 and "run `emissions migrate` first" in result.stderr
    assert sqlite_tables(tmp_path / "emissions.sqlite3") == []
    assert run_command("migrate", cwd=tmp_path).returncode == 0
    listed = run_command("org", "list", "--json", cwd=tmp_path)
    assert (listed.returncode, json.loads(listed.stdout)) == (0, {"organizations": []})


def test_a_command_after_an_upgrade_names_the_migrations_still_to_apply(tmp_path):
    url = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    assert run_command("migrate", cwd=tmp_path, DATABASE_URL=url).returncode == 0
    with contextlib.closing(sqlite3.connect(tmp_path / "old.sqlite3")) as connection, connection:
        connection.execute("DELETE FROM migration_history WHERE name = ?", (migrations.available()[-1].stem,))
    result = run_command("key", "list", "--org", "acme", cwd=tmp_path, DATABASE_URL=url)
    assert (result.returncode, result.stderr) == (
        1, f"emissions: the database {tmp_path / 'old.sqlite3'} has 1 pending migration: run `emissions migrate` first\n")


@pytest.mark.parametrize("argv, env, status, message", [
    (["org", "update", "nobody"], {}, 1, "pending migrations: run `emissions migrate` first"),
    (["org"], {}, 2, "the following arguments are required"),
    (["migrate"], {"SECRET_KEY": "too-short"}, 1, "SECRET_KEY must be at least 32 characters"),
    (["factor", "create", "--reference", "x"], {}, 2, "the following arguments are required"),
    (["migrate"], {"DATABASE_URL": "mysql://localhost/x"}, 1, "DATABASE_URL must start with"),
    (["migrate"], {"RATE_LIMIT_BURST": "lots"}, 1, "RATE_LIMIT_BURST must be an integer"),
])
def test_a_failing_command_exits_non_zero_with_one_line_on_stderr(tmp_path, argv, env, status, message):
    env.setdefault("DATABASE_URL", f"sqlite:///{tmp_path / 'cli.sqlite3'}")
    result = run_command(*argv, cwd=tmp_path, **env)
    assert result.returncode == status
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr


def test_emissions_alone_prints_the_help_and_touches_no_database(tmp_path):
    result = run_command(cwd=tmp_path)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.startswith("usage: emissions") and "backup" in result.stdout and "audit" in result.stdout
    assert not (tmp_path / "emissions.sqlite3").exists()


def test_version_prints_the_installed_version(tmp_path):
    result = run_command("--version", cwd=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (0, f"emissions {package.__version__}\n", "")


def test_an_unreachable_database_is_one_line(fails, monkeypatch, tmp_path):
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'missing' / 'x.sqlite3'}")
    assert "database error" in fails("migrate")


# --- organizations -------------------------------------------------------------------------------

def test_org_create_prints_the_organization(ok):
    assert ok("org", "create", "--name", "Acme Freight Ltd") == {
        "slug": "acme-freight-ltd", "name": "Acme Freight Ltd", "status": "active", "entitled": True}
    second = ok("org", "create", "--name", "Acme Freight Ltd")
    assert second["slug"] == "acme-freight-ltd-2"
    custom = ok("org", "create", "--name", "Globex", "--slug", "gx", "--not-entitled", "--live-capacity", "5")
    assert custom == {"slug": "gx", "name": "Globex", "status": "active", "entitled": False}
    assert ok("org", "update", "gx")["live_capacity"] == 5


@pytest.mark.parametrize("argv, message", [
    (["--name", "Acme", "--slug", "Bad Slug"], "slug must be"),
    (["--name", "Acme", "--slug", "taken"], "already exists"),
    (["--name", ""], "name must be"),
    (["--name", "n" * 201], "name must be"),
    (["--name", "Acme", "--live-capacity", "-1"], "capacity must be"),
    (["--name", "Acme", "--live-capacity", "many"], "capacity must be"),
])
def test_org_create_refuses_bad_input(ok, fails, argv, message):
    ok("org", "create", "--name", "Taken", "--slug", "taken")
    assert message in fails("org", "create", *argv)


@pytest.mark.on_both
def test_org_update_changes_what_the_api_sees(ok, fails, client, app, acme):
    assert calculate(client, acme.key, "a").status_int == 201
    assert ok("org", "update", "acme", "--status", "suspended")["status"] == "suspended"
    assert calculate(client, acme.key, "b").json["error"]["code"] == "ORGANIZATION_NOT_ACTIVE"
    updated = ok("org", "update", "acme", "--status", "active", "--not-entitled")
    assert (updated["status"], updated["entitled"]) == ("active", False)
    assert calculate(client, acme.key, "b").json["error"]["code"] == "FEATURE_NOT_ENTITLED"
    assert ok("org", "update", "acme", "--entitled", "--test-capacity", "1") == {
        "slug": "acme", "name": "Acme", "status": "active", "entitled": True, "live_capacity": None,
        "test_capacity": 1}
    assert calculate(client, acme.key, "b").json["error"]["code"] == "USAGE_LIMIT_REACHED"
    assert ok("org", "update", "acme", "--test-capacity", "none", "--live-capacity", "7")["live_capacity"] == 7
    assert calculate(client, acme.key, "b").status_int == 201
    assert ok("org", "update", "acme", "--live-capacity", "none")["live_capacity"] is None
    assert "capacity must be" in fails("org", "update", "acme", "--test-capacity", "-3")
    assert "no organization" in fails("org", "update", "nobody", "--status", "active")
    assert "invalid choice" in fails("org", "update", "acme", "--status", "deleted", status=2)
    # Both at once is a mistake of the script that built the line, not "the last one wins".
    assert "not allowed with" in fails("org", "update", "acme", "--entitled", "--not-entitled", status=2)
    assert calculate(client, acme.key, "c").status_int == 201  # still entitled: nothing was changed


# --- keys ----------------------------------------------------------------------------------------

@pytest.mark.on_both
def test_key_create_prints_the_key_once_and_stores_only_a_hash(ok, client, acme):
    created = ok("key", "create", "--org", "acme", "--env", "test", "--scopes",
                 "emissions:read, emissions:calculate", "--name", "ci")
    assert set(created) == {"id", "key", "environment", "scopes"}
    assert (created["environment"], created["scopes"]) == ("test", ["emissions:calculate", "emissions:read"])
    assert KEY_FORMAT.match(created["key"]) and created["key"].startswith("service_test_")
    assert calculate(client, created["key"]).status_int == 201
    row = models.ApiKey.get_by_id(created["id"])
    stored = json.dumps({name: str(value) for name, value in row.__data__.items()})
    assert created["key"] not in stored and created["key"][13:] not in stored
    live = ok("key", "create", "--org", "acme", "--env", "live", "--scopes", "customers:read")
    assert live["key"].startswith("service_live_") and live["environment"] == "live"


def test_key_create_without_json_prints_the_key_on_the_first_line(emissions, acme):
    status, out, err = emissions("key", "create", "--org", "acme", "--env", "test", "--scopes", "emissions:read")
    assert status == 0 and KEY_FORMAT.match(out.splitlines()[0])


def expire(key_id: str) -> None:
    """Move a key's expiry into the past, as the passing of time would."""
    models.ApiKey.update(expires_at=models.utcnow() - dt.timedelta(minutes=1)).where(
        models.ApiKey.id == key_id).execute()


def test_an_expired_key_is_refused_by_the_api(ok, client, acme):
    soon = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)).isoformat()
    created = ok("key", "create", "--org", "acme", "--env", "test", "--scopes", "emissions:calculate",
                 "--expires-at", soon)
    expire(created["id"])
    assert calculate(client, created["key"]).json["error"]["code"] == "API_KEY_EXPIRED"
    future = ok("key", "create", "--org", "acme", "--env", "test", "--scopes", "emissions:calculate",
                "--expires-at", "2999-01-01T00:00:00Z")
    assert calculate(client, future["key"]).status_int == 201


@pytest.mark.parametrize("argv, message", [
    (["--org", "acme", "--env", "test", "--scopes", "emissions:write"], "unknown scope"),
    (["--org", "acme", "--env", "test", "--scopes", ","], "at least one scope"),
    (["--org", "nobody", "--env", "test", "--scopes", "emissions:read"], "no organization"),
    (["--org", "acme", "--env", "test", "--scopes", "emissions:read", "--expires-at", "soon"], "ISO 8601"),
    (["--org", "acme", "--env", "test", "--scopes", "emissions:read", "--name", "n" * 201], "name must be"),
])
def test_key_create_refuses_bad_input(fails, acme, argv, message):
    assert message in fails("key", "create", *argv)


def test_key_create_refuses_an_unknown_environment(fails, acme):
    assert "invalid choice" in fails("key", "create", "--org", "acme", "--env", "prod", "--scopes", "x", status=2)


def test_key_revoke_stops_the_key_at_once(ok, fails, client, acme):
    created = ok("key", "create", "--org", "acme", "--env", "test", "--scopes", "emissions:calculate")
    assert calculate(client, created["key"], "a").status_int == 201
    assert ok("key", "revoke", created["id"]) == {"id": created["id"], "revoked": True}
    assert calculate(client, created["key"], "b").json["error"]["code"] == "API_KEY_REVOKED"
    assert ok("key", "revoke", created["id"]) == {"id": created["id"], "revoked": True}  # again: no change
    assert "no API key" in fails("key", "revoke", "key_nothing")


# --- customers -----------------------------------------------------------------------------------

def test_customer_create_prints_the_customer(ok, fails, client, acme):
    assert ok("customer", "create", "--org", "acme", "--env", "test", "--reference", "north-1", "--name",
              "North Ltd", "--country", "gb") == {
        "reference": "north-1", "name": "North Ltd", "status": "active", "country_code": "GB", "analytics": None,
        "environment": "test", "organization": "acme"}
    assert calculate(client, acme.key, customer_reference="north-1").status_int == 201
    live = ok("customer", "create", "--org", "acme", "--env", "live", "--reference", "north-1", "--name", "North")
    assert (live["environment"], live["country_code"]) == ("live", None)
    assert "already exists" in fails("customer", "create", "--org", "acme", "--env", "test", "--reference",
                                     "north-1", "--name", "Again")
    assert fails("customer", "create", "--org", "acme", "--env", "test", "--reference", "bad ref", "--name", "X")


def test_a_customer_created_suspended_cannot_be_charged(ok, client, acme):
    ok("customer", "create", "--org", "acme", "--env", "test", "--reference", "paused", "--name", "P",
       "--status", "suspended")
    assert calculate(client, acme.key, customer_reference="paused").json["error"]["code"] == "CUSTOMER_ACCESS_DENIED"


# --- factors -------------------------------------------------------------------------------------

FACTOR = ["--mode", "ROAD", "--name", "Van", "--source", "Fleet data 2026", "--valid-from", "2026-01-01"]


@pytest.mark.on_both
def test_factor_create_activate_and_retire_govern_what_calculations_use(ok, client, acme, globex):
    assert ok("factor", "create", "--reference", "van", "--value", "0.5", *FACTOR) == {
        "reference": "van", "version": 1, "status": "active"}
    assert calculate(client, acme.key, "a", factor_reference="van").json["emissions"]["value"] == 2000
    assert calculate(client, globex.key, "a", factor_reference="van").status_int == 201  # global
    assert ok("factor", "create", "--reference", "van", "--value", "0.25", *FACTOR) == {
        "reference": "van", "version": 2, "status": "active"}
    assert ok("factor", "create", "--reference", "van", "--value", "0.1", "--draft", *FACTOR) == {
        "reference": "van", "version": 3, "status": "draft"}
    assert calculate(client, acme.key, "b", factor_reference="van").json["factor"]["version"] == 2
    activated = ok("factor", "activate", "van", "--version", "3")
    assert activated == {"reference": "van", "version": 3, "status": "active", "mode": "ROAD", "value": "0.1",
                         "ttw": None, "wtt": None, "source_row": None, "radiative_forcing": None,
                         "publication": None, "unit": "kgCO2e/tkm", "name": "Van",
                         "source": "Fleet data 2026", "region": None, "valid_from": "2026-01-01", "valid_to": None,
                         "organization": None}
    assert set(activated) == FACTOR_FIELDS
    statuses = {row["version"]: row["status"] for row in ok("factor", "list")["factors"]
                if row["reference"] == "van"}
    assert statuses == {1: "superseded", 2: "superseded", 3: "active"}
    assert calculate(client, acme.key, "c", factor_reference="van").json["emissions"]["value"] == 400
    assert ok("factor", "retire", "van")["status"] == "retired"
    assert calculate(client, acme.key, "d", factor_reference="van").json["error"]["code"] == "FACTOR_NOT_FOUND"


def test_a_factor_created_for_an_organization_is_private_to_it(ok, client, acme, globex):
    assert ok("factor", "create", "--reference", "acme-van", "--value", "0.5", "--org", "acme", *FACTOR) == {
        "reference": "acme-van", "version": 1, "status": "active"}
    assert calculate(client, acme.key, factor_reference="acme-van").status_int == 201
    assert calculate(client, globex.key, factor_reference="acme-van").json["error"]["code"] == "FACTOR_NOT_FOUND"
    assert ok("factor", "activate", "acme-van", "--version", "1")["organization"] == "acme"


@pytest.mark.on_both
@pytest.mark.parametrize("argv, message", [
    (["--reference", "v", "--value", "abc", *FACTOR], "value must be a decimal number"),
    (["--reference", "v", "--value", "0", *FACTOR], "value must be above 0"),
    (["--reference", "v", "--value", "-1", *FACTOR], "value must be above 0"),
    (["--reference", "v", "--value", "NaN", *FACTOR], "value must be above 0"),
    (["--reference", "v", "--value", "101", *FACTOR], "at most 100"),
    (["--reference", "v", "--value", "0.1", *FACTOR, "--valid-to", "2025-12-31"], "valid_to must not be before"),
    (["--reference", "v", "--value", "0.1", *FACTOR[:-2], "--valid-from", "01/01/2026"], "not a date"),
    (["--reference", "v", "--value", "0.1", *FACTOR, "--org", "nobody"], "no organization"),
    (["--reference", "r" * 121, "--value", "0.1", *FACTOR], "reference must be"),
    (["--reference", "v", "--value", "0.1", "--mode", "ROAD", "--name", "n" * 201, "--source", "s"], "name must be"),
    (["--reference", "v", "--value", "0.1", "--mode", "ROAD", "--name", "n", "--source", " "], "source must be"),
    (["--reference", "road-default", "--value", "0.1", "--mode", "SEA", "--name", "n", "--source", "s"],
     "is a ROAD factor"),
    (["--reference", "road-default", "--value", "0.1", *FACTOR, "--org", "acme"], "already belongs to"),
])
def test_factor_create_refuses_bad_input(fails, acme, argv, message):
    assert message in fails("factor", "create", *argv)
    assert not models.Factor.select().where(models.Factor.reference == "v").exists()


def test_factor_activate_and_retire_refuse_what_does_not_exist(ok, fails, acme):
    assert "no factor road-default version 9" in fails("factor", "activate", "road-default", "--version", "9")
    assert "no factor nothing" in fails("factor", "activate", "nothing", "--version", "1")
    ok("factor", "retire", "road-default")
    assert "no active version" in fails("factor", "retire", "road-default")
    assert "is not a whole number" in fails("factor", "activate", "road-default", "--version", "one", status=2)


def test_arguments_that_are_not_utf8_text_are_refused(fails, acme):
    assert "UTF-8" in fails("org", "create", "--name", "caf\udce9", status=2)


# --- quickstart --------------------------------------------------------------------------------------

def test_seed_sandbox_is_repeatable_and_gives_a_new_key_each_time(config, app):
    first, second = cli_service.seed_sandbox(config), cli_service.seed_sandbox(config)
    assert first != second and KEY_FORMAT.match(first) and KEY_FORMAT.match(second)
    assert models.Organization.select().where(models.Organization.slug == "sandbox").count() == 1
    assert models.Customer.select().where(models.Customer.reference == "demo-customer").count() == 1
    library_file = json.loads(factor_files.LIBRARY_PATH.read_text())
    library = models.Factor.select().count()
    assert library == len(library_file["factors"]) + len(library_file["aliases"]) >= 3
    cli_service.seed_sandbox(config)
    assert models.Factor.select().count() == library
    # In the audit trail as if made by their own commands: the organization and customer once, each key.
    actions = [event.action for event in models.AuditEvent.select().order_by(models.AuditEvent.id)
               if event.action != "factor.library_loaded"]
    assert actions == ["org.created", "customer.created", "key.created", "key.created", "key.created"]


def test_seeding_the_sandbox_is_one_transaction(config, app):
    # The key comes last: refusing its name must leave no organization, customer, factor or audit row behind.
    with pytest.raises(ValueError, match="name must be at most 200 characters"):
        sandbox.seed(actor="cli", secret_key=config.secret_key, key_name="k" * 201)
    for table in (models.Organization, models.Customer, models.Factor, models.ApiKey, models.AuditEvent):
        assert table.select().count() == 0, table.__name__


def parse_curl(text: str) -> tuple[str, dict, str]:
    """The URL, headers and body of the printed curl command."""
    url = re.search(r"curl -sS -X POST (\S+)", text).group(1)
    headers = dict(header.split(": ", 1) for header in re.findall(r"-H '([^']*)'", text))
    body = re.search(r"-d '([^']*)'", text).group(1)
    return url, headers, body


def expected_demo_emissions() -> float:
    factor = models.Factor.get((models.Factor.reference == sandbox.QUICKSTART_FACTOR)
                               & (models.Factor.status == "active"))
    value = Fraction(4000) * Fraction(factor.value)  # 12.5 t x 320 km
    return float(Decimal(value.numerator) / Decimal(value.denominator))  # 6 places or fewer: exact enough


def test_the_printed_curl_command_works_against_a_real_server(config, app):
    key = cli_service.seed_sandbox(config)
    with LiveServer(app) as server:
        port = int(server.url.rsplit(":", 1)[1])
        text = cli_service.quickstart_curl(key, "0.0.0.0", port)
        url, headers, body = parse_curl(text)
        assert url == f"http://127.0.0.1:{port}/v1/emissions/logistics"
        response = requests.post(url, data=body.encode(), headers=headers, timeout=10)
        assert response.status_code == 201, response.text
        assert response.json()["customer"] == {"reference": "demo-customer"}
        assert response.json()["emissions"]["value"] == pytest.approx(expected_demo_emissions(), abs=1e-6)
        if shutil.which("curl") and shutil.which("bash"):
            printed = subprocess.run(["bash", "-c", text], capture_output=True, text=True, timeout=30)
            assert printed.returncode == 0, printed.stderr
            assert json.loads(printed.stdout)["id"] == response.json()["id"]  # the same Idempotency-Key: a replay


@pytest.mark.skipif(not shutil.which("curl") or not shutil.which("bash"), reason="needs curl and bash")
def test_quickstart_as_the_readme_runs_it(tmp_path):
    port = free_port()
    environment = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    process = subprocess.Popen([str(EMISSIONS), "quickstart", "--port", str(port)], cwd=tmp_path, env=environment,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        text = output_until_serving(process)
        assert "Test webhook endpoints may be on this machine" in text and "WEBHOOK_ALLOW_PRIVATE_TEST" in text
        curl = text[text.index("curl "):text.index("The workspace:")].strip()
        result = subprocess.run(["bash", "-c", curl], capture_output=True, text=True, timeout=30)
        calculation = json.loads(result.stdout)
        assert calculation["status"] == "succeeded" and calculation["customer"] == {"reference": "demo-customer"}
        assert calculation["activity"] == {"value": 4000, "unit": "tkm"}
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert "Stopped." in out
    assert (tmp_path / "emissions.sqlite3").exists()


def test_serve_and_quickstart_with_json_print_exactly_one_json_object(tmp_path):
    environment = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    for command in ("serve", "quickstart"):
        port = free_port()
        process = subprocess.Popen([str(EMISSIONS), command, "--port", str(port), "--json"], cwd=tmp_path,
                                   env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            announced = json.loads(process.stdout.readline())
            assert announced["url"] == f"http://127.0.0.1:{port}"
            if command == "quickstart":
                assert KEY_FORMAT.match(announced["key"]) and announced["customer"] == "demo-customer"
                assert announced["private_test_endpoints"] is True
                result = subprocess.run(["bash", "-c", announced["curl"]], capture_output=True, text=True, timeout=30)
                assert json.loads(result.stdout)["status"] == "succeeded"
        finally:
            process.send_signal(signal.SIGTERM)
            out, err = process.communicate(timeout=30)
        assert process.returncode == 0, err
        assert out == "" and "Stopped." in err


def test_serve_on_a_port_in_use_is_one_line_on_stderr(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        environment = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'e.sqlite3'}"}
        result = subprocess.run([str(EMISSIONS), "serve", "--port", str(port)], env=environment,
                                capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [f"emissions: cannot listen on 127.0.0.1:{port}: "
                                                  "Address already in use"]


@pytest.mark.parametrize("argv, status, message", [
    (["serve", "--port", "-1"], 2, "argument --port: must be from 0 to 65535"),
    (["serve", "--port", "65536"], 2, "argument --port: must be from 0 to 65535"),  # not port 0 again
    (["quickstart", "--port", "99999"], 2, "argument --port: must be from 0 to 65535"),
    (["serve", "--host", "256.1.1.1", "--port", "0"], 1, "cannot listen on 256.1.1.1:0"),
    (["factor", "activate", "x", "--version", "99999999999999999999"], 2,
     "argument --version: must be from 1 to 2147483647"),
    (["factor", "activate", "x", "--version", "two"], 2, "argument --version: 'two' is not a whole number"),
    (["webhook", "deliveries", "--limit", "99999999999999999999"], 1,
     "--limit must be at least 1 and at most 10000"),
], ids=["negative port", "port past 65535", "quickstart port past 65535", "host that is no address",
        "version past the column", "version not a number", "limit past any list"])
def test_numbers_and_hosts_out_of_range_are_one_line_not_a_traceback(fails, argv, status, message):
    assert message in fails(*argv, status=status)
