"""The outbox's reads go through indexes: each statement of `webhook deliveries`, `redeliver --since`,
`prune`, the delivery claim and the webhooks page's event queries is planned by the database, and
none reads webhook_event or calculation whole or sorts the whole set (issue 24)."""
from __future__ import annotations

import datetime as dt
import json
import re

import peewee as pw
import pytest

from emissions import models
from emissions.webhooks import delivery as webhook_delivery
from emissions.webhooks import endpoints as webhook_endpoints
from emissions.webhooks import events as webhook_events
from emissions.workspace import insights
from conftest import make_org, post_calculation, record_statements
from helpers import plan

pytestmark = pytest.mark.on_both


def statements_of(monkeypatch, action) -> list[tuple[str, tuple]]:
    """The statements (and parameters) `action()` sends."""
    log: list = []
    original = record_statements(monkeypatch, lambda statement, params: log.append((statement, params)))
    try:
        action()
    finally:
        monkeypatch.setattr(models.db.obj, "cursor", original)
    return log


def assert_reads_no_history(statement: str, params: tuple) -> None:
    """No full scan of a table, no sort of a whole set. On SQLite a SCAN through an index is an
    ordered walk, allowed only under a LIMIT (it stops there); a sort is allowed only of the rows of
    a list of ids (a page's events) or of the tail of an ORDER BY (ties of its first column)."""
    text = plan(statement, params)
    if isinstance(models.db.obj, pw.PostgresqlDatabase):
        assert "Seq Scan on webhook_event" not in text and "Seq Scan on calculation" not in text, (statement, text)
        return
    for line in text.splitlines():
        scan = re.match(r"SCAN (\S+)(.*)", line)
        if scan and scan.group(1) != "CONSTANT":
            assert "USING" in scan.group(2) and " LIMIT " in statement, (statement, text)
        by_ids = re.search(r'"(event_id|id)" IN \(\?', statement)
        assert "USE TEMP B-TREE FOR ORDER BY" not in line or by_ids, (statement, text)
        assert "USE TEMP B-TREE FOR GROUP BY" not in line or "created_at>" in text, (statement, text)


def reads(sent) -> list[tuple[str, tuple]]:
    return [(statement, params) for statement, params in sent
            if statement.lstrip().upper().startswith(("SELECT", "UPDATE", "DELETE"))
            and ('"webhook_event"' in statement or '"calculation"' in statement
                 or '"webhook_attempt"' in statement)]


@pytest.fixture
def history(client, acme):
    """Events of every kind: skipped, pending, delivered with attempts, of two organizations."""
    other = make_org("other")
    for number in range(30):
        webhook_events.record_event(other.id, "test", "calculation.succeeded", json.dumps({"n": number}))
    created = [post_calculation(client, acme, f"skipped-{n}", status=201).json for n in range(3)]
    webhook_endpoints.set_endpoint(acme.org.id, "test", "http://127.0.0.1:9/hook", actor="test", allow_private_test=True)
    created += [post_calculation(client, acme, f"pending-{n}", status=201).json for n in range(3)]
    event = models.WebhookEvent.get(models.WebhookEvent.calculation_id == created[-1]["id"])
    models.WebhookAttempt.create(event=event.id, number=1, url="http://127.0.0.1:9/hook", status_code=500)
    models.WebhookEvent.update(delivery_status="failed").where(models.WebhookEvent.id == event.id).execute()
    return created


def test_webhook_deliveries_reads_only_the_newest_events(monkeypatch, history, acme):
    for organization_id, environment in ((None, None), (None, "test"), (acme.org.id, None), (acme.org.id, "test")):
        sent = statements_of(monkeypatch, lambda: webhook_events.recent_deliveries(organization_id, environment, 5))
        assert reads(sent)
        for statement in reads(sent):
            assert_reads_no_history(*statement)
    newest = webhook_events.recent_deliveries(acme.org.id, None, 4)
    assert [row["created_at"] for row in newest] == sorted((row["created_at"] for row in newest), reverse=True)
    assert len(newest) == 4 and all(row["organization"] == "acme" for row in newest)


def test_redeliver_since_and_prune_read_only_their_range(monkeypatch, history, acme):
    since = models.utcnow() - dt.timedelta(hours=1)
    for organization_id, environment in ((None, None), (acme.org.id, None), (acme.org.id, "test")):
        sent = statements_of(monkeypatch, lambda: webhook_events.redeliver_since(
            since, ("failed", "skipped"), organization_id, environment, actor="test"))
        for statement in reads(sent):
            assert_reads_no_history(*statement)
    sent = statements_of(monkeypatch, lambda: webhook_events.prune(dt.timedelta(days=30), actor="test"))  # nothing to delete
    assert reads(sent)
    for statement in reads(sent):
        assert_reads_no_history(*statement)
    deleted = statements_of(monkeypatch, lambda: webhook_events.prune(dt.timedelta(days=-1), actor="test"))  # everything finished
    for statement in reads(deleted):
        assert_reads_no_history(*statement)


def test_redeliver_since_reads_only_the_events_of_enabled_endpoints(monkeypatch, history, acme):
    """The other organization's skipped events (it has no endpoint) are never read: each UPDATE is
    of one enabled endpoint's organization and environment, through its created_at range."""
    since = models.utcnow() - dt.timedelta(hours=1)
    for organization_id, environment in ((None, None), (acme.org.id, None), (acme.org.id, "test")):
        sent = statements_of(monkeypatch, lambda: webhook_events.redeliver_since(
            since, ("failed", "skipped"), organization_id, environment, actor="test"))
        updates = [(statement, params) for statement, params in reads(sent) if statement.startswith("UPDATE")]
        assert len(updates) == 1, sent
        [(statement, params)] = updates
        assert re.search(r'"webhook_event"."organization_id" = (\?|%s)', statement) and acme.org.id in params, statement
        if not isinstance(models.db.obj, pw.PostgresqlDatabase):
            assert "webhook_event_organization_created" in plan(statement, params), plan(statement, params)
    models.WebhookEndpoint.update(status="disabled").execute()
    sent = statements_of(monkeypatch, lambda: webhook_events.redeliver_since(since, ("failed", "skipped"), actor="test"))
    assert not reads(sent), sent


def test_the_webhooks_page_reads_only_what_it_shows(monkeypatch, history, acme):
    since = models.utcnow() - dt.timedelta(days=7)
    row = models.Calculation.get_by_id(history[0]["id"])
    for action in (lambda: insights.recent_events(acme.org.id, "test", 25),
                   lambda: insights.endpoint_health(acme.org.id, "test", since),
                   lambda: models.WebhookAttempt.last_of(acme.org.id, "test"),
                   lambda: insights.events_of(acme.org.id, "test", row)):
        sent = statements_of(monkeypatch, action)
        assert reads(sent)
        for statement in reads(sent):
            assert_reads_no_history(*statement)
    assert models.WebhookAttempt.last_of(acme.org.id, "test").status_code == 500
    assert models.WebhookAttempt.last_of(acme.org.id, "live") is None
    # A skipped event keeps no body of its own, and the calculation's page still finds it.
    [event] = insights.events_of(acme.org.id, "test", row)
    assert event.delivery_status == "skipped" and event.stored_payload == ""
    assert json.loads(event.payload)["data"] == history[0]


def test_recording_a_round_and_probing_a_down_endpoint_read_through_indexes(monkeypatch, config, acme):
    for number in range(40):  # before the endpoint: skipped, never read by the claim
        webhook_events.record_event(acme.org.id, "test", "calculation.succeeded", json.dumps({"n": number}))
    webhook_endpoints.set_endpoint(acme.org.id, "test", "http://127.0.0.1:9/hook", actor="test", allow_private_test=True)
    for number in range(20):
        webhook_events.record_event(acme.org.id, "test", "calculation.succeeded", json.dumps({"n": number}))
    now = [models.utcnow()]
    worker = webhook_delivery.Deliverer(config, clock=lambda: now[0], threads=4)
    try:
        sent = statements_of(monkeypatch, worker.run_once)  # a round of four refused: the endpoint is down
        now[0] += dt.timedelta(seconds=5)
        sent += statements_of(monkeypatch, worker.run_once)  # its probe
    finally:
        worker.close()
    assert models.WebhookAttempt.select().count() == 5
    assert reads(sent)
    for statement in reads(sent):
        assert_reads_no_history(*statement)
    marks = [(s, p) for s, p in sent if s.lstrip().startswith('UPDATE "webhook_endpoint"')]
    assert len(marks) == 2  # down after the round, down for longer after the probe
    for statement, params in marks:
        text = plan(statement, params)
        if isinstance(models.db.obj, pw.PostgresqlDatabase):
            assert "Seq Scan" not in text, text
        else:
            assert "SEARCH webhook_endpoint USING INDEX" in text, text
