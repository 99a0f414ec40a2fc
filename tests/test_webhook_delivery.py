"""Webhook delivery over the wire: a real HTTP receiver on loopback, the clock mocked where time matters."""
from __future__ import annotations

import collections
import contextlib
import datetime as dt
import hashlib
import hmac
import json
import logging
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests
import requests.certs
import standardwebhooks
import urllib3.exceptions

from emissions import scheduler
from emissions.webhooks import delivery as webhook_delivery
from emissions.webhooks import endpoints as webhook_endpoints
from emissions.webhooks import events as webhook_events
from emissions.webhooks import signing as webhook_signing
from emissions.webhooks import transport as webhook_transport
from conftest import logistics_body, make_customer, make_key, post_calculation, record_statements
from emissions.config import Config, ConfigError
from emissions.models import AuditEvent, WebhookAttempt, WebhookEndpoint, WebhookEvent, isoformat, utcnow
from webhook_receiver import RawPeer, Receiver, documented_verify, expired_certificate, self_signed_certificate

REPO = Path(__file__).resolve().parent.parent


class Clock:
    """A settable clock for the Deliverer (schedules and leases without waiting)."""

    def __init__(self):
        self.now = utcnow()

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)


@pytest.fixture
def receiver():
    receiver = Receiver()
    yield receiver
    receiver.close()


def endpoint(persona, url: str, environment: str = "test") -> str:
    """Set the persona's endpoint; return its secret."""
    return webhook_endpoints.set_endpoint(persona.org.id, environment, url, actor="test", allow_private_test=True)[1]


def deliverer(config, **kwargs) -> webhook_delivery.Deliverer:
    return webhook_delivery.Deliverer(config, **kwargs)


def deliver_one_calculation(client, config, persona, receiver) -> None:
    """Make a calculation with an endpoint at `receiver` and let one worker pass deliver it; then close the receiver."""
    endpoint(persona, receiver.url)
    post_calculation(client, persona, status=201)
    worker = deliverer(config)
    assert worker.run_once()["pending"] == 1
    worker.close()
    receiver.close()


def attempts_of(event_id: str) -> list[WebhookAttempt]:
    return list(WebhookAttempt.select().where(WebhookAttempt.event == event_id).order_by(WebhookAttempt.number))


def by_hand(secret: str, received) -> str:
    """The documented formula, written out independently of webhook_signing.sign."""
    message = (received.headers["X-Service-Webhook-Id"] + "." + received.headers["X-Service-Webhook-Timestamp"]
               + ".").encode() + received.body
    return "v1=" + hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


def deliver_event(config, persona, clock=utcnow) -> None:
    webhook_events.record_event(persona.org.id, "test", "calculation.succeeded", json.dumps({"n": 1}))
    worker = deliverer(config, clock=clock)
    assert worker.run_once()["succeeded"] == 1
    worker.close()


@pytest.mark.on_both
def test_a_rotation_signs_with_both_secrets_until_its_overlap_ends(config, acme, receiver):
    """A receiver that deploys the new secret during the overlap never fails a delivery."""
    old = endpoint(acme, receiver.url)
    _, new = webhook_endpoints.rotate_secret(acme.org.id, "test", actor="user:ops@acme.example")
    deliver_event(config, acme)
    during = receiver.received[-1]
    assert during.headers["X-Service-Webhook-Signature"] == by_hand(old, during)
    assert during.headers["X-Service-Webhook-Signature-Next"] == by_hand(new, during)
    for secret in (old, new):  # the receiver before and after deploying the new secret
        assert documented_verify()(secret, during.headers, during.body) == during.event_id
        assert webhook_signing.verify(secret, during.headers, during.body) == during.event_id
    with pytest.raises(ValueError, match="signature does not match"):
        documented_verify()("whsec_" + "x" * 32, during.headers, during.body)

    webhook_endpoints.end_overlap(acme.org.id, "test", actor="user:ops@acme.example")
    deliver_event(config, acme)
    after = receiver.received[-1]
    assert after.headers["X-Service-Webhook-Signature"] == by_hand(new, after)
    assert "X-Service-Webhook-Signature-Next" not in after.headers
    assert documented_verify()(new, after.headers, after.body) == after.event_id
    with pytest.raises(ValueError, match="signature does not match"):
        documented_verify()(old, after.headers, after.body)
    events = AuditEvent.select().where(AuditEvent.actor == "user:ops@acme.example").order_by(AuditEvent.id)
    assert [(event.action, event.environment) for event in events] == [
        ("endpoint.rotated", "test"), ("endpoint.overlap_ended", "test")]


@pytest.mark.on_both
def test_when_the_overlap_runs_out_the_new_secret_is_the_only_one(config, acme, receiver):
    old = endpoint(acme, receiver.url)
    _, new = webhook_endpoints.rotate_secret(acme.org.id, "test", actor="test", overlap_hours=1)
    ends = webhook_endpoints.endpoint_for(acme.org.id, "test").overlap_ends_at
    deliver_event(config, acme, clock=lambda: ends - dt.timedelta(seconds=1))
    assert receiver.received[-1].headers["X-Service-Webhook-Signature-Next"] == by_hand(new, receiver.received[-1])
    deliver_event(config, acme, clock=lambda: ends)
    last = receiver.received[-1]
    assert last.headers["X-Service-Webhook-Signature"] == by_hand(new, last) != by_hand(old, last)
    assert "X-Service-Webhook-Signature-Next" not in last.headers
    # By the real clock the overlap still runs: a second rotation replaces the new secret, the old one stays.
    _, newest = webhook_endpoints.rotate_secret(acme.org.id, "test", actor="test")
    stored = webhook_endpoints.endpoint_for(acme.org.id, "test")
    assert (stored.secret, stored.next_secret) == (old, newest)


@pytest.mark.on_both
def test_succeeded_event_is_signed_with_the_documented_formula(client, config, acme, receiver):
    secret = endpoint(acme, receiver.url)
    created = post_calculation(client, acme, status=201)
    worker = deliverer(config)
    assert worker.run_once()["succeeded"] == 1
    worker.close()

    [received] = receiver.received
    event = WebhookEvent.get()
    assert received.path == "/hooks"
    assert received.headers["Content-Type"] == "application/json"
    assert received.headers["X-Service-Webhook-Id"] == event.id
    assert received.headers["X-Service-Webhook-Signature"] == by_hand(secret, received)
    assert documented_verify()(secret, received.headers, received.body) == event.id
    assert webhook_signing.verify(secret, received.headers, received.body) == event.id
    body = json.loads(received.body)
    assert body == {"id": event.id, "type": "calculation.succeeded", "created_at": body["created_at"],
                    "environment": "test", "data": created.json}
    assert body["data"] == client.get(f"/v1/calculations/{created.json['id']}", headers=acme.headers()).json
    assert received.body == event.payload.encode()
    [attempt] = attempts_of(event.id)
    assert (attempt.number, attempt.status_code, attempt.error, attempt.response_excerpt) == (
        1, 200, None, "answer 200")
    event = WebhookEvent.get()
    assert (event.delivery_status, event.attempt_count, event.lock_token) == ("succeeded", 1, None)
    assert event.delivered_at is not None


def test_the_delivery_log_line_shows_the_endpoint_without_its_query(client, config, acme, receiver, caplog):
    endpoint(acme, receiver.url + "?token=receiver-secret")
    post_calculation(client, acme, status=201)
    caplog.set_level(logging.INFO, logger="emissions.webhooks")
    worker = deliverer(config)
    assert worker.run_once()["succeeded"] == 1
    worker.close()
    [line] = [record.fields for record in caplog.records if record.getMessage() == "delivery attempt"]
    assert line["url"] == receiver.url + "?…" and line["status_code"] == 200
    assert "receiver-secret" not in caplog.text
    assert receiver.received[0].path == "/hooks?token=receiver-secret"  # sent as set, of course


@pytest.mark.on_both
def test_retries_follow_the_schedule_with_the_same_id_and_a_fresh_timestamp(client, config, acme):
    receiver = Receiver(statuses=[500, 503])
    secret = endpoint(acme, receiver.url)
    post_calculation(client, acme, status=201)
    clock = Clock()
    worker = deliverer(config.with_(webhook_retry_schedule=(5, 300)), clock=clock)
    started = clock.now

    assert worker.run_once() == {"succeeded": 0, "pending": 1, "failed": 0, "lease-lost": 0}
    assert WebhookEvent.get().next_attempt_at == started + dt.timedelta(seconds=5)
    clock.advance(4)
    assert worker.run_once()["pending"] == 0 and len(receiver.received) == 1  # not due yet
    clock.advance(1)
    assert worker.run_once()["pending"] == 1
    assert WebhookEvent.get().next_attempt_at == started + dt.timedelta(seconds=305)
    clock.advance(300)
    assert worker.run_once()["succeeded"] == 1
    worker.close()
    receiver.close()

    assert len({r.headers["X-Service-Webhook-Id"] for r in receiver.received}) == 1
    assert [int(r.headers["X-Service-Webhook-Timestamp"]) for r in receiver.received] == [
        int(started.timestamp()), int(started.timestamp()) + 5, int(started.timestamp()) + 305]
    for received in receiver.received:
        assert received.headers["X-Service-Webhook-Signature"] == by_hand(secret, received)
        assert received.body == receiver.received[0].body
    assert [(a.number, a.status_code) for a in attempts_of(WebhookEvent.get().id)] == [
        (1, 500), (2, 503), (3, 200)]


@pytest.mark.on_both
def test_delivery_fails_after_the_last_attempt_and_redeliver_starts_a_new_round(client, config, acme):
    receiver = Receiver(statuses=[500, 500, 500])
    endpoint(acme, receiver.url)
    post_calculation(client, acme, status=201)
    # A stopped clock: the endpoint's probe (after as long as it has been down) is due at once too.
    clock = Clock()
    worker = deliverer(config.with_(webhook_retry_schedule=(0, 0)), clock=clock)
    # A round that fails ends the run's claiming: one attempt a run.
    runs = [worker.run_once() for _ in range(3)]
    assert runs == [{"succeeded": 0, "pending": 1, "failed": 0, "lease-lost": 0}] * 2 + [
        {"succeeded": 0, "pending": 0, "failed": 1, "lease-lost": 0}]
    event = WebhookEvent.get()
    assert (event.delivery_status, event.attempt_count, event.next_attempt_at) == ("failed", 3, None)

    assert webhook_events.redeliver(event.id, actor="test").delivery_status == "pending"
    again = webhook_events.redeliver(event.id, actor="test")  # already pending: stays so, due now
    assert (again.delivery_status, again.attempt_count) == ("pending", 0)
    clock.now = utcnow()
    assert worker.run_once()["succeeded"] == 1
    worker.close()
    receiver.close()
    assert [(a.number, a.status_code) for a in attempts_of(event.id)] == [(1, 500), (2, 500), (3, 500), (4, 200)]
    assert len(receiver.received) == 4
    assert WebhookEvent.get().delivery_status == "succeeded"


@pytest.mark.on_both
def test_idempotent_replay_sends_nothing(client, config, acme, receiver):
    endpoint(acme, receiver.url)
    post_calculation(client, acme, status=201)
    post_calculation(client, acme, status=200)
    post_calculation(client, acme, status=200)
    worker = deliverer(config)
    worker.run_once()
    worker.run_once()
    worker.close()
    assert len(receiver.received) == 1
    assert WebhookEvent.select().count() == 1


@pytest.mark.on_both
def test_calculation_failed_carries_the_error_reference_of_the_422(client, config, acme, receiver):
    secret = endpoint(acme, receiver.url)
    failed = post_calculation(client, acme, status=422, activity_date="2024-06-30")
    worker = deliverer(config)
    worker.run_once()
    worker.close()

    [received] = receiver.received
    assert received.headers["X-Service-Webhook-Signature"] == by_hand(secret, received)
    body = json.loads(received.body)
    assert body["type"] == "calculation.failed"
    assert body["data"] == {
        "external_reference": "shipment-1",
        "customer": {"reference": "cust-1"},
        "error": {"code": "CALCULATION_FAILED", "message": failed.json["error"]["message"],
                  "request_id": failed.headers["X-Request-Id"]},
    }
    assert failed.json["error"]["request_id"] == failed.headers["X-Request-Id"]


@pytest.mark.on_both
def test_a_receiver_that_is_down_then_up_gets_every_event(client, config, acme):
    receiver = Receiver(listening=False)
    secret = endpoint(acme, receiver.url)
    for number in range(3):
        post_calculation(client, acme, f"idem-{number}", status=201, external_reference=f"s-{number}")
    post_calculation(client, acme, "idem-failed", status=422, activity_date="2024-06-30")
    clock = Clock()
    worker = deliverer(config.with_(webhook_retry_schedule=(5, 300)), clock=clock)
    assert worker.run_once()["pending"] == 4  # one round: each is attempted once
    assert {a.error for a in WebhookAttempt.select()} == {"connection refused"}
    clock.advance(5)
    assert worker.run_once()["pending"] == 1  # the endpoint is down: one probe

    receiver.listen()
    clock.advance(300)
    assert worker.run_once()["succeeded"] == 4
    worker.close()
    receiver.close()
    assert sorted(r.event_id for r in receiver.received) == sorted(e.id for e in WebhookEvent.select())
    assert all(r.headers["X-Service-Webhook-Signature"] == by_hand(secret, r) for r in receiver.received)
    assert WebhookEndpoint.get().down_since is None


def queue(persona, count: int, minutes_ago: int = 60) -> list[str]:
    """`count` events for the persona's test endpoint, due a minute apart from `minutes_ago`; their ids in that order."""
    ids = []
    for number in range(count):
        event = webhook_events.record_event(persona.org.id, "test", "calculation.succeeded", json.dumps({"n": number}))
        WebhookEvent.update(next_attempt_at=utcnow() - dt.timedelta(minutes=minutes_ago - number)).where(
            WebhookEvent.id == event.id).execute()
        ids.append(event.id)
    return ids


def attempts_by_event() -> dict[str, int]:
    counted = collections.Counter(attempt.event_id for attempt in WebhookAttempt.select())
    return {event.id: counted[event.id] for event in WebhookEvent.select()}


@pytest.mark.on_both
def test_a_down_endpoint_gets_one_probe_at_a_time_and_its_other_deliveries_wait_unattempted(config, acme, ok,
                                                                                             emissions):
    receiver = Receiver(listening=False)
    endpoint(acme, receiver.url)
    ids = queue(acme, 12)
    clock = Clock()
    started = clock.now
    worker = deliverer(config.with_(webhook_retry_schedule=(5, 300)), clock=clock, threads=4)

    assert worker.run_once() == {"succeeded": 0, "pending": 4, "failed": 0, "lease-lost": 0}
    stored = WebhookEndpoint.get()
    assert (stored.down_since, stored.down_until) == (started, started + dt.timedelta(seconds=5))
    assert WebhookEndpoint.get().to_dict()["next_probe_at"] == isoformat(started + dt.timedelta(seconds=5))
    # The other eight were not attempted: no attempt recorded, none counted, still due as they were.
    assert attempts_by_event() == {event_id: int(place < 4) for place, event_id in enumerate(ids)}
    assert all(event.attempt_count == attempts_by_event()[event.id] for event in WebhookEvent.select())
    assert {event.delivery_status for event in WebhookEvent.select()} == {"pending"}

    clock.advance(4.9)
    assert sum(worker.run_once().values()) == 0  # known down until its probe time
    clock.advance(0.1)
    assert worker.run_once()["pending"] == 1  # the probe: the oldest due delivery
    assert attempts_by_event()[ids[4]] == 1 and sum(attempts_by_event().values()) == 5
    assert WebhookEndpoint.get().down_until == clock.now + dt.timedelta(seconds=5)  # down for 5 s so far
    clock.advance(5)
    assert worker.run_once()["pending"] == 1
    assert WebhookEndpoint.get().down_until == clock.now + dt.timedelta(seconds=10)  # probes thin out
    assert all(event.attempt_count == attempts_by_event()[event.id] for event in WebhookEvent.select())
    # What the operator sees.
    assert ok("webhook", "deliveries", "--org", "acme", "--limit", "1")["endpoints_down"] == [{
        "organization": "acme", "environment": "test", "url": receiver.url, "down_since": isoformat(started),
        "next_probe_at": isoformat(clock.now + dt.timedelta(seconds=10))}]
    assert ok("webhook", "show", "--org", "acme", "--env", "test")["next_probe_at"] == isoformat(
        clock.now + dt.timedelta(seconds=10))
    status, out, _ = emissions("webhook", "deliveries", "--limit", "1")
    assert status == 0 and out.startswith(f"endpoint acme/test {receiver.url} is down since {isoformat(started)}: ")

    receiver.listen()
    clock.advance(10)
    assert worker.run_once()["succeeded"] == 12
    worker.close()
    receiver.close()
    assert sorted(r.event_id for r in receiver.received) == sorted(ids)
    assert (WebhookEndpoint.get().down_since, WebhookEndpoint.get().down_until) == (None, None)
    assert all(event.attempt_count == attempts_by_event()[event.id] for event in WebhookEvent.select())


@pytest.mark.on_both
def test_a_receiver_back_from_an_outage_gets_its_backlog_in_order_of_due_time(config, acme):
    receiver = Receiver(listening=False)
    endpoint(acme, receiver.url)
    ids = queue(acme, 6)
    clock = Clock()
    worker = deliverer(config.with_(webhook_retry_schedule=(5, 300)), clock=clock, threads=1)
    assert worker.run_once()["pending"] == 1  # the first is attempted, then the endpoint is down
    due = [event.id for event in WebhookEvent.select().order_by(WebhookEvent.next_attempt_at)]
    assert due == ids[1:] + ids[:1]

    receiver.listen()
    clock.advance(5)
    assert worker.run_once()["succeeded"] == 6
    worker.close()
    receiver.close()
    assert [r.event_id for r in receiver.received] == due


@pytest.mark.on_both
def test_a_round_of_attempts_is_recorded_in_one_write_transaction(monkeypatch, config, acme, globex):
    down, up = Receiver(listening=False), Receiver()
    endpoint(acme, down.url)
    endpoint(globex, up.url)
    queue(acme, 3)
    queue(globex, 5)
    sent: list[str] = []
    record_statements(monkeypatch, lambda statement, params: sent.append(statement))
    worker = deliverer(config, threads=8)
    assert worker.run_once() == {"succeeded": 5, "pending": 3, "failed": 0, "lease-lost": 0}
    worker.close()
    down.close()
    up.close()
    transactions = " ".join(sent).split("BEGIN")[1:]
    writes = [t for t in transactions if re.search(r"\b(INSERT|UPDATE)\b", t)]
    assert len(writes) == 2  # the claim, then the round's eight attempts
    assert writes[1].count('INSERT INTO "webhook_attempt"') == 8
    assert len(up.received) == 5 and WebhookEndpoint.get(WebhookEndpoint.organization == acme.org.id).down_since


@pytest.mark.on_both
def test_a_round_with_no_answer_ends_the_runs_claiming_until_the_next_poll(config, acme, globex):
    down, up = Receiver(listening=False), Receiver()
    endpoint(acme, down.url)
    endpoint(globex, up.url)
    [first] = queue(acme, 1)
    later = queue(globex, 2, minutes_ago=30)  # due after acme's
    worker = deliverer(config, threads=1)
    assert worker.run_once() == {"succeeded": 0, "pending": 1, "failed": 0, "lease-lost": 0}
    assert attempts_by_event() == {first: 1, **{event_id: 0 for event_id in later}}
    assert worker.run_once()["succeeded"] == 2  # the next poll: acme's endpoint is down, globex's is served
    worker.close()
    down.close()
    up.close()
    assert [r.event_id for r in up.received] == later


@pytest.mark.on_both
def test_a_receiver_refusing_every_delivery_does_not_hold_up_other_organizations(config, acme, globex):
    """A 401 (a secret rotated badly) is an answer: the receiver is up, so the run goes on claiming."""
    refusing, up = Receiver(statuses=[401] * 24), Receiver()
    endpoint(acme, refusing.url)
    endpoint(globex, up.url)
    queue(acme, 24, minutes_ago=60)  # acme's backlog, due first: three rounds of eight
    later = queue(globex, 2, minutes_ago=30)
    worker = deliverer(config, clock=Clock(), threads=8)
    assert worker.run_once() == {"succeeded": 2, "pending": 24, "failed": 0, "lease-lost": 0}
    worker.close()
    refusing.close()
    up.close()
    assert sorted(r.event_id for r in up.received) == sorted(later)
    assert WebhookEndpoint.get(WebhookEndpoint.organization == acme.org.id).down_since is None


@pytest.mark.on_both
def test_a_probe_in_flight_is_the_only_one_while_later_polls_claim(config, acme):
    hold = threading.Event()
    silent = Receiver(hold=hold)
    endpoint(acme, silent.url)
    ids = queue(acme, 10)
    WebhookEndpoint.update(down_since=utcnow() - dt.timedelta(minutes=1), down_until=utcnow()).execute()
    worker = deliverer(config.with_(webhook_poll_seconds=0.05), threads=8)
    claimed: list[int] = []
    polled = threading.Event()
    claim = worker.claim

    def counting(limit):
        claims = claim(limit)
        claimed.append(len(claims))
        if len(claimed) == 4:
            polled.set()
        return claims

    worker.claim = counting
    results: list[dict] = []
    running = threading.Thread(target=lambda: results.append(worker.run_once()))
    running.start()
    try:
        assert polled.wait(30)  # three polls while the probe waits for its answer
        assert claimed[:4] == [1, 0, 0, 0] and len(silent.received) == 1
    finally:
        hold.set()
        running.join()
    worker.close()
    silent.close()
    assert results == [{"succeeded": 10, "pending": 0, "failed": 0, "lease-lost": 0}]  # it answered: the rest follow
    assert attempts_by_event() == {event_id: 1 for event_id in ids}


@pytest.mark.on_both
def test_two_workers_may_each_send_one_probe(config, acme):
    """As documented: the probe time is moved when a probe is recorded, so each worker may send one."""
    endpoint(acme, "http://127.0.0.1:9/hook")
    ids = queue(acme, 4)
    WebhookEndpoint.update(down_since=utcnow() - dt.timedelta(minutes=1), down_until=utcnow()).execute()
    first, second = deliverer(config), deliverer(config)
    assert [[c.event_id for c in worker.claim(8)] for worker in (first, second)] == [ids[:1], ids[1:2]]
    first.close()
    second.close()


@pytest.mark.on_both
def test_a_round_updates_its_events_by_id_and_its_endpoints_by_key(monkeypatch, config, acme, globex):
    """One order for every worker: two recording rounds at once wait for each other, never deadlock."""
    endpoint(acme, "http://127.0.0.1:9/acme")
    endpoint(globex, "http://127.0.0.1:9/globex")
    queue(acme, 3)
    queue(globex, 3, minutes_ago=90)  # globex's due first, so claimed first
    worker = deliverer(config)
    claims = worker.claim(8)
    assert [c.organization_id for c in claims] == [globex.org.id] * 3 + [acme.org.id] * 3
    sent: list[tuple[str, tuple]] = []
    record_statements(monkeypatch, lambda statement, params: sent.append((statement, params)))
    now = utcnow()
    gone = webhook_delivery.AttemptResult(now, 410, 1, "HTTP 410", None)
    refused = webhook_delivery.AttemptResult(now, None, 1, "connection refused", None)
    worker.record([(c, gone if c.organization_id == globex.org.id else refused) for c in claims])
    worker.close()
    updates = [(statement, params) for statement, params in sent if statement.startswith("UPDATE")]
    events = [params[-2] for statement, params in updates if statement.startswith('UPDATE "webhook_event"')]
    assert events == sorted(c.event_id for c in claims)
    endpoints = [statement for statement, _ in updates if statement.startswith('UPDATE "webhook_endpoint"')]
    assert len(endpoints) == 2 and [statement for statement, _ in updates][-2:] == endpoints  # after the events
    order = sorted([acme.org.id, globex.org.id])
    marked = [next(p for p in params if p in order) for statement, params in updates if statement in endpoints]
    assert marked == order
    assert WebhookEndpoint.get(WebhookEndpoint.organization == globex.org.id).status == "disabled"
    assert WebhookEndpoint.get(WebhookEndpoint.organization == acme.org.id).down_since == now


@pytest.mark.on_both
def test_a_round_on_the_wire_when_the_endpoint_is_set_again_starts_a_new_outage(config, acme):
    """`webhook set` ends an outage; a failed probe recorded after it does not bring the old one back."""
    endpoint(acme, "http://127.0.0.1:9/hook")
    queue(acme, 2)
    clock = Clock()
    WebhookEndpoint.update(down_since=clock.now - dt.timedelta(hours=1), down_until=clock.now).execute()
    worker = deliverer(config.with_(webhook_retry_schedule=(5, 300)), clock=clock)
    [probe] = worker.claim(8)
    assert probe.down_since == clock.now - dt.timedelta(hours=1)
    endpoint(acme, "http://127.0.0.1:9/hook")  # the operator sets the same URL while the probe is on the wire
    clock.advance(1)
    worker.record([(probe, webhook_delivery.AttemptResult(clock.now, None, 1, "connection refused", None))])
    worker.close()
    stored = WebhookEndpoint.get()
    assert (stored.down_since, stored.down_until) == (clock.now, clock.now + dt.timedelta(seconds=5))


@pytest.mark.on_both
def test_a_test_event_sent_while_the_endpoint_is_down_makes_the_next_poll_probe_it(config, acme, receiver):
    endpoint(acme, receiver.url)
    ids = queue(acme, 2)
    WebhookEndpoint.update(down_since=utcnow() - dt.timedelta(minutes=10),
                           down_until=utcnow() + dt.timedelta(minutes=5)).execute()
    worker = deliverer(config)
    assert sum(worker.run_once().values()) == 0  # down until its probe time
    test_event = webhook_events.send_test_event(acme.org.id, "test", actor="test")
    assert worker.run_once()["succeeded"] == 3
    worker.close()
    # The probe is the oldest due delivery; once it is answered, the rest follow, the test event among them.
    assert receiver.received[0].event_id == ids[0]
    assert sorted(r.event_id for r in receiver.received[1:]) == sorted([ids[1], test_event.id])
    assert WebhookEndpoint.get().down_since is None


@pytest.mark.on_both
def test_a_new_url_ends_the_outage_and_a_failure_at_the_old_url_does_not_mark_the_new_one(config, acme):
    old, new = Receiver(listening=False), Receiver()
    endpoint(acme, old.url)
    ids = queue(acme, 5)
    clock = Clock()
    worker = deliverer(config, clock=clock, threads=1)
    assert worker.run_once()["pending"] == 1
    assert WebhookEndpoint.get().down_since == clock.now
    assert worker.claim(1) == []  # nothing claimable: the endpoint is down

    endpoint(acme, new.url)  # the operator points the endpoint at a receiver that answers
    assert WebhookEndpoint.get().down_since is None
    clock.advance(1)
    other = deliverer(config, clock=clock)
    [late] = other.claim(1)  # a worker claims, then the URL changes again
    other.close()
    endpoint(acme, old.url)
    assert late.url == new.url
    worker.record([(late, webhook_delivery.AttemptResult(clock.now, None, 1, "connection refused", None))])
    assert WebhookEndpoint.get().down_since is None  # the failure was at another URL than the endpoint's
    endpoint(acme, new.url)
    clock.advance(5)  # the two attempted are due again
    assert worker.run_once()["succeeded"] == 5
    worker.close()
    old.close()
    new.close()
    assert sorted(r.event_id for r in new.received) == sorted(ids)
    assert {a.url for a in WebhookAttempt.select()} == {old.url, new.url}


@pytest.mark.on_both
def test_an_answer_from_the_receiver_application_keeps_the_endpoint_up(config, acme):
    receiver = Receiver(statuses=[400, 503])
    endpoint(acme, receiver.url)
    ids = queue(acme, 2)
    worker = deliverer(config, threads=2)
    assert worker.run_once()["pending"] == 2
    worker.close()
    receiver.close()
    assert sorted(a.status_code for a in WebhookAttempt.select()) == [400, 503]
    assert WebhookEndpoint.get().down_since is None  # a 400 is about the event, and the receiver is up
    assert sorted(r.event_id for r in receiver.received) == sorted(ids)


@pytest.mark.on_both
def test_a_delivery_claimed_by_a_worker_that_died_is_sent_after_its_lease(client, config, acme, receiver):
    endpoint(acme, receiver.url)
    post_calculation(client, acme, status=201)
    clock = Clock()
    dying = deliverer(config, clock=clock, lease_seconds=60)
    [claim] = dying.claim(10)  # the lease is taken, then the process "dies" before sending
    assert WebhookEvent.get().delivery_status == "delivering"

    other = deliverer(config, clock=clock, lease_seconds=60)
    clock.advance(59)
    assert sum(other.run_once().values()) == 0
    assert receiver.received == []
    clock.advance(2)
    assert other.run_once()["succeeded"] == 1
    assert [r.event_id for r in receiver.received] == [claim.event_id]

    # Should the first worker wake up after all, it cannot move the delivery on any more.
    assert dying.complete(claim, dying.send(claim)) == "lease-lost"
    assert WebhookEvent.get().delivery_status == "succeeded"
    dying.close()
    other.close()


@pytest.mark.on_both
def test_workers_running_at_once_never_send_the_same_attempt(config, acme, receiver):
    EVENTS = 80
    endpoint(acme, receiver.url)
    for number in range(EVENTS):
        webhook_events.record_event(acme.org.id, "test", "calculation.succeeded", json.dumps({"n": number}))
    workers = [deliverer(config, batch_size=2, threads=2) for _ in range(4)]
    start = threading.Barrier(len(workers))
    results: list[dict] = []

    def work(worker):
        start.wait()
        results.append(worker.run_once())

    threads = [threading.Thread(target=work, args=(worker,)) for worker in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for worker in workers:
        worker.close()

    sent = collections.Counter(r.event_id for r in receiver.received)
    assert len(sent) == EVENTS and set(sent.values()) == {1}
    assert sum(result["succeeded"] for result in results) == EVENTS
    assert WebhookAttempt.select().count() == EVENTS
    assert {e.delivery_status for e in WebhookEvent.select()} == {"succeeded"}


@pytest.mark.on_both
def test_410_disables_the_endpoint_and_later_deliveries_wait_for_a_new_one(client, config, acme):
    receiver = Receiver(statuses=[410])
    endpoint(acme, receiver.url)
    post_calculation(client, acme, "first", status=201)
    worker = deliverer(config)
    assert worker.run_once()["failed"] == 1
    stored = WebhookEndpoint.get()
    assert stored.status == "disabled" and "410" in stored.disabled_reason

    second = post_calculation(client, acme, "second", status=201, external_reference="s-2")
    skipped = WebhookEvent.get(WebhookEvent.calculation_id == second.json["id"])
    # Never to be delivered as things stand: no copy of the calculation's body is kept.
    assert skipped.delivery_status == "skipped" and skipped.stored_payload == ""
    with pytest.raises(webhook_endpoints.WebhookError, match="no enabled webhook endpoint"):
        webhook_events.redeliver(WebhookEvent.get(WebhookEvent.delivery_status == "failed").id, actor="test")

    endpoint(acme, receiver.url)  # the operator sets it again: enabled
    skipped = WebhookEvent.get(WebhookEvent.delivery_status == "skipped")
    webhook_events.redeliver(skipped.id, actor="test")
    assert worker.run_once()["succeeded"] == 1
    worker.close()
    receiver.close()
    assert [r.event_id for r in receiver.received][-1] == skipped.id
    # Rebuilt from the calculation: the body is still exactly the calculation as GET returns it.
    delivered = json.loads(receiver.received[-1].body)
    assert delivered["data"] == client.get(f"/v1/calculations/{second.json['id']}", headers=acme.headers()).json
    assert receiver.received[-1].body == WebhookEvent.envelope(
        skipped.id, "calculation.succeeded", skipped.created_at, "test",
        client.get(f"/v1/calculations/{second.json['id']}", headers=acme.headers()).body.decode()).encode()


@pytest.mark.on_both
def test_pending_deliveries_wait_while_the_endpoint_is_disabled(client, config, acme, receiver):
    endpoint(acme, receiver.url)
    post_calculation(client, acme, status=201)
    WebhookEndpoint.update(status="disabled").execute()
    worker = deliverer(config)
    assert sum(worker.run_once().values()) == 0
    assert WebhookEvent.get().delivery_status == "pending"
    endpoint(acme, receiver.url)
    assert worker.run_once()["succeeded"] == 1
    worker.close()


@pytest.mark.on_both
def test_a_redirect_is_a_failed_attempt_and_is_not_followed(client, config, acme):
    receiver = Receiver(statuses=[302])
    deliver_one_calculation(client, config, acme, receiver)
    assert [r.path for r in receiver.received] == ["/hooks"]
    [attempt] = attempts_of(WebhookEvent.get().id)
    assert attempt.status_code == 302 and attempt.response_excerpt == "answer 302"


@pytest.mark.on_both
def test_a_long_binary_answer_is_recorded_truncated_and_storable(client, config, acme):
    receiver = Receiver(statuses=[500], answer=b"\x00\xffbinary" + b"z" * 5000)
    deliver_one_calculation(client, config, acme, receiver)
    [attempt] = attempts_of(WebhookEvent.get().id)
    assert attempt.status_code == 500
    assert attempt.response_excerpt == "\ufffd\ufffdbinary" + "z" * 992


@pytest.mark.on_both
def test_a_live_endpoint_that_now_resolves_privately_is_not_contacted(client, config, secret, acme, receiver):
    live_key = make_key(acme.org, secret, environment="live")
    make_customer(acme.org, environment="live")
    # Stored directly, as if DNS had pointed to a public address when it was set.
    WebhookEndpoint.create(organization=acme.org, environment="live", url=receiver.url, secret="whsec_x")
    client.post_json("/v1/emissions/logistics", logistics_body(),
                     headers={"Authorization": f"Bearer {live_key}", "Idempotency-Key": "live-1"}, status=201)
    worker = deliverer(config)
    assert worker.run_once()["pending"] == 1
    worker.close()
    assert receiver.received == []
    [attempt] = attempts_of(WebhookEvent.get().id)
    assert attempt.status_code is None and attempt.error.startswith("refused:") and "loopback" in attempt.error

    allowed = deliverer(config.with_(webhook_allow_private_live=True), clock=lambda: utcnow() + dt.timedelta(
        seconds=10))
    assert allowed.run_once()["succeeded"] == 1
    allowed.close()


@pytest.mark.on_both
@pytest.mark.parametrize("trickle", ["all", "body"])
def test_an_answer_trickling_past_the_time_out_is_a_timed_out_attempt(client, config, acme, trickle):
    # Every byte comes well within the time-out, the whole answer long after it.
    receiver = Receiver(trickle=trickle, trickle_seconds=0.1, answer=b"z" * 30)
    endpoint(acme, receiver.url)
    post_calculation(client, acme, status=201)
    worker = deliverer(config.with_(webhook_timeout_seconds=0.5))
    assert worker.run_once() == {"succeeded": 0, "pending": 1, "failed": 0, "lease-lost": 0}
    worker.close()
    receiver.close()
    [attempt] = attempts_of(WebhookEvent.get().id)
    assert (attempt.status_code, attempt.error, attempt.response_excerpt) == (
        None, "timed out after 0.5 s", None)


def test_the_lease_outlasts_the_attempt_deadline_comfortably(config):
    for timeout in (0.5, 10.0, 45.0):
        worker = deliverer(config.with_(webhook_timeout_seconds=timeout))
        assert worker.lease >= dt.timedelta(seconds=max(60.0, 3 * timeout))
        worker.close()


@pytest.mark.on_both
def test_a_held_delivery_does_not_stall_deliveries_that_fall_due_meanwhile(config, acme, globex):
    hold = threading.Event()
    slow, fast = Receiver(hold=hold), Receiver()
    endpoint(acme, slow.url)
    endpoint(globex, fast.url)
    webhook_events.record_event(acme.org.id, "test", "calculation.succeeded", json.dumps({"n": 1}))
    worker = deliverer(config.with_(webhook_poll_seconds=0.05), threads=2)
    results: list[dict] = []
    running = threading.Thread(target=lambda: results.append(worker.run_once()))
    running.start()
    try:
        assert slow.wait_for(1)  # acme's receiver holds its answer
        later = webhook_events.record_event(globex.org.id, "test", "calculation.succeeded", json.dumps({"n": 2}))
        assert fast.wait_for(1)  # globex's event goes out on the free slot meanwhile
        assert [r.event_id for r in fast.received] == [later.id]
    finally:
        hold.set()
        running.join()
    worker.close()
    slow.close()
    fast.close()
    assert results == [{"succeeded": 2, "pending": 0, "failed": 0, "lease-lost": 0}]


@pytest.mark.on_both
def test_a_live_name_that_resolved_publicly_but_connects_to_loopback_gets_no_request(config, acme, receiver):
    # DNS rebinding: the check sees a public address, the connection then reaches loopback.
    url = f"http://localhost:{urlsplit(receiver.url).port}/hooks"
    WebhookEndpoint.create(organization=acme.org, environment="live", url=url, secret="whsec_x")
    webhook_events.record_event(acme.org.id, "live", "calculation.succeeded", json.dumps({"n": 1}))

    def public_dns(host, port, type=0):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port))]

    worker = deliverer(config, resolve=public_dns)
    assert worker.run_once()["pending"] == 1
    worker.close()
    assert receiver.received == []
    [attempt] = attempts_of(WebhookEvent.get().id)
    assert attempt.status_code is None and attempt.error.startswith("refused:")
    assert "reached a loopback address" in attempt.error and "127.0.0.1" not in attempt.error


@pytest.mark.on_both
def test_a_test_endpoint_that_now_resolves_to_loopback_is_refused_unless_the_operator_allows_it(config, acme, receiver):
    # Set while its name was public; the attempt resolves again, then checks the peer it reached.
    url = f"http://localhost:{urlsplit(receiver.url).port}/hooks"
    WebhookEndpoint.create(organization=acme.org, environment="test", url=url, secret="whsec_x")
    webhook_events.record_event(acme.org.id, "test", "calculation.succeeded", json.dumps({"n": 1}))
    strict = config.with_(webhook_allow_private_test=False)

    worker = deliverer(strict)  # the system's resolver: localhost is loopback
    assert worker.run_once()["pending"] == 1
    worker.close()
    worker = deliverer(strict, resolve=lambda host, port, type=0: [
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port))])  # rebinding: public, then loopback
    webhook_events.redeliver(WebhookEvent.get().id, actor="test")  # retried now: the endpoint is probed now
    assert worker.run_once()["pending"] == 1
    worker.close()
    assert receiver.received == []
    first, second = attempts_of(WebhookEvent.get().id)
    assert first.error == ("refused: the host localhost resolves to a loopback address; test endpoints must be "
                           "public unless the operator allows private ones (WEBHOOK_ALLOW_PRIVATE_TEST)")
    assert second.error.startswith("refused: the connection reached a loopback address; test endpoints")

    worker = deliverer(config)  # the allowance on: the same endpoint is delivered to
    webhook_events.redeliver(WebhookEvent.get().id, actor="test")
    assert worker.run_once()["succeeded"] == 1
    worker.close()
    assert len(receiver.received) == 1


@pytest.mark.on_both
def test_the_scheduler_delivers_what_was_committed_before_it_started(client, config, acme, receiver):
    endpoint(acme, receiver.url)
    created = post_calculation(client, acme, status=201)  # committed while nothing delivers: a "crash"
    running = scheduler.start(config)
    try:
        assert receiver.wait_for(1)
    finally:
        running.shutdown(wait=True)
    assert json.loads(receiver.received[0].body)["data"]["id"] == created.json["id"]
    assert WebhookEvent.get().delivery_status == "succeeded"


def deliver_process(config, *extra) -> subprocess.Popen:
    env = {**os.environ, "DATABASE_URL": config.database_url, "WEBHOOK_POLL_SECONDS": "0.05",
           "WEBHOOK_ALLOW_PRIVATE_TEST": str(config.webhook_allow_private_test).lower()}
    return subprocess.Popen([sys.executable, "-m", "emissions", "deliver", *extra], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.on_both
def test_a_worker_killed_mid_delivery_leaves_a_lease_and_the_delivery_is_sent_again(client, config, acme):
    hold = threading.Event()
    receiver = Receiver(hold=hold)
    endpoint(acme, receiver.url)
    post_calculation(client, acme, status=201)
    process = deliver_process(config)
    try:
        assert receiver.wait_for(1)  # the request is in flight: the receiver has not answered
        process.kill()
        process.wait(10)
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()
    hold.set()
    event = WebhookEvent.get()
    assert event.delivery_status == "delivering" and event.lock_token is not None
    assert attempts_of(event.id) == []

    now_worker = deliverer(config)
    assert sum(now_worker.run_once().values()) == 0  # the lease still holds
    now_worker.close()
    later = deliverer(config, clock=lambda: utcnow() + dt.timedelta(seconds=61))
    assert later.run_once()["succeeded"] == 1
    later.close()
    receiver.close()
    assert [r.event_id for r in receiver.received] == [event.id, event.id]
    assert WebhookEvent.get().delivery_status == "succeeded"


def test_deliver_command_delivers_until_sigterm(client, config, acme, receiver):
    endpoint(acme, receiver.url)
    post_calculation(client, acme, status=201)
    process = deliver_process(config)
    try:
        assert receiver.wait_for(1)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert out.splitlines()[-1] == "Stopped."
    assert WebhookEvent.get().delivery_status == "succeeded"


@pytest.mark.on_both
def test_deliver_once_and_the_deliveries_listing(client, acme, receiver, ok, monkeypatch):
    """In-process: the command as a process is the test above's."""
    endpoint(acme, receiver.url)
    post_calculation(client, acme, status=201)
    monkeypatch.setenv("WEBHOOK_ALLOW_PRIVATE_TEST", "true")
    assert ok("deliver", "--once") == {"succeeded": 1, "pending": 0, "failed": 0, "lease-lost": 0}

    [row] = ok("webhook", "deliveries", "--org", "acme")["deliveries"]
    event = WebhookEvent.get()
    assert {key: row[key] for key in ("event_id", "type", "organization", "environment", "delivery_status",
                                      "attempt_count")} == {
        "event_id": event.id, "type": "calculation.succeeded", "organization": "acme", "environment": "test",
        "delivery_status": "succeeded", "attempt_count": 1}
    [attempt] = row["attempts"]
    assert (attempt["number"], attempt["status_code"], attempt["url"]) == (1, 200, receiver.url)


def test_an_outage_logs_its_first_failure_whole_then_a_line_a_minute_then_the_recovery(config, caplog, monkeypatch):
    """A run comes every WEBHOOK_POLL_SECONDS: a database outage must not write a traceback each time."""
    sender = deliverer(config)
    now = [1000.0]
    sender.failures.clock = lambda: now[0]
    down = [True]

    def run_once():
        if down[0]:
            raise webhook_delivery.pw.OperationalError("could not connect to server\nsecond line")
        return {}

    monkeypatch.setattr(sender, "run_once", run_once)
    with caplog.at_level(logging.INFO, logger="emissions.webhooks"):
        for _ in range(30):  # 30 runs within the first minute
            sender.tick()
            now[0] += 1.0
        now[0] += 60.0
        sender.tick()  # a minute on: one line, without a traceback
        down[0] = False
        sender.tick()
    records = [record for record in caplog.records if record.name == "emissions.webhooks"]
    assert [(record.levelname, record.getMessage()) for record in records] == [
        ("ERROR", "webhook delivery run failing"),
        ("ERROR", "webhook delivery run still failing"),
        ("WARNING", "webhook delivery run succeeding again")]
    assert records[0].exc_info and not records[1].exc_info
    assert records[1].fields == {"message": "webhook delivery run still failing", "failures": 31,
                                 "error": "could not connect to server"}
    assert records[2].fields == {"message": "webhook delivery run succeeding again", "failures": 31}
    sender.close()


# --- every way the transport can fail, through the same path -----------------------------------

@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    """Self-signed certificates: one for this machine's loopback address, one for another host name."""
    directory = tmp_path_factory.mktemp("certificates")
    return {"loopback": self_signed_certificate(directory),
            "elsewhere": self_signed_certificate(directory, "DNS:elsewhere.example"),
            "expired": expired_certificate(directory)}


def transport_peer(kind: str, certificates, stack: contextlib.ExitStack):
    """A peer on loopback failing the attempt in one way; the URL a delivery goes to."""
    if kind == "refused":
        return stack.enter_context(contextlib.closing(Receiver(listening=False))).url
    if kind in ("reset", "garbage"):
        return stack.enter_context(contextlib.closing(RawPeer(kind))).url
    if kind == "timeout":
        hold = threading.Event()
        stack.callback(hold.set)
        return stack.enter_context(contextlib.closing(Receiver(hold=hold))).url
    if kind == "dns":
        return "http://receiver.invalid/hooks"  # the reserved TLD never resolves
    if kind == "self-signed":
        return stack.enter_context(contextlib.closing(Receiver(tls=certificates["loopback"]))).url
    if kind == "wrong-host":
        return stack.enter_context(contextlib.closing(Receiver(tls=certificates["elsewhere"]))).url
    if kind == "plain-http":  # https:// to a receiver speaking plain HTTP: the handshake fails
        return stack.enter_context(contextlib.closing(Receiver())).url.replace("http://", "https://")
    if kind == "redirect":
        return stack.enter_context(contextlib.closing(Receiver(statuses=[302]))).url
    raise AssertionError(kind)


TRANSPORT_FAILURES = {
    "refused": "connection refused",
    "reset": "connection reset",
    "timeout": "timed out after 0.5 s",
    "dns": "host not found",
    "self-signed": "TLS certificate verify failed (self-signed certificate)",
    "wrong-host": "TLS certificate verify failed (self-signed certificate)",
    "plain-http": "TLS handshake failed",
    "garbage": "the answer is not HTTP",
    "redirect": "HTTP 302",
}


@pytest.mark.on_both
@pytest.mark.parametrize("kind", sorted(TRANSPORT_FAILURES))
def test_every_transport_failure_is_a_recorded_attempt_and_a_down_endpoint(config, acme, certificates, kind):
    """Issue 32: a failure the transport raises, however it wraps its cause, is a recorded attempt
    naming it; no answer from the receiver marks the endpoint down, with its next probe."""
    with contextlib.ExitStack() as stack:
        endpoint(acme, transport_peer(kind, certificates, stack))
        event = webhook_events.record_event(acme.org.id, "test", "calculation.succeeded", json.dumps({"n": 1}))
        clock = Clock()  # from now on: the event is due
        worker = deliverer(config.with_(webhook_timeout_seconds=0.5), clock=clock)
        stack.callback(worker.close)
        assert worker.run_once() == {"succeeded": 0, "pending": 1, "failed": 0, "lease-lost": 0}
    [attempt] = attempts_of(event.id)
    assert attempt.error == TRANSPORT_FAILURES[kind]
    assert WebhookEvent.get_by_id(event.id).delivery_status == "pending"
    stored = WebhookEndpoint.get()
    if kind == "redirect":  # an answer: the receiver is up
        assert (attempt.status_code, stored.down_since) == (302, None)
    else:
        assert attempt.status_code is None
        assert (stored.down_since, stored.down_until) == (clock.now, clock.now + dt.timedelta(seconds=5))


@pytest.mark.parametrize("certificate, error", [
    ("elsewhere", "TLS certificate verify failed (IP address mismatch, certificate is not valid for '127.0.0.1')"),
    ("expired", "TLS certificate verify failed (certificate has expired)"),
], ids=["another host", "expired"])
def test_a_certificate_whose_issuer_is_trusted_names_what_else_is_wrong(config, acme, certificates, certificate,
                                                                        error):
    with contextlib.closing(Receiver(tls=certificates[certificate])) as receiver:
        endpoint(acme, receiver.url)
        event = webhook_events.record_event(acme.org.id, "test", "calculation.succeeded", json.dumps({"n": 1}))
        worker = deliverer(config.with_(webhook_ca_bundle=str(certificates[certificate].cert_path)))
        assert worker.run_once()["pending"] == 1
        worker.close()
    [attempt] = attempts_of(event.id)
    assert attempt.error == error
    assert WebhookEndpoint.get().down_since is not None


def test_a_private_ca_in_webhook_ca_bundle_makes_its_receiver_trusted(config, acme, certificates):
    """Issue 32: without the bundle the self-signed receiver fails, recorded with its cause; with it, it succeeds."""
    with contextlib.closing(Receiver(tls=certificates["loopback"])) as receiver:
        endpoint(acme, receiver.url)
        event = webhook_events.record_event(acme.org.id, "test", "calculation.succeeded", json.dumps({"n": 1}))
        untrusting = deliverer(config)
        assert untrusting.run_once()["pending"] == 1
        untrusting.close()
        WebhookEvent.update(next_attempt_at=utcnow()).where(WebhookEvent.id == event.id).execute()
        WebhookEndpoint.update(down_since=None, down_until=None).execute()
        trusting = deliverer(config.with_(webhook_ca_bundle=str(certificates["loopback"].cert_path)))
        assert trusting.run_once()["succeeded"] == 1
        trusting.close()
    assert [(attempt.status_code, attempt.error) for attempt in attempts_of(event.id)] == [
        (None, "TLS certificate verify failed (self-signed certificate)"), (200, None)]
    assert [received.event_id for received in receiver.received] == [event.id]


def test_the_ca_bundle_adds_to_the_default_trust(certificates):
    context = webhook_transport.trust_context(str(certificates["loopback"].cert_path))
    bundled = {certificate["serialNumber"] for certificate in context.get_ca_certs()}
    defaults = ssl.create_default_context(cafile=requests.certs.where()).get_ca_certs()
    assert len(defaults) > 100 and {certificate["serialNumber"] for certificate in defaults} <= bundled
    assert ssl.PEM_cert_to_DER_cert(certificates["loopback"].cert_path.read_text()) in context.get_ca_certs(True)
    assert webhook_transport.trust_context(None) is None  # unset: requests' own default


@pytest.mark.parametrize("content, message", [
    (None, "WEBHOOK_CA_BUNDLE names .* which does not exist"),
    ("not a certificate\n", "WEBHOOK_CA_BUNDLE must be a PEM file of CA certificates; .* is not"),
    ("-----BEGIN CERTIFICATE-----\nbroken\n-----END CERTIFICATE-----\n", "WEBHOOK_CA_BUNDLE must be a PEM file"),
])
def test_a_ca_bundle_that_is_missing_or_not_pem_stops_the_start(tmp_path, monkeypatch, content, message):
    bundle = tmp_path / "ca.pem"
    if content is not None:
        bundle.write_text(content)
    monkeypatch.setenv("WEBHOOK_CA_BUNDLE", str(bundle))
    with pytest.raises(ConfigError, match=message):
        Config.from_env()
    result = subprocess.run([sys.executable, "-m", "emissions", "deliver", "--once"], cwd=tmp_path,
                            env={**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and re.search(message, result.stderr) and "Traceback" not in result.stderr


def test_a_readable_ca_bundle_is_taken(tmp_path, monkeypatch, certificates):
    monkeypatch.setenv("WEBHOOK_CA_BUNDLE", str(certificates["loopback"].cert_path))
    assert Config.from_env().webhook_ca_bundle == str(certificates["loopback"].cert_path)


def test_failure_phrase_reads_an_ssl_error_whose_reason_is_a_string():
    """ssl.SSLError.reason is text ("CERTIFICATE_VERIFY_FAILED"), not an exception to follow."""
    verify = ssl.SSLCertVerificationError(1, "certificate verify failed")
    verify.reason, verify.verify_message = "CERTIFICATE_VERIFY_FAILED", "certificate has expired"
    wrapped = requests.exceptions.SSLError(urllib3.exceptions.MaxRetryError(
        None, "https://x/", urllib3.exceptions.SSLError(verify)))
    assert webhook_transport.failure_phrase(wrapped, 10) == "TLS certificate verify failed (certificate has expired)"


@pytest.mark.on_both
def test_an_unexpected_fault_in_one_attempt_is_recorded_and_the_round_goes_on(monkeypatch, config, acme, globex,
                                                                              receiver):
    """No exception from one attempt may end the round: the others are recorded, that one too."""
    endpoint(acme, receiver.url)
    endpoint(globex, receiver.url.replace("/hooks", "/globex"))
    broken = webhook_events.record_event(acme.org.id, "test", "calculation.succeeded", json.dumps({"n": 1}))
    fine = webhook_events.record_event(globex.org.id, "test", "calculation.succeeded", json.dumps({"n": 2}))
    signed = webhook_delivery.signed_headers

    def faulty(secret, event_id, *args, **kwargs):
        if event_id == broken.id:
            raise KeyError("a fault of the service's own")
        return signed(secret, event_id, *args, **kwargs)

    monkeypatch.setattr(webhook_delivery, "signed_headers", faulty)
    worker = deliverer(config)
    assert worker.run_once() == {"succeeded": 1, "pending": 1, "failed": 0, "lease-lost": 0}
    worker.close()
    assert [attempt.error for attempt in attempts_of(broken.id)] == ["internal error (KeyError)"]
    assert [attempt.status_code for attempt in attempts_of(fine.id)] == [200]


# --- Standard Webhooks, per endpoint (issue 36) ------------------------------------------------

def test_the_standard_signature_matches_the_specifications_example():
    assert webhook_signing.standard_sign("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek",
                                         "1614265330", b'{"test": 2432232314}') == (
        "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")


@pytest.mark.on_both
def test_a_standard_webhooks_endpoint_verifies_with_the_standardwebhooks_package_through_a_rotation(
        config, acme, receiver):
    """Real deliveries to a real receiver, checked by the PyPI package a receiver would use."""
    _, old = webhook_endpoints.set_endpoint(acme.org.id, "test", receiver.url, actor="test", allow_private_test=True,
                                            signature="standard")
    assert re.fullmatch(r"whsec_[A-Za-z0-9+/]{43}=", old)
    deliver_event(config, acme)
    before = receiver.received[-1]
    assert standardwebhooks.Webhook(old).verify(before.body, before.headers) == json.loads(before.body)
    assert before.headers["webhook-id"] == json.loads(before.body)["id"]
    assert not any(name.lower().startswith("x-service-webhook") for name in before.headers)

    _, new = webhook_endpoints.rotate_secret(acme.org.id, "test", actor="test")
    assert new.startswith("whsec_") and new != old
    deliver_event(config, acme)
    during = receiver.received[-1]
    assert len(during.headers["webhook-signature"].split(" ")) == 2
    for secret in (old, new):  # the receiver before and after deploying the new secret
        assert standardwebhooks.Webhook(secret).verify(during.body, during.headers)["id"] == during.headers["webhook-id"]
    with pytest.raises(standardwebhooks.WebhookVerificationError):
        standardwebhooks.Webhook(webhook_endpoints.new_secret("standard")).verify(during.body, during.headers)

    webhook_endpoints.end_overlap(acme.org.id, "test", actor="test")
    deliver_event(config, acme)
    after = receiver.received[-1]
    assert standardwebhooks.Webhook(new).verify(after.body, after.headers)
    with pytest.raises(standardwebhooks.WebhookVerificationError):
        standardwebhooks.Webhook(old).verify(after.body, after.headers)


@pytest.mark.on_both
def test_the_signature_scheme_is_kept_when_the_url_changes_and_the_service_scheme_is_the_default(config, acme,
                                                                                                receiver):
    webhook_endpoints.set_endpoint(acme.org.id, "test", receiver.url, actor="user:ops@acme.example",
                                   allow_private_test=True, signature="standard")
    _, secret = webhook_endpoints.set_endpoint(acme.org.id, "test", receiver.url + "?v=2", actor="test",
                                               allow_private_test=True)
    stored = webhook_endpoints.endpoint_for(acme.org.id, "test")
    assert (stored.signature, stored.to_dict()["signature"]) == ("standard", "standard")
    assert json.loads(AuditEvent.get(AuditEvent.actor == "user:ops@acme.example").details) == {"signature": "standard"}
    deliver_event(config, acme)
    assert standardwebhooks.Webhook(secret).verify(receiver.received[-1].body, receiver.received[-1].headers)

    _, secret = webhook_endpoints.set_endpoint(acme.org.id, "test", receiver.url, actor="test",
                                               allow_private_test=True, signature="service")
    deliver_event(config, acme)
    last = receiver.received[-1]
    assert last.headers["X-Service-Webhook-Signature"] == by_hand(secret, last) and "webhook-signature" not in last.headers
    with pytest.raises(webhook_endpoints.WebhookError, match="the signature must be service or standard"):
        webhook_endpoints.set_endpoint(acme.org.id, "test", receiver.url, actor="test", allow_private_test=True,
                                       signature="svix")
