"""Operations: /healthz, the access log, clean shutdown on SIGTERM, and every variable documented."""
from __future__ import annotations

import json
import logging
import os
import re
import signal
import socket
import sqlite3
import threading
import time
import uuid
from pathlib import Path

import pytest
import requests
from webtest import TestApp

from emissions import config as config_module
from emissions import logs
from emissions import models
from emissions.db import bind, is_postgres
from emissions.app import create_app
from conftest import LiveServer, logistics_body, make_customer, post_calculation, serving
from helpers import documented_configuration, documented_rows, variables_read_in_config

ROOT = Path(__file__).resolve().parent.parent


# --- /healthz --------------------------------------------------------------------------------------

@pytest.mark.on_both
def test_healthz_is_200_without_authentication_when_the_database_answers(client):
    response = client.get("/healthz", status=200)
    assert response.json == {"status": "ok", "database": "ok"}
    assert response.headers["X-Request-Id"]
    assert response.headers["Cache-Control"] == "no-store"


@pytest.mark.parametrize("unreachable", ["sqlite-missing-directory", "postgres-closed-port"])
def test_healthz_is_503_when_the_database_is_unreachable_and_recovers(client, config, tmp_path, unreachable):
    if unreachable == "sqlite-missing-directory":
        bind(f"sqlite:///{tmp_path / 'missing' / 'gone.sqlite3'}")
    else:
        with socket.socket() as probe:  # a port with nothing listening
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        bind(f"postgresql://postgres@127.0.0.1:{port}/nothing?connect_timeout=2")
    for _ in range(2):  # and again: a failed check leaves nothing broken behind
        response = client.get("/healthz", status=503)
        assert response.json == {"status": "unavailable", "database": "unreachable"}
        assert response.headers["X-Request-Id"]
    bind(config.database_url)
    assert client.get("/healthz", status=200).json["status"] == "ok"


def test_the_api_answers_503_with_retry_after_while_the_database_is_unreachable(client, acme, tmp_path):
    bind(f"sqlite:///{tmp_path / 'missing' / 'gone.sqlite3'}")
    response = post_calculation(client, acme, status=503)
    assert response.json == {"error": {
        "code": "INTERNAL_ERROR", "message": "The service is temporarily unavailable; retry after a few seconds.",
        "request_id": response.headers["X-Request-Id"]}}
    assert response.headers["Retry-After"] == "5"


def test_a_programming_error_stays_a_500(client, acme, monkeypatch):
    from emissions import calculations
    monkeypatch.setattr(calculations, "calculate", lambda *args, **kwargs: {}["missing"])
    response = post_calculation(client, acme, status=500)
    assert response.json["error"]["message"] == "An unexpected error occurred; quote the request_id to support."
    assert "Retry-After" not in response.headers


# --- the access log --------------------------------------------------------------------------------

RFC3339_MILLISECONDS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z\Z")

@pytest.fixture
def logged(config, caplog):
    """A client of an app that logs requests, and the access log lines it writes."""
    app = create_app(config.with_(log_requests=True))
    caplog.set_level(logging.INFO, logger="emissions.access")

    def lines() -> list[dict]:
        return [json.loads(logs.JsonFormatter().format(record)) for record in caplog.records
                if record.name == "emissions.access"]

    return TestApp(app), lines


def test_one_json_line_per_request_with_its_id_method_path_status_latency_and_key_id(logged, acme):
    client, lines = logged
    created = post_calculation(client, acme, status=201)
    client.get("/v1/openapi.json", status=200)
    client.get(f"/v1/calculations/{created.json['id']}", headers=acme.headers(), status=200)
    client.get("/nowhere", status=404)
    records = lines()
    assert len(records) == 4
    for record in records:
        assert set(record) == {"time", "level", "logger", "request_id", "method", "path", "status", "latency_ms",
                               "key_id"}
        assert (record["level"], record["logger"]) == ("info", "emissions.access")
        assert RFC3339_MILLISECONDS.match(record["time"]), record["time"]
        assert isinstance(record["latency_ms"], (int, float)) and record["latency_ms"] >= 0
    key_id = models.ApiKey.get(models.ApiKey.organization == acme.org).id
    assert [(r["method"], r["path"], r["status"], r["key_id"]) for r in records] == [
        ("POST", "/v1/emissions/logistics", 201, key_id),
        ("GET", "/v1/openapi.json", 200, None),
        ("GET", f"/v1/calculations/{created.json['id']}", 200, key_id),
        ("GET", "/nowhere", 404, None),
    ]
    assert records[0]["request_id"] == created.headers["X-Request-Id"]
    assert len({record["request_id"] for record in records}) == 4


def test_the_access_log_never_holds_a_key_a_secret_or_a_body(logged, acme, secret, config):
    client, lines = logged
    body = logistics_body(external_reference="private-shipment-ref", origin={"label": "Secret Depot"})
    client.post_json("/v1/emissions/logistics", body, headers=acme.headers("idem-private"), status=201)
    client.post_json("/v1/emissions/logistics", body, headers={"Authorization": "Bearer service_test_" + "x" * 40,
                                                                "Idempotency-Key": "k"}, status=401)
    client.post("/v1/emissions/logistics", b"not json at all", status=400,
                headers={**acme.headers("k2"), "Content-Type": "application/json"})
    text = "\n".join(json.dumps(record) for record in lines())
    assert len(lines()) == 3
    for forbidden in [acme.key, acme.key[13:], "x" * 40, secret.decode(), "private-shipment-ref", "Secret Depot",
                      "idem-private", "not json at all", "Bearer"]:
        assert forbidden not in text
    assert [record["status"] for record in lines()] == [201, 401, 400]
    assert lines()[1]["key_id"] is None  # an unknown key has no id to log


def test_no_access_log_when_turned_off(client, acme, caplog):
    caplog.set_level(logging.INFO, logger="emissions.access")
    post_calculation(client, acme, status=201)
    assert not [record for record in caplog.records if record.name == "emissions.access"]


# --- SIGTERM ---------------------------------------------------------------------------------------

@pytest.fixture
def served(request, tmp_path, monkeypatch):
    """conftest's `serving` as a fixture, yielding the database's path too; without an access log,
    unless the test asks for one (parametrize "served" with "access-log")."""
    access_log = str(getattr(request, "param", None) == "access-log").lower()
    with serving(tmp_path, monkeypatch, LOG_REQUESTS=access_log) as (process, url, key):
        yield process, url, key, tmp_path / "served.sqlite3"


def test_sigterm_stops_the_server_cleanly(served):
    process, url, key, _ = served
    assert requests.get(url + "/healthz", timeout=10).status_code == 200
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert out.strip() == "Stopped."
    assert "Traceback" not in err


@pytest.mark.parametrize("served", ["access-log"], indirect=True)
def test_the_served_process_writes_one_access_line_per_request_to_stderr(served):
    process, url, key, _ = served
    created = requests.post(url + "/v1/emissions/logistics", json=logistics_body(), timeout=10,
                            headers={"Authorization": f"Bearer {key}", "Idempotency-Key": "logged"})
    assert created.status_code == 201, created.text
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=30)  # the log writer writes what is queued before it stops
    assert process.returncode == 0, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    line = json.loads(lines[0])
    key_id = models.ApiKey.get().id  # the fixture's `emissions` commands left models on the served database
    assert {name: line[name] for name in ("request_id", "method", "path", "status", "key_id")} == {
        "request_id": created.headers["X-Request-Id"], "method": "POST", "path": "/v1/emissions/logistics",
        "status": 201, "key_id": key_id}
    assert set(line) == {"time", "level", "logger", "request_id", "method", "path", "status", "latency_ms", "key_id"}
    assert RFC3339_MILLISECONDS.match(line["time"]) and line["level"] == "info"


@pytest.mark.parametrize("requests_sent", [1, 3], ids=["one in flight", "one in flight and two queued"])
def test_sigterm_lets_the_requests_received_finish(served, requests_sent):
    """The one thread's request, and (with three) the two Waitress queued behind it: all answered."""
    process, url, key, database = served
    answers: dict = {}

    def calculate(number: int):
        try:
            answers[number] = requests.post(url + "/v1/emissions/logistics", json=logistics_body(), timeout=30,
                                            headers={"Authorization": f"Bearer {key}",
                                                     "Idempotency-Key": f"in-flight-{number}"})
        except requests.RequestException as exc:
            answers[number] = exc

    # Hold SQLite's write lock: the first request reads, then waits at BEGIN IMMEDIATE, in flight;
    # the others wait in Waitress's queue for the one thread.
    holder = sqlite3.connect(database, isolation_level=None, timeout=30)
    holder.execute("BEGIN IMMEDIATE")
    senders = [threading.Thread(target=calculate, args=(number,)) for number in range(requests_sent)]
    for sender in senders:
        sender.start()
    time.sleep(1.0)  # sequencing only: let the requests arrive before the signal
    process.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    # While it answers them it takes no one new: a new client is refused, not taken in and dropped.
    host, port = url.removeprefix("http://").split(":")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((host, int(port)), timeout=5).close()
    process.send_signal(signal.SIGTERM)  # a second signal does not cut the answers short
    time.sleep(1.0)  # (without that, the process would be gone before the lock is released)
    holder.execute("ROLLBACK")
    holder.close()
    for sender in senders:
        sender.join(timeout=30)
    out, err = process.communicate(timeout=30)
    assert all(isinstance(answer, requests.Response) for answer in answers.values()), answers
    assert sorted(answer.status_code for answer in answers.values()) == [201] * requests_sent, answers
    assert process.returncode == 0, err
    assert out.strip() == "Stopped."
    assert "Canceling" not in err
    with sqlite3.connect(database) as check:
        assert check.execute("SELECT count(*) FROM calculation").fetchone() == (requests_sent,)


# --- every environment variable is documented ------------------------------------------------------


def test_config_reads_the_variables_this_test_knows_how_to_find():
    assert {"DATABASE_URL", "SECRET_KEY", "RATE_LIMIT_PER_SECOND", "LOG_REQUESTS"} <= variables_read_in_config()


def test_every_environment_variable_read_in_config_is_documented_in_docs():
    documented = documented_configuration()
    missing = variables_read_in_config() - set(documented)
    assert not missing, f"document in docs/operations.md, section Configuration: {sorted(missing)}"


def test_operations_lists_every_variable_in_its_configuration_table():
    in_operations = {name for path, name, _ in documented_rows() if path == "operations.md"}
    assert variables_read_in_config() <= in_operations, sorted(variables_read_in_config() - in_operations)


def test_docs_document_no_variable_that_config_does_not_read():
    stale = set(documented_configuration()) - variables_read_in_config()
    assert not stale, f"docs/ document variables nothing reads: {sorted(stale)}"


def test_a_variable_documented_twice_has_one_default():
    defaults: dict[str, set[str]] = {}
    for _, name, default in documented_rows():
        defaults.setdefault(name, set()).add(default.strip())
    assert {name: found for name, found in defaults.items() if len(found) > 1} == {}


def test_the_documented_defaults_are_the_defaults(monkeypatch):
    for name in variables_read_in_config():
        monkeypatch.delenv(name, raising=False)
    defaults = config_module.Config.from_env()
    documented = documented_configuration()
    for name, field in [("RATE_LIMIT_PER_SECOND", "rate_limit_per_second"), ("RATE_LIMIT_BURST", "rate_limit_burst"),
                        ("TEST_CAPACITY", "test_capacity"), ("KEY_CACHE_SECONDS", "key_cache_seconds"),
                        ("WEBHOOK_POLL_SECONDS", "webhook_poll_seconds"),
                        ("WEBHOOK_TIMEOUT_SECONDS", "webhook_timeout_seconds")]:
        assert float(documented[name].strip(" `")) == float(getattr(defaults, field)), name
    assert documented["DATABASE_URL"].strip(" `") == config_module.DEFAULT_DATABASE_URL
    assert documented["LOG_REQUESTS"].strip(" `") == "true" and defaults.log_requests is True
    assert documented["CALCULATION_CACHE_SIZE"] == "`10000` on SQLite, `0` on PostgreSQL"
    assert defaults.kept_calculations == 10_000
    assert defaults.with_(database_url="postgresql://db.example/emissions").kept_calculations == 0
    assert documented["THREADS"] == "`1` on SQLite, `8` on PostgreSQL"
    assert defaults.serving_threads == 1
    assert defaults.with_(database_url="postgresql://db.example/emissions").serving_threads == 8
    assert defaults.with_(threads=3).serving_threads == 3
    assert documented["WORKSPACE_THREADS"] == "`1` on SQLite, `2` on PostgreSQL"
    assert defaults.workspace_serving_threads == 1
    assert defaults.with_(database_url="postgresql://db.example/emissions").workspace_serving_threads == 2
    assert defaults.with_(workspace_threads=3, threads=5).workspace_serving_threads == 3


# --- a lost database connection ----------------------------------------------------------------

def drop_server_connection(marker: str) -> None:
    """Terminate the PostgreSQL backend whose last query named `marker` (the server's worker), as a restart would."""
    ended = models.db.execute_sql(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE pid <> pg_backend_pid() AND datname = current_database() AND query LIKE %s",
        (f"%{marker}%",)).fetchall()
    assert ended == [(True,)], ended


@pytest.mark.on_both
def test_a_worker_recovers_after_the_database_drops_its_connection(app, acme):
    if not is_postgres():
        pytest.skip("a connection lost to a database restart is a PostgreSQL matter")
    marker = "conn-" + os.urandom(6).hex()
    make_customer(acme.org, marker)
    path = f"/v1/customers/{marker}"
    with LiveServer(app, threads=1) as server:
        assert requests.get(server.url + path, headers=acme.headers(), timeout=10).status_code == 200
        drop_server_connection(marker)
        failed = requests.get(server.url + path, headers=acme.headers(), timeout=10)
        assert failed.status_code == 503 and failed.json()["error"]["code"] == "INTERNAL_ERROR"
        assert requests.get(server.url + path, headers=acme.headers(), timeout=10).status_code == 200
        # /healthz probes on a connection of its own: the request thread's lost one is not its business.
        assert requests.get(server.url + "/healthz", timeout=10).json() == {"status": "ok", "database": "ok"}


def test_waitress_queue_warnings_pass_once_per_interval_and_count_the_rest():
    now = [100.0]
    throttle = logs.OncePerInterval(interval=10, clock=lambda: now[0])

    def warn(depth: int) -> logging.LogRecord | None:
        record = logging.LogRecord("waitress.queue", logging.WARNING, __file__, 1, "Task queue depth is %d",
                                   (depth,), None)
        return record if throttle.filter(record) else None

    assert warn(1).getMessage() == "Task queue depth is 1"
    assert [warn(depth) for depth in (2, 3, 4)] == [None, None, None]
    now[0] += 10
    assert warn(5).getMessage() == "Task queue depth is 5 (3 more since the last one shown)"
    now[0] += 10
    assert warn(6).getMessage() == "Task queue depth is 6"


def test_ids_are_distinct_version_4_uuids_and_a_forked_child_draws_its_own():
    ids = [models.new_id() for _ in range(1000)]
    assert len(set(ids)) == 1000
    assert all(uuid.UUID(value).version == 4 and uuid.UUID(value).variant == uuid.RFC_4122 for value in ids)
    models.new_id()  # the parent holds a part-used block
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # the child writes its next id and leaves at once
        os.write(writer, models.new_id().encode())
        os._exit(0)
    os.close(writer)
    os.waitpid(child, 0)
    from_child = os.read(reader, 100).decode()
    os.close(reader)
    assert from_child != models.new_id()
