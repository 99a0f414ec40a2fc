"""Webhook events and their outbox rows: built with each outcome, listed, queued again and pruned.

An event row is written in the outcome's own transaction (new_event, then store.Write.event); the
delivery worker (webhooks.delivery) sends it.
"""
from __future__ import annotations

import datetime as dt
from typing import NamedTuple

import peewee as pw

from .. import audit
from .. import jsoncodec
from .. import store
from ..exports import json as views
from ..db import db
from ..models import (ENVIRONMENTS, Factor, Organization, WebhookAttempt, WebhookEndpoint, WebhookEvent, isoformat,
                      new_id, utcnow)
from .endpoints import WebhookError, endpoint_for, endpoint_join


class NewEvent(NamedTuple):
    """An event ready to be written: new_event() builds it, store.Write.event() (or store.insert_event()) writes it."""

    id: str
    organization_id: int
    environment: str
    type: str
    payload: str
    created_at: dt.datetime
    calculation_id: str | None = None


def new_event(organization_id: int, environment: str, event_type: str, data_json: str,
              created_at: dt.datetime | None = None, calculation_id: str | None = None) -> NewEvent:
    """The event and its exact body, built before the outcome's transaction so that it stays short.

    `data_json` is the event's data as JSON text; `created_at` is the outcome's own moment when it
    has one (a calculation's created_at). `calculation_id` names the calculation whose stored body
    is exactly `data_json`: a skipped event then keeps no copy of it (WebhookEvent.payload).
    """
    event_id = new_id()
    created_at = created_at or utcnow()
    payload = WebhookEvent.envelope(event_id, event_type, created_at, environment, data_json)
    return NewEvent(event_id, organization_id, environment, event_type, payload, created_at, calculation_id)


def record_event(organization_id: int, environment: str, event_type: str, data_json: str) -> WebhookEvent:
    """new_event and store.insert_event in one call, returning the row (for tools and tests;
    a calculation adds its event to its own store.Write)."""
    event = new_event(organization_id, environment, event_type, data_json)
    store.insert_event(event)
    return WebhookEvent.get_by_id(event.id)


def recent_deliveries(organization_id: int | None = None, environment: str | None = None,
                      limit: int = 20) -> list[dict]:
    """The most recent events (newest first) with their delivery state and attempts.

    Read newest first through webhook_event_created, or with an organization through
    webhook_event_organization_created once per environment: `limit` rows, however long the history.
    """
    def newest(condition) -> list[WebhookEvent]:
        return list(WebhookEvent.select(WebhookEvent, Organization.slug).join(Organization)
                    .where(condition).order_by(WebhookEvent.created_at.desc()).limit(limit))

    if organization_id is None:
        events = newest(True if environment is None else WebhookEvent.environment == environment)
    else:
        events = [event for name in ((environment,) if environment else ENVIRONMENTS)
                  for event in newest((WebhookEvent.organization == organization_id)
                                      & (WebhookEvent.environment == name))]
    events = sorted(events, key=lambda event: (event.created_at, event.id), reverse=True)[:limit]
    attempts: dict[str, list[WebhookAttempt]] = {event.id: [] for event in events}
    if events:
        for attempt in (WebhookAttempt.select()
                        .where(WebhookAttempt.event.in_(list(attempts)))
                        .order_by(WebhookAttempt.number)):
            attempts[attempt.event_id].append(attempt)
    return [event.to_dict([attempt.to_dict() for attempt in attempts[event.id]]) for event in events]


FINISHED = ("succeeded", "failed", "skipped")
REDELIVERABLE = ("pending", *FINISHED)  # not "delivering": an attempt is in flight


def _requeue(now: dt.datetime) -> dict:
    """The changes that make an event due now: a pending one keeps its attempts, a finished one starts again."""
    restart = WebhookEvent.delivery_status != "pending"
    return {WebhookEvent.delivery_status: "pending", WebhookEvent.next_attempt_at: now,
            WebhookEvent.attempt_count: pw.Case(None, [(restart, 0)], WebhookEvent.attempt_count),
            WebhookEvent.delivered_at: None, WebhookEvent.lock_token: None, WebhookEvent.locked_until: None}


def redeliver(event_id: str, *, actor: str) -> WebhookEvent:
    """Queue an event for delivery now, with its audit event: a finished one (succeeded, failed or
    skipped) for a new round of attempts, a pending one without waiting for its next retry."""
    event = WebhookEvent.get_or_none(WebhookEvent.id == event_id)
    if event is None:
        raise WebhookError(f"no webhook event with id {event_id}")
    if event.delivery_status not in REDELIVERABLE:
        raise WebhookError(f"event {event_id} is being delivered right now")
    endpoint = endpoint_for(event.organization_id, event.environment)
    if endpoint is None or endpoint.status != "enabled":
        raise WebhookError(f"no enabled webhook endpoint for the event's organization ({event.environment})")
    now = utcnow()
    with db.atomic():
        updated = (WebhookEvent.update(_requeue(now))
                   .where((WebhookEvent.id == event_id) & (WebhookEvent.delivery_status == event.delivery_status))
                   .execute())
        if not updated:
            raise WebhookError(f"event {event_id} changed meanwhile; try again")
        audit.record("event.redelivered", event_id, actor=actor, organization=event.organization_id,
                     environment=event.environment, details={"delivery_status": event.delivery_status})
        # Asked for now: an endpoint known down is probed now instead of at its next probe time.
        (WebhookEndpoint.update(down_until=now)
         .where((WebhookEndpoint.id == endpoint.id) & WebhookEndpoint.down_since.is_null(False))
         .execute())
    return WebhookEvent.get_by_id(event_id)


# What a test event's calculation is made of: test data that no receiver could take for a booking.
TEST_PAYLOAD = {"external_reference": "test-event", "mode": "ROAD", "origin": {"label": "Test origin"},
                "destination": {"label": "Test destination"}, "cargo": {"value": 1}, "distance": {"value": 100},
                "business_context": "upstream"}
TEST_FACTOR = Factor(reference="test-factor", version=1, name="Test factor", source="Workspace test event",
                     region=None, mode="ROAD", valid_from=None, valid_to=None)


def send_test_event(organization_id: int, environment: str, *, actor: str) -> WebhookEvent:
    """Queue a calculation.succeeded event made of test data, marked `"test_event": true` in its
    data, for the test endpoint (never live: a live receiver would book it), with its audit event.
    While the endpoint is down, the next poll probes it with its oldest due delivery; the test event
    follows once it answers."""
    if environment != "test":
        raise WebhookError("test events are sent in the test environment only")
    endpoint = endpoint_for(organization_id, environment)
    if endpoint is None or endpoint.status != "enabled":
        raise WebhookError("no enabled test endpoint to send to")
    now = utcnow()
    payload = {**TEST_PAYLOAD, "activity_date": now.date().isoformat()}
    data = jsoncodec.dumps({**views.calculation(new_id(), "test", payload, "test-customer", 100, 0, TEST_FACTOR, now),
                            "test_event": True})
    with db.atomic():
        event = record_event(organization_id, environment, "calculation.succeeded", data)
        audit.record("event.test_sent", event.id, actor=actor, organization=organization_id, environment=environment)
        # Asked for now, like redeliver: an endpoint known down is probed at the next poll.
        (WebhookEndpoint.update(down_until=now)
         .where((WebhookEndpoint.id == endpoint.id) & WebhookEndpoint.down_since.is_null(False))
         .execute())
    return event


def redeliver_since(since: dt.datetime, statuses: tuple[str, ...] = ("failed", "skipped"),
                    organization_id: int | None = None, environment: str | None = None, *, actor: str) -> int:
    """Queue every event created at or after `since` with one of `statuses` whose endpoint is enabled,
    with one audit event saying what was asked and how many were queued; return how many."""
    unknown = sorted(set(statuses) - set(REDELIVERABLE))
    if unknown:
        raise WebhookError(f"cannot redeliver events that are {', '.join(unknown)}; "
                           f"choose from {', '.join(REDELIVERABLE)}")
    # Endpoint by endpoint through webhook_event_organization_created: the events read are those
    # created since `since` of organizations with an enabled endpoint, never every organization's
    # events of that time (most of them skipped for want of an endpoint). The EXISTS repeats the
    # check in the statement itself, for an endpoint disabled meanwhile.
    enabled = (WebhookEndpoint.select(WebhookEndpoint.id)
               .where(endpoint_join() & (WebhookEndpoint.status == "enabled")))
    endpoints = WebhookEndpoint.select(WebhookEndpoint.organization, WebhookEndpoint.environment).where(
        WebhookEndpoint.status == "enabled")
    if organization_id is not None:
        endpoints = endpoints.where(WebhookEndpoint.organization == organization_id)
    if environment is not None:
        endpoints = endpoints.where(WebhookEndpoint.environment == environment)
    now, queued = utcnow(), 0
    with db.atomic():
        for endpoint_organization, endpoint_environment in endpoints.tuples():
            queued += WebhookEvent.update(_requeue(now)).where(
                (WebhookEvent.organization == endpoint_organization)
                & (WebhookEvent.environment == endpoint_environment) & (WebhookEvent.created_at >= since)
                & WebhookEvent.delivery_status.in_(list(statuses)) & pw.fn.EXISTS(enabled)).execute()
        audit.record("event.redelivered_since", f"since {isoformat(since)}", actor=actor,
                     organization=organization_id, environment=environment,
                     details={"statuses": list(statuses), "queued": queued})
    return queued


def skipped_since(organization_id: int, environment: str, since: dt.datetime) -> int:
    """How many events of the endpoint's organization and environment were skipped since `since`."""
    return (WebhookEvent.select()
            .where((WebhookEvent.organization == organization_id) & (WebhookEvent.environment == environment)
                   & (WebhookEvent.delivery_status == "skipped") & (WebhookEvent.created_at >= since))
            .count())


PRUNE_BATCH = 1000


def prune(older_than: dt.timedelta, now: dt.datetime | None = None, *, actor: str) -> dict[str, int]:
    """Delete finished events (and their attempts) created more than `older_than` ago; never a calculation.

    In batches, each its own short transaction, so that writers never wait long behind it; the last
    one records the audit event with what was deleted.
    """
    cutoff = (now or utcnow()) - older_than
    deleted = {"events": 0, "attempts": 0}
    while True:
        with db.atomic():
            batch = [row.id for row in WebhookEvent.select(WebhookEvent.id)
                     .where((WebhookEvent.created_at < cutoff) & WebhookEvent.delivery_status.in_(list(FINISHED)))
                     .limit(PRUNE_BATCH)]
            if not batch:
                days = older_than / dt.timedelta(days=1)
                audit.record("event.pruned", f"before {isoformat(cutoff)}", actor=actor,
                             details={"older_than_days": int(days) if days.is_integer() else days, **deleted})
                return deleted
            deleted["attempts"] += WebhookAttempt.delete().where(WebhookAttempt.event.in_(batch)).execute()
            deleted["events"] += WebhookEvent.delete().where(WebhookEvent.id.in_(batch)).execute()
