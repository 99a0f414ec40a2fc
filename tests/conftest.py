"""Fixtures: a migrated database of its own per test (a copy of a SQLite file migrated once; PostgreSQL's
schema emptied, where asked), personas, helpers."""
from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import peewee as pw
import pytest
from waitress import wasyncore
from webtest import TestApp

from emissions import accounts
from emissions import auth
from emissions import cli
from emissions import clock
from emissions import factors
from emissions import migrations
from emissions import db as db_setup
from emissions import factor_files
from emissions import jsoncodec
from emissions import models
from emissions import workspace
from emissions.db import open_database
from emissions.app import create_app
from emissions.config import Config
from emissions.models import Customer, Organization, SCOPES
from emissions.serving.server import create_server

FAKETIME_SHIM = Path(__file__).resolve().parent / "faketime"
if "FAKETIME" in os.environ:
    # The suite run a year ahead under libfaketime (.ci/run): this process and every Python it starts
    # load the shim that keeps time.sleep working there; Chromium runs without the preload.
    import runpy

    runpy.run_path(str(FAKETIME_SHIM / "sitecustomize.py"))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(FAKETIME_SHIM), os.environ.get("PYTHONPATH")]))

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
    # Commits do not wait for the log to reach the disk (what another session sees is the same; only a
    # crash of the server could lose the last ones), as the SQLite files live in memory.
    schema_url = f"{url}{separator}options=-csearch_path%3D{schema}%20-csynchronous_commit%3Doff"
    database = open_database(schema_url)
    database.connect()
    if schema in _migrated_schemas:
        empty_postgres_schema(database, schema)
    else:
        database.execute_sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        database.execute_sql(f"CREATE SCHEMA {schema}")
        migrations.run(database)
        _migrated_schemas.add(schema)
    database.close()
    return schema_url


def empty_postgres_schema(database: pw.Database, schema: str) -> None:
    """Delete every row but the migration history and restart the id sequences, as a fresh schema has them.

    DELETE rather than TRUNCATE: on tables of a few rows TRUNCATE costs far more, since it makes
    new files for every table and index. Referencing tables are emptied before the ones they reference.
    """
    tables = [row[0] for row in database.execute_sql(
        "SELECT tablename FROM pg_tables WHERE schemaname = %s AND tablename <> 'migration_history'", (schema,))]
    references = database.execute_sql(
        "SELECT DISTINCT source.relname, target.relname FROM pg_constraint"
        " JOIN pg_class source ON source.oid = conrelid JOIN pg_class target ON target.oid = confrelid"
        " JOIN pg_namespace ON pg_namespace.oid = pg_constraint.connamespace"
        " WHERE contype = 'f' AND nspname = %s AND source.relname <> target.relname", (schema,)).fetchall()
    ordered: list[str] = []
    while len(ordered) < len(tables):
        still_referenced = {target for source, target in references if source not in ordered}
        ready = [table for table in tables if table not in ordered and table not in still_referenced]
        assert ready, f"a cycle of foreign keys among {tables}"
        ordered.extend(ready)
    sequences = [row[0] for row in database.execute_sql(
        "SELECT sequencename FROM pg_sequences WHERE schemaname = %s AND last_value IS NOT NULL", (schema,))]
    with database.atomic():
        database.execute_sql("; ".join(f'DELETE FROM "{table}"' for table in ordered))
        for sequence in sequences:
            database.execute_sql("SELECT setval(%s, 1, false)", (f'"{schema}"."{sequence}"',))


@pytest.fixture(scope="session")
def sqlite_directory(tmp_path_factory) -> Iterator[Path]:
    """Where the tests' SQLite files live: memory-backed /dev/shm where the machine has room there, so
    that their syncs and deletions cost no disk work; else pytest's temp directory."""
    shared_memory = Path("/dev/shm")
    if shared_memory.is_dir() and os.access(shared_memory, os.W_OK) and shutil.disk_usage(shared_memory).free > 2**30:
        directory = Path(tempfile.mkdtemp(prefix="emissions-tests-", dir=shared_memory))
        yield directory
        shutil.rmtree(directory, ignore_errors=True)
    else:
        yield tmp_path_factory.mktemp("databases")


@pytest.fixture(scope="session")
def migrated_sqlite_file(sqlite_directory) -> bytes:
    """The bytes of a SQLite database with every migration applied, made once a session; each test
    gets a copy instead of migrating its own."""
    path = sqlite_directory / "migrated.sqlite3"
    database = db_setup.open_database(f"sqlite:///{path}")
    migrations.run(database)
    database.execute_sql("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the file itself
    database.close()
    assert not path.with_name(path.name + "-wal").exists(), "the template's log outlived its connection"
    return path.read_bytes()


def copy_of_migrated_sqlite(path: Path, template: bytes) -> None:
    """A new file at path holding the migrated template, readable by its owner only (as
    db_setup.create_private makes a database file)."""
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as file:
        file.write(template)


@pytest.fixture
def database_url(request):
    """The database under test, migrated: a SQLite file of its own (default), or PostgreSQL for `on_both` tests."""
    directory = None
    if getattr(request, "param", "sqlite") == "postgres":
        if not POSTGRES_URL:
            pytest.skip("PostgreSQL tests need TEST_DATABASE_URL (set by .ci/run)")
        yield postgres_schema_url(POSTGRES_URL)
    else:
        directory = Path(tempfile.mkdtemp(dir=request.getfixturevalue("sqlite_directory")))
        copy_of_migrated_sqlite(directory / "test.sqlite3", request.getfixturevalue("migrated_sqlite_file"))
        yield f"sqlite:///{directory / 'test.sqlite3'}"
    if models.db.obj is not None:
        models.db.close()
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)


def pytest_generate_tests(metafunc):
    """Tests marked `on_both` run on SQLite and on PostgreSQL."""
    if "database_url" in metafunc.fixturenames and metafunc.definition.get_closest_marker("on_both"):
        metafunc.parametrize("database_url", ["sqlite", "postgres"], indirect=True)


def pytest_configure(config):
    config.addinivalue_line("markers", "on_both: run the test on SQLite and on PostgreSQL")


# Tests that share a costly set-up, by where they are: each group runs in one process of pytest-xdist,
# so that its set-up is made once, and the groups, the largest units, are handed out first.
SHARED_SETUPS = {
    "tests/test_packaging.py": "build",  # the wheel and the pyz
    "tests/test_testing.py::test_the_documented_example_passes_in_a_fresh_environment": "build",  # the wheel
    "tests/test_workspace_browser.py": "browser",  # the served sites and the one Chromium
    "tests/test_shipments_workspace.py::test_the_chain_fits_the_screen_in_chromium": "browser",
}


def shared_setup(nodeid: str) -> str:
    """The group of a test, or the test itself."""
    for where, group in SHARED_SETUPS.items():
        if nodeid == where or nodeid.startswith((where + "::", where + "[")):
            return group
    return nodeid


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """For the default distribution (`-n`), pytest-xdist's load scheduling of single tests, but with the
    groups above as units. (Its own `--dist loadgroup` marks groups in a way pytest 9 ignores.)"""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedSetupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return shared_setup(nodeid)

    return SharedSetupScheduling(config, log)


@pytest.fixture
def fixed_clock() -> Iterator:
    """Pins the service's one clock: call it with a moment (or a date); it runs again after the test."""
    yield clock.set_to
    clock.set_to(None)


@pytest.fixture
def config(database_url) -> Config:
    # The calculations kept in memory on both databases (PostgreSQL's default keeps none): the suite
    # tests what keeping them does; tests/test_serve_settings.py tests the defaults.
    return Config(database_url=database_url, log_requests=False, rate_limit_per_second=0,
                  key_cache_seconds=0, webhook_poll_seconds=0.05, webhook_allow_private_test=True,
                  calculation_cache_size=10_000)


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


# --- the workspace -------------------------------------------------------------------------------

@pytest.fixture(autouse=True, scope="session")
def quick_password_hashing():
    """scrypt at a small cost in this test process: tests check what is hashed and checked, and on
    which thread, never how long it takes, and at the full cost the hashing outlasted the rest of a
    workspace test. Commands run as subprocesses hash at the full cost; no test passes them a hash made here."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(accounts.SCRYPT, "n", 2 ** 4)
        yield


def workspace_of(app) -> workspace.Workspace:
    """The app's workspace: its sign-in throttle, password hasher and sessions."""
    return next(route.callback.__wrapped__.__self__ for route in app.routes if route.rule == "/workspace")


def stop_the_sign_in_clock(app, monkeypatch) -> None:
    """Hold the sign-in throttle's clock still, so no bucket refills while a test spends a burst
    however slowly a loaded machine lets it (the address bucket gets a token back every 3 s)."""
    throttle = workspace_of(app).throttle
    now = time.monotonic()
    for bucket in (throttle.by_email_and_address, throttle.by_address):
        monkeypatch.setattr(bucket, "clock", lambda: now)


# --- the browser ----------------------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="session")
def browser():
    """Debian's Chromium driven by Playwright, launched once for the browser tests (each opens its own
    contexts); they skip where there is no Chromium (`.ci/run` installs it)."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright for Python is not installed")
    if CHROMIUM is None:
        pytest.skip("no Chromium found (apt-get install -y chromium)")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, env={
            name: value for name, value in os.environ.items() if name != "LD_PRELOAD"})
        yield launched
        launched.close()


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
        self.app = app
        self.server = create_server(app, "127.0.0.1", 0, threads)  # as `emissions serve` makes it
        self.url = f"http://127.0.0.1:{self.server.effective_port}"
        self.workers_left = threads
        self._stopping = threading.Event()
        self._closing = threading.Lock()
        self._closed = False
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        # Waitress's own order (server.run, then its close): the loop stops, the worker threads drain,
        # then the sockets close. All of it on this thread, so no socket is closed under the poll
        # that watches it.
        try:
            while not self._stopping.is_set():
                wasyncore.loop(timeout=1, map=self.server._map, use_poll=True, count=1)
        finally:
            with self._closing:
                self._closed = True
            self.server.task_dispatcher.shutdown()
            dispatcher = self.server.task_dispatcher  # the API's threads and the workspace's
            self.workers_left = len(dispatcher.threads) + len(dispatcher.workspace.threads)
            wasyncore.close_all(self.server._map, ignore_all=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, exc_type, *exc):
        self._stopping.set()
        with self._closing:  # the wake-up pipe is open until the serving thread has seen the stop
            if not self._closed:
                self.server.pull_trigger()
        self.thread.join(timeout=30)
        if exc_type is None:  # a failing test's own error comes first
            assert not self.thread.is_alive(), "the serving thread did not stop"
            assert self.workers_left == 0, f"{self.workers_left} worker thread(s) still busy after shutdown"


def free_port() -> int:
    """A loopback port nothing is bound to, for a server a test starts in another process.

    Taken below the kernel's ephemeral range: a port the kernel hands out for `bind(port 0)` (the
    webhook receivers) or an outgoing connection is never one a test server is about to bind, and
    a server binding with SO_REUSEADDR cannot land on a receiver that is bound but not listening.
    """
    ranges = Path("/proc/sys/net/ipv4/ip_local_port_range")
    low = int(ranges.read_text().split()[0]) if ranges.exists() else 32768
    for port in random.sample(range(max(1024, low - 12000), low), 200):
        with socket.socket() as probe:  # no SO_REUSEADDR: the bind fails if anything holds the port
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free loopback port below the ephemeral range")


def cli_json(*argv) -> dict:
    """Run an `emissions` command in-process (faster than a subprocess) and return its --json object."""
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert cli.main([*argv, "--json"]) == 0
    return json.loads(out.getvalue())


def seed_through_cli(path: Path, monkeypatch) -> str:
    """Point DATABASE_URL at a new SQLite file and make, with the CLI, an org, a customer and a factor;
    return a calculate key."""
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{path}")
    cli_json("migrate")
    cli_json("org", "create", "--name", "Acme", "--slug", "acme")
    key = cli_json("key", "create", "--org", "acme", "--env", "test", "--scopes", "emissions:calculate")["key"]
    cli_json("customer", "create", "--org", "acme", "--env", "test", "--reference", "cust-1", "--name", "C")
    cli_json("factor", "create", "--reference", "road-default", "--mode", "ROAD", "--value", "0.12522",
             "--name", "Road", "--source", "Test")
    return key


@contextlib.contextmanager
def serving(tmp_path, monkeypatch, *argv, command=(str(EMISSIONS),), **env):
    """`emissions serve ARGV` (or `COMMAND serve ARGV`) as a subprocess on a SQLite file with an org, a
    calculate key, a customer and a factor; yields (process, url, key). Killed at the end if still running."""
    key = seed_through_cli(tmp_path / "served.sqlite3", monkeypatch)
    port = free_port()
    process = subprocess.Popen([*command, "serve", "--port", str(port), *argv], stdout=subprocess.PIPE,
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


# --- the package as users get it (built once a session: test_packaging and test_testing) ------------

PACKAGE_ROOT = Path(__file__).resolve().parent.parent
BUILD_INPUTS = ("emissions", "scripts", "setup.cfg", "pyproject.toml", "README.md")


@pytest.fixture(scope="session")
def source(tmp_path_factory) -> Path:
    """A copy of what a build reads, without build/, dist/, caches or databases."""
    copy = tmp_path_factory.mktemp("source")
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.sqlite3*")
    for name in BUILD_INPUTS:
        path = PACKAGE_ROOT / name
        if path.is_dir():
            shutil.copytree(path, copy / name, ignore=skip, symlinks=True)
        else:
            shutil.copy2(path, copy / name)
    return copy


@pytest.fixture(scope="session")
def wheel(source, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(out), "."],
                           cwd=source, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    (path,) = out.glob("emissions_service-*.whl")
    return path


# --- personas and data shared by several test files ----------------------------------------------

# A workspace user of acme (tests/helpers.py signs in as it).
PASSWORD = "correct horse battery"


@pytest.fixture
def acme_user(app):
    org = make_org("acme")
    make_customer(org)
    make_factor()
    workspace.create_user(org, "Ops@Acme.example", PASSWORD, actor="cli")
    return org


# The shared factor library and the container terminal of the shipments' worked example.
TERMINAL = "felixstowe-container-terminal"


@pytest.fixture
def library(app):
    factor_files.load_library(actor="test")
    make_factor(TERMINAL, mode="HUB", value=None, ttw_value="0.95", wtt_value="0.35", name="Container terminal",
                hub_type="container_terminal")


# Calculations across month ends, modes and business contexts, for the period analytics.
SHIPMENTS = [  # (activity_date, mode, business_context, cargo, distance)
    ("2026-08-31", "ROAD", "upstream", "12.5", "320"),
    ("2026-09-01", "ROAD", "upstream", "1.234567", "0.5"),
    ("2026-09-15", "SEA", "downstream", "3333.3333", "7777.7"),
    ("2026-09-30", "AIR", "upstream", "2.5", "1200"),
    ("2026-10-01", "ROAD", "downstream", "7", "41.3"),
    ("2026-10-01", "ROAD", "downstream", "0.000009", "0.5"),
    ("2026-10-17", "SEA", "upstream", "950", "12000"),
    ("2026-10-31", "AIR", "downstream", "1.1", "900.9"),
    ("2026-11-02", "ROAD", "upstream", "20", "15"),
    ("2026-11-30", "ROAD", "upstream", "3", "3"),
    ("2027-01-05", "SEA", "upstream", "100", "100"),
]
FACTORS = {"ROAD": "road-default", "SEA": "sea-default", "AIR": "air-parts"}


@pytest.fixture
def shipped(client, acme) -> list[dict]:
    """The shipments as calculated: the bodies parsed with exact numbers (AIR with TTW and WTT parts)."""
    make_factor("sea-default", mode="SEA", value="0.0161")
    make_factor("air-parts", mode="AIR", value=None, ttw_value="0.89939", wtt_value="0.13516")
    bodies = []
    for number, (day, mode, context, cargo, distance) in enumerate(SHIPMENTS):
        response = post_calculation(client, acme, f"period-{number}", status=201, activity_date=day, mode=mode,
                                    business_context=context, factor_reference=FACTORS[mode],
                                    external_reference=f"s-{number}",
                                    cargo={"value": float(cargo), "unit": "tonne"},
                                    distance={"value": float(distance), "unit": "km"})
        bodies.append(jsoncodec.loads(response.body))
    return bodies


@pytest.fixture
def statements(monkeypatch):
    """The statements of the requests made while counting (a fresh list per `with`)."""
    log: list = []
    record_statements(monkeypatch, lambda statement, params: log.append(statement.split(None, 1)[0].upper()))

    class Counter:
        def __enter__(self):
            log.clear()
            return log

        def __exit__(self, *exc):
            return False

    return Counter()


SIGNED_IN_ON = dt.datetime(2026, 11, 25, 15, 30, tzinfo=dt.timezone.utc)


@pytest.fixture
def signed_in_on_the_day(client, acme, fixed_clock):
    """Acme's workspace user, signed in with the clock pinned on SIGNED_IN_ON."""
    from helpers import sign_in

    fixed_clock(SIGNED_IN_ON)
    workspace.create_user(acme.org, "ops@acme.example", PASSWORD, actor="cli")
    sign_in(client)
    return acme
