"""An unavailable database: 503 with Retry-After, a log that does not flood, and a /healthz that tells
the truth (read-only file, full disk), against real servers."""
from __future__ import annotations

import logging
import os
import resource
import signal
import sqlite3
import subprocess

import peewee as pw
import pytest
import requests

from emissions import db as db_setup
from emissions import models
from emissions import outages
from conftest import EMISSIONS, LiveServer, free_port, logistics_body, post_calculation, seed_through_cli

UNAVAILABLE = {"code": "INTERNAL_ERROR", "message": "The service is temporarily unavailable; retry after a few seconds."}


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_outage_logs_its_first_failure_whole_then_a_count_a_minute_then_the_recovery(
        app, client, acme, config, tmp_path, caplog):
    clock = Clock()
    app.outage_log.clock = app.health.clock = clock
    caplog.set_level(logging.INFO, logger="emissions.error")
    db_setup.bind(f"sqlite:///{tmp_path / 'missing' / 'gone.sqlite3'}")
    for number in range(5):
        post_calculation(client, acme, idempotency_key=f"k-{number}", status=503)
    clock.now += 61
    post_calculation(client, acme, idempotency_key="k-5", status=503)
    db_setup.bind(config.database_url)
    post_calculation(client, acme, idempotency_key="k-6", status=201)
    post_calculation(client, acme, idempotency_key="k-7", status=201)
    lines = [(record.getMessage(), bool(record.exc_info), getattr(record, "fields", {}).get("failures"))
             for record in caplog.records]
    assert lines == [("database failing", True, None), ("database still failing", False, 6),
                     ("database succeeding again", False, 6)]


def test_the_workspace_shows_a_503_page_while_the_database_is_unreachable(client, acme, tmp_path):
    from emissions import workspace
    from helpers import sign_in
    from conftest import PASSWORD
    workspace.create_user(acme.org, "ops@acme.example", PASSWORD, actor="cli")
    sign_in(client)
    db_setup.bind(f"sqlite:///{tmp_path / 'missing' / 'gone.sqlite3'}")
    page = client.get("/workspace/calculations", status=503)
    assert "Temporarily unavailable" in page.text and "retry after a few seconds" in page.text
    assert page.headers["Retry-After"] == "5"


def test_a_read_only_database_file_is_a_503_and_healthz_names_it_until_it_is_writable_again(app, acme, config):
    path = config.database_url.removeprefix("sqlite:///")
    writable = models.db.obj
    with LiveServer(app) as server:
        assert requests.get(server.url + "/healthz", timeout=10).status_code == 200
        models.db.close()
        models.db.initialize(pw.SqliteDatabase(f"file:{path}?mode=ro", uri=True, field_types=db_setup.SQLITE_FIELD_TYPES))
        answer = requests.post(server.url + "/v1/emissions/logistics", json=logistics_body(), timeout=10,
                               headers={**acme.headers("ro-1")})
        assert answer.status_code == 503 and answer.headers["Retry-After"] == "5"
        assert {key: answer.json()["error"][key] for key in ("code", "message")} == UNAVAILABLE
        health = requests.get(server.url + "/healthz", timeout=10)
        assert (health.status_code, health.json()) == (503, {"status": "unavailable", "database": "read-only"})
        models.db.initialize(writable)
        app.health.failed_at -= outages.Health.FRESH_SECONDS  # no request has failed since: the probe decides
        assert requests.get(server.url + "/healthz", timeout=10).json() == {"status": "ok", "database": "ok"}
        assert requests.post(server.url + "/v1/emissions/logistics", json=logistics_body(), timeout=10,
                             headers={**acme.headers("ro-1")}).status_code == 201


def test_a_full_disk_is_a_503_healthz_says_so_at_once_and_both_recover(tmp_path, monkeypatch):
    """The server runs with a file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored): its SQLite files cannot
    grow past it, as on a full disk. Raising the limit is freeing the disk."""
    key = seed_through_cli(tmp_path / "full.sqlite3", monkeypatch)
    limit = os.path.getsize(tmp_path / "full.sqlite3") + 64 * 1024

    def limited():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    port = free_port()
    process = subprocess.Popen([str(EMISSIONS), "serve", "--port", str(port)], preexec_fn=limited, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env={**os.environ, "WEBHOOK_POLL_SECONDS": "60", "LOG_REQUESTS": "false"})
    url = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {key}"}
    try:
        assert process.stdout.readline().startswith("Serving on")
        acknowledged, failed = [], None
        for number in range(3000):
            answer = requests.post(url + "/v1/emissions/logistics", json=logistics_body(), timeout=30,
                                   headers={**headers, "Idempotency-Key": f"full-{number}"})
            if answer.status_code == 201:
                acknowledged.append(answer.json()["id"])
            else:
                failed = answer
                break
        assert failed is not None, "the file-size limit was never reached"
        assert failed.status_code == 503 and failed.headers["Retry-After"] == "5"
        health = requests.get(url + "/healthz", timeout=10)
        assert health.status_code == 503
        assert health.json()["database"] in ("disk full", "I/O error")
        resource.prlimit(process.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        retried = requests.post(url + "/v1/emissions/logistics", json=logistics_body(), timeout=30,
                                headers={**headers, "Idempotency-Key": f"full-{len(acknowledged)}"})
        assert retried.status_code == 201
        assert requests.get(url + "/healthz", timeout=10).json() == {"status": "ok", "database": "ok"}
        for calculation_id in acknowledged[-5:]:  # what was acknowledged before stays readable
            assert requests.get(f"{url}/v1/calculations/{calculation_id}", headers=headers, timeout=10).status_code == 200
    finally:
        process.terminate()
        _, errors = process.communicate(timeout=30)
    failing_lines = [line for line in errors.splitlines() if '"database failing"' in line]
    assert len(failing_lines) == 1, errors[-3000:]


def wrapped(error: Exception) -> Exception:
    """The error as Peewee raises it: its own type, with the driver's error inside."""
    try:
        with pw.__exception_wrapper__:
            raise error
    except Exception as raised:
        return raised


@pytest.mark.parametrize("error, cause", [
    (wrapped(sqlite3.OperationalError("database or disk is full")), "disk full"),
    (wrapped(sqlite3.OperationalError("attempt to write a readonly database")), "read-only"),
    (wrapped(sqlite3.OperationalError("database is locked")), "locked"),
    (wrapped(sqlite3.OperationalError("disk I/O error")), "I/O error"),
    (wrapped(sqlite3.OperationalError("no such table: calculation")), None),  # a programming error: 500
    (wrapped(sqlite3.IntegrityError("UNIQUE constraint failed")), None),
    (KeyError("missing"), None),
    (pw.InterfaceError("Cannot commit, database connection not open."), "unreachable"),
])
def test_what_counts_as_an_unavailable_database(error, cause):
    assert outages.cause_of(error) == cause


def test_postgres_driver_errors_name_their_cause():
    psycopg2 = pytest.importorskip("psycopg2")
    assert outages.cause_of(wrapped(psycopg2.OperationalError("server closed the connection"))) == "unreachable"
    assert outages.cause_of(wrapped(psycopg2.ProgrammingError("syntax error"))) is None
