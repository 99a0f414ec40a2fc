"""Fixtures: a fresh database per test (SQLite file; PostgreSQL where asked), personas, helpers."""
from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import os
import socket
import subprocess
import sys
import threading
from decimal import Decimal
from pathlib import Path

import peewee as pw
import pytest
from waitress import wasyncore
from webtest import TestApp

from emissions import auth
from emissions import cli
from emissions import factors
from emissions import migrations
from emissions import models
from emissions.db import open_database
from emissions.app import create_app
from emissions.config import Config
from emissions.models import Customer, Organization, SCOPES
from emissions.server import create_server

EMISSIONS = Path(sys.executable).with_name("emissions")  # the installed command, beside this Python

POSTGRES_URL = os.environ.get("TEST_DATABASE_URL", "")
ALL_SCOPES = list(SCOPES)


_migrated_schemas: set[str] = set()


def postgres_schema_url(url: str) -> str:
    """An empty schema of this test process's own (parallel runs never share tables).

    The first test of a process builds it from scratch with the migrations; later tests only empty
    its tables, which is much faster than migrating again.
    """
    schema = f"test_{os.getpid()}"
    separator = "&" if "?" in url else "?"
    schema_url = f"{url}{separator}options=-csearch_path%3D{schema}"
    database = open_database(schema_url)
    database.connect()
    if schema in _migrated_schemas:
        tables = [row[0] for row in database.execute_sql(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s AND tablename <> 'migration_history'",
            (schema,))]
        if tables:
            database.execute_sql("TRUNCATE " + ", ".join(f'"{t}"' for t in tables) + " RESTART IDENTITY CASCADE")
    else:
        database.execute_sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        database.execute_sql(f"CREATE SCHEMA {schema}")
        migrations.run(database)
        _migrated_schemas.add(schema)
    database.close()
    return schema_url


@pytest.fixture
def database_url(request, tmp_path):
    """The database under test: a fresh SQLite file (default), or PostgreSQL for `on_both` tests."""
    if getattr(request, "param", "sqlite") == "postgres":
        if not POSTGRES_URL:
            pytest.skip("PostgreSQL tests need TEST_DATABASE_URL (set by .ci/run)")
        yield postgres_schema_url(POSTGRES_URL)
    else:
        yield f"sqlite:///{tmp_path / 'test.sqlite3'}"
    if models.db.obj is not None:
        models.db.close()


def pytest_generate_tests(metafunc):
    """Tests marked `on_both` run on SQLite and on PostgreSQL."""
    if "database_url" in metafunc.fixturenames and metafunc.definition.get_closest_marker("on_both"):
        metafunc.parametrize("database_url", ["sqlite", "postgres"], indirect=True)


def pytest_configure(config):
    config.addinivalue_line("markers", "on_both: run the test on SQLite and on PostgreSQL")


@pytest.fixture
def config(database_url) -> Config:
    return Config(database_url=database_url, log_requests=False, rate_limit_per_second=0,
                  key_cache_seconds=0, webhook_poll_seconds=0.05)


@pytest.fixture
def app(config):
    return create_app(config)


@pytest.fixture
def client(app) -> TestApp:
    return TestApp(app)


@pytest.fixture
def secret(app, config) -> bytes:
    return auth.instance_secret(config.secret_key)


# --- make_* helpers ----------------------------------------------------------------------------

def make_org(slug: str = "acme", **fields) -> Organization:
    return Organization.create(slug=slug, name=fields.pop("name", slug.title()), **fields)


def make_key(org: Organization, secret: bytes, environment: str = "test", scopes=None, **kwargs) -> str:
    _, plain = auth.create_key(org, environment, list(scopes or ALL_SCOPES), secret, **kwargs)
    return plain


def make_customer(org: Organization, reference: str = "cust-1", environment: str = "test", **fields) -> Customer:
    return Customer.create(organization=org, environment=environment, reference=reference,
                           name=fields.pop("name", "Customer " + reference), **fields)


def make_factor(reference: str = "road-default", mode: str = "ROAD", value: str = "0.12522", **kwargs):
    """A factor version by factors.create's rules, without the audit event a person's action leaves
    (like make_customer, a fixture is no one's action)."""
    kwargs.setdefault("valid_from", dt.date(2025, 1, 1))
    organization, draft = kwargs.pop("organization", None), kwargs.pop("draft", False)
    spec, found = factors.check(reference, mode, kwargs.pop("name", "Road average"), kwargs.pop("source", "Test source"),
                                None if value is None else Decimal(value), ttw=kwargs.pop("ttw_value", None),
                                wtt=kwargs.pop("wtt_value", None), **kwargs)
    if found:
        raise factors.FactorError("; ".join(f"{name} {reason}" for name, reason in found))
    previous = (models.Factor.select().where(models.Factor.reference == reference)
                .order_by(models.Factor.version.desc()).first())
    with models.db.atomic():
        return factors.add_version(spec, previous, organization, draft)


def logistics_body(**overrides) -> dict:
    body = {
        "customer_reference": "cust-1",
        "external_reference": "shipment-1",
        "mode": "ROAD",
        "origin": {"code": "GBLON", "country": "GB"},
        "destination": {"label": "Manchester"},
        "cargo": {"value": 12.5, "unit": "tonne"},
        "distance": {"value": 320, "unit": "km"},
        "activity_date": "2026-03-01",
        "factor_reference": "road-default",
    }
    body.update(overrides)
    return body


def auth_headers(key: str, idempotency_key: str | None = None) -> dict:
    headers = {"Authorization": f"Bearer {key}"}
    if idempotency_key is not None:
        headers["Idempotency-Key"] = idempotency_key
    return headers


class Persona:
    """An organization with a test key of every scope, a customer and a global factor."""

    def __init__(self, org, key, customer):
        self.org, self.key, self.customer = org, key, customer

    def headers(self, idempotency_key: str | None = None) -> dict:
        return auth_headers(self.key, idempotency_key)


@pytest.fixture
def acme(app, secret) -> Persona:
    org = make_org("acme")
    if not models.Factor.select().where(models.Factor.reference == "road-default").exists():
        make_factor()
    return Persona(org, make_key(org, secret), make_customer(org))


@pytest.fixture
def globex(app, secret) -> Persona:
    org = make_org("globex")
    return Persona(org, make_key(org, secret), make_customer(org))


def post_calculation(client: TestApp, persona: Persona, idempotency_key: str = "idem-1", status="*", **overrides):
    return client.post_json("/v1/emissions/logistics", logistics_body(**overrides),
                            headers=persona.headers(idempotency_key), status=status)


# --- the statements a test sends ------------------------------------------------------------------

class RecordingCursor:
    """A database cursor that hands every statement it executes, with its parameters, to `record`."""

    def __init__(self, cursor, record):
        self._cursor, self._record = cursor, record

    def execute(self, statement, params=None):
        self._record(statement, tuple(params or ()))
        self._cursor.execute(statement, params or ())
        return self

    def __iter__(self):
        return iter(self._cursor)

    def __getattr__(self, name):
        return getattr(self._cursor, name)


def record_statements(monkeypatch, record):
    """Send every statement of the bound database through `record(statement, params)`; returns the
    database's own cursor method, to put back early (monkeypatch puts it back after the test)."""
    database = models.db.obj
    original = database.cursor
    monkeypatch.setattr(database, "cursor",
                        lambda *args, **kwargs: RecordingCursor(original(*args, **kwargs), record))
    return original


# --- a real server on loopback ------------------------------------------------------------------

class LiveServer:
    """The app served by Waitress on an ephemeral loopback port, in a thread."""

    def __init__(self, app, threads: int = 8):
        self.server = create_server(app, "127.0.0.1", 0, threads)  # as `emissions serve` makes it
        self.url = f"http://127.0.0.1:{self.server.effective_port}"
        self._stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        # Waitress's own loop (server.run), a short poll at a time until told to stop; then the
        # sockets are closed here, in the serving thread, never under a poll that is using them.
        try:
            while not self._stopping.is_set():
                wasyncore.loop(timeout=0.05, map=self.server._map, count=1)
        finally:
            wasyncore.close_all(self.server._map, ignore_all=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, exc_type, *exc):
        # The worker threads first, so that none answers into a closed socket; then the loop.
        self.server.task_dispatcher.shutdown()
        workers_left = len(self.server.task_dispatcher.threads)
        self._stopping.set()
        self.thread.join(timeout=10)
        if exc_type is None:  # a failing test's own error comes first
            assert workers_left == 0, f"{workers_left} worker thread(s) still busy 5 s after shutdown"
            assert not self.thread.is_alive(), "the serving thread did not stop"


def free_port() -> int:
    """A loopback port nothing listens on (for a server a test starts)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def cli_json(*argv) -> dict:
    """Run an `emissions` command in-process (faster than a subprocess) and return its --json object."""
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert cli.main([*argv, "--json"]) == 0
    return json.loads(out.getvalue())


@contextlib.contextmanager
def serving(tmp_path, monkeypatch, *argv, **env):
    """`emissions serve ARGV` as a subprocess on a SQLite file with an org, a calculate key, a customer and a
    factor; yields (process, url, key). Killed at the end if still running."""
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'served.sqlite3'}")
    cli_json("org", "create", "--name", "Acme", "--slug", "acme")
    key = cli_json("key", "create", "--org", "acme", "--env", "test", "--scopes", "emissions:calculate")["key"]
    cli_json("customer", "create", "--org", "acme", "--env", "test", "--reference", "cust-1", "--name", "C")
    cli_json("factor", "create", "--reference", "road-default", "--mode", "ROAD", "--value", "0.12522",
             "--name", "Road", "--source", "Test")
    port = free_port()
    process = subprocess.Popen([str(EMISSIONS), "serve", "--port", str(port), *argv], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "WEBHOOK_POLL_SECONDS": "60", "LOG_REQUESTS": "false", **env})
    try:
        banner = process.stdout.readline()
        assert banner.startswith(f"Serving on http://127.0.0.1:{port}"), (banner, process.stderr.read())
        yield process, f"http://127.0.0.1:{port}", key
    finally:
        if process.poll() is None:
            process.terminate()  # the parent stops its workers, which hold the output pipes too
            try:
                process.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.communicate(timeout=30)


def output_until_serving(process) -> str:
    """What a starting `emissions quickstart` or `serve` printed, up to and with its "Serving on" line."""
    lines = []
    for line in process.stdout:
        lines.append(line)
        if line.startswith("Serving on"):
            break
    return "".join(lines)


def raw_exchange(server, request: bytes, source: str | None = None) -> tuple[int, dict, bytes]:
    """Send raw bytes to the server (from a chosen loopback source address) and read the whole answer
    (the request asks to close)."""
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10,
                                  source_address=(source, 0) if source else None) as connection:
        connection.sendall(request)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in header_lines)}
    return int(status_line.split()[1]), headers, body


@pytest.fixture
def live_server(app):
    with LiveServer(app) as server:
        yield server


# --- the operator CLI, in-process ---------------------------------------------------------------

@pytest.fixture
def emissions(config, monkeypatch, capsys):
    """Run `emissions ARGS` in-process on the test database: (exit status, stdout, stderr)."""
    monkeypatch.setenv("DATABASE_URL", config.database_url)

    def run(*argv):
        status = cli.main([str(argument) for argument in argv])
        out, err = capsys.readouterr()
        return status, out, err

    return run


@pytest.fixture
def ok(emissions):
    """Run a command with --json that must succeed; return its one JSON object."""
    def run(*argv):
        status, out, err = emissions(*argv, "--json")
        assert (status, err) == (0, ""), err
        assert out.endswith("\n") and out.count("\n") == 1, out  # one object, one line
        return json.loads(out)
    return run


@pytest.fixture
def fails(emissions):
    """Run a command that must fail: non-zero status, one line on stderr, nothing on stdout; return the line."""
    def run(*argv, status=1):
        code, out, err = emissions(*argv)
        assert code == status, (code, out, err)
        assert out == ""
        assert err.endswith("\n") and err.count("\n") == 1, err
        assert err.startswith("emissions")
        assert "Traceback" not in err
        return err
    return run
