"""Operator commands for production: audit, backup, prune, bulk redelivery, key expiry, prose output."""
from __future__ import annotations

import datetime as dt
import io
import json
import os
import sqlite3
import subprocess
import threading

import pytest
import requests

from emissions import backup
from emissions.cli import service as cli_service
from emissions.config import Config
from emissions import migrations
from emissions import db as db_setup
from emissions import models
from emissions.webhooks import delivery as webhook_delivery
from emissions.webhooks import endpoints as webhook_endpoints
from emissions.webhooks import events as webhook_events
from emissions.models import AuditEvent, WebhookAttempt, WebhookEndpoint, WebhookEvent, utcnow
from conftest import EMISSIONS, LiveServer, cli_json, logistics_body, post_calculation
from webhook_receiver import Receiver


@pytest.fixture(autouse=True)
def migrated(request):
    """Commands run in-process (`emissions`, `ok`, `fails`) meet a migrated database, as after `emissions migrate`."""
    if "emissions" in request.fixturenames:
        migrations.run(db_setup.bind(request.getfixturevalue("config").database_url))


@pytest.fixture(autouse=True)
def private_test_endpoints(monkeypatch):
    """As the `config` fixture: test endpoints may be the receivers on loopback these tests start."""
    monkeypatch.setenv("WEBHOOK_ALLOW_PRIVATE_TEST", "true")


def text(emissions, *argv) -> str:
    status, out, err = emissions(*argv)
    assert (status, err) == (0, ""), err
    return out


# --- the audit trail -------------------------------------------------------------------------------

@pytest.mark.on_both
def test_every_administrative_command_is_recorded_with_actor_action_target_and_time(ok, emissions, receiver_url,
                                                                                   monkeypatch):
    ok("org", "create", "--name", "Acme", "--slug", "acme")
    ok("org", "update", "acme", "--live-capacity", "500")
    key = ok("key", "create", "--org", "acme", "--env", "live", "--scopes", "emissions:read", "--name", "ci")
    ok("key", "revoke", key["id"])
    monkeypatch.setattr("sys.stdin", io.StringIO("correct horse battery\n"))  # --password would warn on stderr
    ok("user", "create", "--org", "acme", "--email", "ops@acme.example", "--password-stdin")
    ok("webhook", "set", "--org", "acme", "--env", "test", "--url", receiver_url)
    ok("webhook", "rotate", "--org", "acme", "--env", "test")
    ok("factor", "create", "--reference", "road", "--mode", "ROAD", "--value", "0.1", "--name", "Road",
       "--source", "Test", "--org", "acme", "--draft")
    ok("factor", "activate", "road", "--version", "1")
    ok("factor", "retire", "road")
    ok("customer", "create", "--org", "acme", "--env", "test", "--reference", "c-1", "--name", "C")
    ok("customer", "update", "--org", "acme", "--env", "test", "--reference", "c-1", "--status", "suspended")
    ok("webhook", "remove", "--org", "acme", "--env", "test")

    events = ok("audit", "--org", "acme", "--limit", "100")["events"]
    assert [(e["action"], e["target"], e["environment"]) for e in reversed(events)] == [
        ("org.created", "acme", None), ("org.updated", "acme", None),
        ("key.created", key["id"], "live"), ("key.revoked", key["id"], "live"),
        ("user.created", "ops@acme.example", None),
        ("endpoint.set", receiver_url, "test"), ("endpoint.rotated", receiver_url, "test"),
        ("factor.created", "road v1", None), ("factor.activated", "road v1", None), ("factor.retired", "road v1", None),
        ("customer.created", "c-1", "test"), ("customer.updated", "c-1", "test"),
        ("endpoint.removed", receiver_url, "test")]
    assert {(e["actor"], e["organization"]) for e in events} == {("cli", "acme")}
    assert events[-1]["details"] == {"name": "Acme", "entitled": True, "live_capacity": None}
    assert events[-2]["details"] == {"live_capacity": 500}
    assert all(dt.datetime.fromisoformat(e["time"].replace("Z", "+00:00")) <= utcnow() for e in events)
    assert "whsec_" not in json.dumps(events) and "service_live_" not in json.dumps(events)  # never a secret
    assert [e["action"] for e in ok("audit", "--limit", "2")["events"]] == ["endpoint.removed", "customer.updated"]


def test_the_audit_shows_an_endpoints_url_without_its_query_or_fragment(ok, receiver_url):
    ok("org", "create", "--name", "Acme", "--slug", "acme")
    ok("webhook", "set", "--org", "acme", "--env", "test", "--url", receiver_url + "/hooks?token=SECRET123#frag")
    ok("webhook", "rotate", "--org", "acme", "--env", "test")
    ok("webhook", "remove", "--org", "acme", "--env", "test")
    events = ok("audit", "--org", "acme")["events"]
    assert [e["target"] for e in events if e["action"].startswith("endpoint.")] == [receiver_url + "/hooks?…#…"] * 3
    assert "SECRET123" not in json.dumps(events) and "frag" not in json.dumps(events)


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path, monkeypatch):
    """`emissions factor list --json | head -c 10`: the pipe closes, and the command stops quietly."""
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'pipe.sqlite3'}")
    cli_json("migrate")  # in-process: only the listing's pipe is the point
    cli_json("factor", "load-library")
    env = dict(os.environ)
    # About 90 KB of JSON: more than a pipe holds, so the write meets the closed pipe.
    done = subprocess.run(f"'{EMISSIONS}' factor list --json | head -c 10", shell=True, env=env,
                          capture_output=True, text=True)
    assert done.stdout == '{"factors"'
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr


def test_a_short_output_to_a_reader_that_has_gone_is_one_line_not_an_error_at_exit(tmp_path, monkeypatch):
    """Buffered output (no PYTHONUNBUFFERED) small enough to wait for the exit: written, and refused,
    while the command still runs."""
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'pipe.sqlite3'}")
    cli_json("migrate")  # in-process: only the listing's pipe is the point
    cli_json("org", "create", "--name", "Acme")
    env = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    process = subprocess.Popen([str(EMISSIONS), "org", "list"], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    process.stdout.close()  # the reader goes before the command writes
    err = process.stderr.read()
    assert process.wait(timeout=30) == 1
    assert err == "emissions: the output was closed before all of it was written\n"


@pytest.fixture
def receiver_url():
    receiver = Receiver(listening=False)
    yield receiver.url
    receiver.close()


def test_audit_text_reads_as_prose(ok, emissions):
    ok("org", "create", "--name", "Acme", "--slug", "acme")
    [line] = text(emissions, "audit").splitlines()
    assert "  cli  org.created  acme  acme  (entitled yes, live_capacity -, name Acme)" in line
    ok("key", "create", "--org", "acme", "--env", "test", "--scopes", "emissions:read")  # no --name
    assert "(expires_at -, name -, scopes emissions:read)" in text(emissions, "audit").splitlines()[0]


def test_a_command_that_fails_records_nothing(ok, emissions):
    ok("org", "create", "--name", "Acme", "--slug", "acme")
    assert emissions("org", "create", "--name", "Acme", "--slug", "acme")[0] == 1
    assert emissions("key", "create", "--org", "acme", "--env", "test", "--scopes", "nope")[0] == 1
    assert [event.action for event in AuditEvent.select()] == ["org.created"]


@pytest.mark.parametrize("limit", ["0", "10001"])
def test_audit_limit_is_bounded(emissions, limit):
    status, _, err = emissions("audit", "--limit", limit)
    assert status == 1 and "--limit must be at least 1" in err


# --- keys and prose --------------------------------------------------------------------------------

def test_key_create_refuses_an_expiry_in_the_past(ok, emissions):
    ok("org", "create", "--name", "Acme", "--slug", "acme")
    past = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=1)).isoformat()
    status, out, err = emissions("key", "create", "--org", "acme", "--env", "test", "--scopes", "emissions:read",
                                 "--expires-at", past)
    assert (status, out) == (1, "") and "is not in the future" in err
    assert models.ApiKey.select().count() == 0


def test_key_list_shows_expired_keys_as_expired_with_name_and_expiry(ok, emissions):
    ok("org", "create", "--name", "Acme", "--slug", "acme")
    soon = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)).isoformat()
    lapsing = ok("key", "create", "--org", "acme", "--env", "live", "--scopes", "emissions:read", "--name", "old ci",
                 "--expires-at", soon)
    active = ok("key", "create", "--org", "acme", "--env", "test", "--scopes", "emissions:read")
    past = utcnow() - dt.timedelta(minutes=5)
    models.ApiKey.update(expires_at=past).where(models.ApiKey.id == lapsing["id"]).execute()  # time passes
    listed = {k["id"]: k for k in ok("key", "list", "--org", "acme")["keys"]}
    assert (listed[lapsing["id"]]["status"], listed[active["id"]]["status"]) == ("expired", "active")
    lines = text(emissions, "key", "list", "--org", "acme").splitlines()
    expired_line = next(line for line in lines if line.startswith(lapsing["id"]))
    assert "\told ci\t" in expired_line and "\texpired\texpires " + models.isoformat(past) in expired_line
    assert next(line for line in lines if line.startswith(active["id"])).endswith("\tactive\texpires never")


def test_text_output_reads_as_prose(ok, emissions):
    out = text(emissions, "org", "create", "--name", "Acme", "--slug", "acme")
    assert out == "slug: acme\nname: Acme\nstatus: active\nentitled: yes\n"
    out = text(emissions, "org", "update", "acme", "--not-entitled")
    assert "entitled: no\n" in out and "live_capacity: -\n" in out and "None" not in out and "False" not in out
    assert text(emissions, "org", "list") == "acme\tactive\tentitled: no\tAcme\n"


# --- backup ----------------------------------------------------------------------------------------

def test_backup_copies_every_calculation_acknowledged_before_it_under_concurrent_writes(app, acme, tmp_path):
    acknowledged: list[str] = []
    stop = threading.Event()

    def write(worker: int) -> None:
        with requests.Session() as session:
            number = 0
            while not stop.is_set():
                number += 1
                answer = session.post(server.url + "/v1/emissions/logistics", timeout=30,
                                      json=logistics_body(external_reference=f"w{worker}-{number}"),
                                      headers=acme.headers(f"w{worker}-{number}"))
                assert answer.status_code == 201, answer.text
                acknowledged.append(answer.json()["id"])

    with LiveServer(app, threads=4) as server:
        writers = [threading.Thread(target=write, args=(worker,)) for worker in range(3)]
        for writer in writers:
            writer.start()
        while len(acknowledged) < 100:
            stop.wait(0.05)
        before = list(acknowledged)
        copied = backup.backup(str(tmp_path / "copy.sqlite3"))
        during = len(acknowledged)
        stop.set()
        for writer in writers:
            writer.join(timeout=30)
    assert during > len(before), "writes went on during the backup"
    with sqlite3.connect(tmp_path / "copy.sqlite3") as copy:
        stored = {row[0] for row in copy.execute("SELECT id FROM calculation")}
        assert copy.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert set(before) <= stored
    assert copied == {"path": str(tmp_path / "copy.sqlite3"), "bytes": (tmp_path / "copy.sqlite3").stat().st_size,
                      "calculations": len(stored)}
    assert not (tmp_path / "copy.sqlite3-wal").exists()


def test_backup_prints_path_bytes_and_calculations_and_refuses_to_overwrite(client, acme, ok, emissions, tmp_path):
    post_calculation(client, acme, status=201)
    target = tmp_path / "nightly.sqlite3"
    assert ok("backup", target) == {"path": str(target), "bytes": target.stat().st_size, "calculations": 1}
    assert target.stat().st_mode & 0o777 == 0o600  # it holds the instance's secrets: its owner's alone
    status, out, err = emissions("backup", target)
    assert (status, out) == (1, "") and err == f"emissions: {target} already exists; give a new file name\n"


def test_backup_refuses_a_partial_file_that_is_there_already_even_a_link(client, acme, emissions, tmp_path):
    post_calculation(client, acme, status=201)
    victim = tmp_path / "victim.txt"
    victim.write_text("not to be overwritten")
    (tmp_path / "copy.sqlite3.partial").symlink_to(victim)
    status, out, err = emissions("backup", tmp_path / "copy.sqlite3")
    assert (status, out) == (1, "") and "copy.sqlite3.partial exists" in err and err.count("\n") == 1
    assert victim.read_text() == "not to be overwritten" and not (tmp_path / "copy.sqlite3").exists()


def test_a_backup_stopped_midway_leaves_no_partial_file(app, acme, tmp_path, monkeypatch):
    """Ctrl-C, or a cron time-out's signal, during the copy: the next run to the same path is not refused."""
    real_connect = sqlite3.connect

    class Interrupted:
        def __init__(self, connection):
            self.connection = connection

        def backup(self, target, **kwargs):
            raise KeyboardInterrupt

        def close(self):
            self.connection.close()

    def connect(path, **kwargs):
        connection = real_connect(path, **kwargs)
        return connection if str(path).endswith(".partial") else Interrupted(connection)

    monkeypatch.setattr(backup.sqlite3, "connect", connect)
    with pytest.raises(KeyboardInterrupt):
        backup.backup(str(tmp_path / "copy.sqlite3"))
    assert list(tmp_path.glob("copy.sqlite3*")) == []
    monkeypatch.setattr(backup.sqlite3, "connect", real_connect)
    assert backup.backup(str(tmp_path / "copy.sqlite3"))["path"] == str(tmp_path / "copy.sqlite3")


def test_backup_of_a_database_url_that_names_no_file_is_refused_and_creates_nothing(tmp_path, monkeypatch):
    missing = tmp_path / "mistyped.sqlite3"
    done = subprocess.run([str(EMISSIONS), "backup", str(tmp_path / "copy.sqlite3")], capture_output=True, text=True,
                          env={**os.environ, "DATABASE_URL": f"sqlite:///{missing}"})
    assert done.returncode == 1 and done.stderr == f"emissions: there is no database at {missing}; check DATABASE_URL\n"
    assert not missing.exists() and not (tmp_path / "copy.sqlite3").exists()


def test_a_new_sqlite_database_is_its_owners_alone(tmp_path, monkeypatch):
    database = tmp_path / "fresh.sqlite3"
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{database}")
    cli_json("migrate")
    assert database.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_backup_on_postgresql_says_to_use_pg_dump(emissions, tmp_path):
    status, out, err = emissions("backup", tmp_path / "copy")
    assert (status, out) == (1, "") and "pg_dump" in err and err.count("\n") == 1
    assert not (tmp_path / "copy").exists()


# --- prune and redelivery ---------------------------------------------------------------------------

def make_event(acme, status: str, age_days: float, attempts: int = 1) -> str:
    event = webhook_events.record_event(acme.org.id, "test", "calculation.succeeded", "{}")
    created = utcnow() - dt.timedelta(days=age_days)
    WebhookEvent.update(delivery_status=status, created_at=created, next_attempt_at=None).where(
        WebhookEvent.id == event.id).execute()
    for number in range(1, attempts + 1):
        WebhookAttempt.create(event=event.id, number=number, url="http://x", attempted_at=created, status_code=500)
    return event.id


@pytest.mark.on_both
def test_prune_deletes_finished_events_and_attempts_older_than_days_never_calculations(client, acme, ok):
    post_calculation(client, acme, status=201)  # its event is skipped (no endpoint) and new
    old = [make_event(acme, status, 40, attempts=2) for status in ("succeeded", "failed", "skipped")]
    old_pending = make_event(acme, "pending", 40)
    recent = make_event(acme, "failed", 10)
    assert ok("prune", "--older-than", "30") == {"events": 3, "attempts": 6, "older_than_days": 30}
    remaining = {event.id for event in WebhookEvent.select()}
    assert not remaining & set(old) and {old_pending, recent} <= remaining and len(remaining) == 3
    assert models.Calculation.select().count() == 1
    assert ok("prune", "--older-than", "30") == {"events": 0, "attempts": 0, "older_than_days": 30}


def test_retention_days_makes_the_scheduler_prune_daily(config, acme):
    from emissions import scheduler

    make_event(acme, "succeeded", 3)
    started = scheduler.start(config.with_(retention_days=2))
    try:
        job = started.scheduler.get_job(scheduler.PRUNE_JOB_ID)
        assert job.trigger.interval == dt.timedelta(days=1)
        job.func()  # what the scheduler runs each day
    finally:
        started.shutdown()
    assert WebhookEvent.select().count() == 0
    idle = scheduler.start(config)
    try:
        assert idle.scheduler.get_job(scheduler.PRUNE_JOB_ID) is None
    finally:
        idle.shutdown()


@pytest.mark.on_both
def test_redeliver_since_requeues_failed_and_skipped_events_of_enabled_endpoints(acme, ok):
    webhook_endpoints.set_endpoint(acme.org.id, "test", "http://127.0.0.1:9/hooks", actor="test", allow_private_test=True)
    failed, skipped, succeeded = (make_event(acme, status, 2) for status in ("failed", "skipped", "succeeded"))
    too_old = make_event(acme, "failed", 20)
    since = (utcnow() - dt.timedelta(days=5)).date().isoformat()
    assert ok("webhook", "redeliver", "--since", since)["queued"] == 2
    statuses = {event.id: (event.delivery_status, event.attempt_count) for event in WebhookEvent.select()}
    assert statuses[failed] == statuses[skipped] == ("pending", 0)
    assert statuses[succeeded] == ("succeeded", 0) and statuses[too_old] == ("failed", 0)
    assert ok("webhook", "redeliver", "--since", since, "--status", "succeeded")["queued"] == 1


def test_redeliver_since_refuses_an_unknown_status_and_needs_one_of_id_or_since(emissions):
    assert "cannot redeliver events that are delivering" in emissions(
        "webhook", "redeliver", "--since", "2026-01-01", "--status", "delivering")[2]
    assert "give an event id, or --since" in emissions("webhook", "redeliver")[2]


@pytest.mark.on_both
def test_redelivering_a_pending_event_makes_it_due_now_and_keeps_its_attempts(acme):
    webhook_endpoints.set_endpoint(acme.org.id, "test", "http://127.0.0.1:9/hooks", actor="test", allow_private_test=True)
    event_id = make_event(acme, "pending", 0, attempts=2)
    later = utcnow() + dt.timedelta(hours=2)
    WebhookEvent.update(next_attempt_at=later, attempt_count=2).where(WebhookEvent.id == event_id).execute()
    event = webhook_events.redeliver(event_id, actor="test")
    assert (event.delivery_status, event.attempt_count) == ("pending", 2)
    assert event.next_attempt_at <= utcnow()


@pytest.mark.on_both
def test_after_a_410_webhook_set_resumes_delivery_and_redeliver_sends_what_was_skipped(client, acme, config,
                                                                                      emissions):
    receiver = Receiver(statuses=[410])
    try:
        webhook_endpoints.set_endpoint(acme.org.id, "test", receiver.url, actor="test", allow_private_test=True)
        post_calculation(client, acme, "first", status=201)
        worker = webhook_delivery.Deliverer(config)
        assert worker.run_once()["failed"] == 1
        assert WebhookEndpoint.get().status == "disabled"
        post_calculation(client, acme, "while-disabled", status=201, external_reference="s-2")
        assert WebhookEvent.select().where(WebhookEvent.delivery_status == "skipped").count() == 1

        status, out, err = emissions("webhook", "set", "--org", "acme", "--env", "test", "--url", receiver.url)
        assert status == 0 and "1 events were skipped while the endpoint was disabled" in err
        post_calculation(client, acme, "after", status=201, external_reference="s-3")
        assert worker.run_once()["succeeded"] == 1  # a new event is delivered again
        since = models.isoformat(utcnow() - dt.timedelta(minutes=5))
        status, out, _ = emissions("webhook", "redeliver", "--since", since, "--status", "skipped")
        assert status == 0 and out.startswith("queued 1 events")
        assert worker.run_once()["succeeded"] == 1
        worker.close()
    finally:
        receiver.close()
    assert [r.event_id for r in receiver.received][1:] == [
        e.id for e in WebhookEvent.select().where(WebhookEvent.delivery_status == "succeeded")
        .order_by(WebhookEvent.delivered_at)]


@pytest.mark.on_both
def test_an_attempt_answered_with_an_error_status_records_it_as_one_phrase(client, acme, config):
    receiver = Receiver(statuses=[503, 302])
    try:
        webhook_endpoints.set_endpoint(acme.org.id, "test", receiver.url, actor="test", allow_private_test=True)
        post_calculation(client, acme, status=201)
        worker = webhook_delivery.Deliverer(config.with_(webhook_retry_schedule=(0, 0)))
        # A run ends after a round in which no receiver answered (the 503); the 302 is an answer, so
        # the second run goes on to the retry that succeeds.
        assert [worker.run_once()["succeeded"] for _ in range(2)] == [0, 1]
        worker.close()
    finally:
        receiver.close()
    assert [(a.status_code, a.error) for a in WebhookAttempt.select().order_by(WebhookAttempt.number)] == [
        (503, "HTTP 503"), (302, "HTTP 302"), (200, None)]


# --- SECRET_KEY --------------------------------------------------------------------------------------

def test_serve_warns_once_when_secret_key_is_unset_while_live_keys_exist(ok, emissions, capsys):
    ok("org", "create", "--name", "Acme", "--slug", "acme")
    config = Config.from_env()
    cli_service.warn_about_secret(config)
    assert capsys.readouterr().err == ""
    ok("key", "create", "--org", "acme", "--env", "live", "--scopes", "emissions:read")
    cli_service.warn_about_secret(config)
    assert capsys.readouterr().err.count("SECRET_KEY is unset while 1 live API keys exist") == 1
    cli_service.warn_about_secret(config.with_(secret_key="k" * 32))
    assert capsys.readouterr().err == ""
