"""Delivering webhook events: a Deliverer claims due rows with one conditional UPDATE that sets a
lock token and a lease, posts them signed, and records the attempt; a row whose lease ran out (its
worker died) is claimed again, so delivery is at least once.

Outbound HTTP goes through the guarded connections of webhooks/transport.py: each attempt has a
wall-clock deadline, and an endpoint's peer must be a public address however DNS answers at connect
time (unless the operator allows private ones for its environment).

A receiver that is down is not hammered: when every attempt of a round to an endpoint fails
without an answer from its application (no connection, a time-out, a 5xx or 429), the endpoint is
marked down until a probe time that grows with the outage (ENDPOINT_PROBE_MAX_SECONDS at most).
Until then the claim takes none of its deliveries, and then only the oldest due one, the probe,
and no other while the probe is in flight (each worker process may send its own); the rest wait
as they are, their attempt counts untouched, and follow in order of due time once it answers.
"""
from __future__ import annotations

import datetime as dt
import logging
import socket
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from urllib.parse import urlsplit

import peewee as pw
import requests

from .. import outages
from ..config import Config
from ..db import db
from ..models import WebhookAttempt, WebhookEndpoint, WebhookEvent, isoformat, new_id, utcnow
from .endpoints import WebhookError, check_public_host, endpoint_join, loggable_url, private_allowed, signing_secrets
from .signing import signed_headers
from .transport import Attempt, GuardedAdapter, failure_phrase, trust_context

RESPONSE_EXCERPT_BYTES = 1000
ENDPOINT_PROBE_MAX_SECONDS = 300
USER_AGENT = "emissions-webhooks/1"

log = logging.getLogger("emissions.webhooks")


@dataclass(frozen=True)
class Claim:
    """A delivery this worker holds the lease on, with the endpoint as it was when claimed."""

    event_id: str
    organization_id: int
    environment: str
    payload: str
    attempt_count: int
    lock_token: str
    url: str
    secret: str
    next_secret: str | None = None  # during a rotation's overlap: signed as X-Service-Webhook-Signature-Next
    down_since: dt.datetime | None = None  # the endpoint's outage as claimed: this delivery is its probe
    scheme: str = "service"  # the endpoint's signature scheme (signing.SCHEMES)


@dataclass(frozen=True)
class AttemptResult:
    attempted_at: dt.datetime
    status_code: int | None
    latency_ms: int | None
    error: str | None
    response_excerpt: str | None

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300

    @property
    def receiver_down(self) -> bool:
        """No answer from the receiver's application: it says nothing about this event in particular."""
        return self.status_code is None or self.status_code >= 500 or self.status_code == 429


def _storable(text: str | None, limit: int) -> str | None:
    """Text a receiver sent, safe for a text column: no NUL (PostgreSQL refuses it), at most `limit` characters."""
    return text.replace("\x00", "\ufffd")[:limit] if text else None


def _due(now: dt.datetime):
    return (((WebhookEvent.delivery_status == "pending") & (WebhookEvent.next_attempt_at <= now))
            | ((WebhookEvent.delivery_status == "delivering") & (WebhookEvent.locked_until <= now)))


def _result(future: Future) -> AttemptResult:
    """A finished attempt's result; one that raised all the same (send never should) is a failed attempt."""
    exc = future.exception()
    if exc is None:
        return future.result()
    return AttemptResult(utcnow(), None, None, f"internal error ({type(exc).__name__})", None)


class Deliverer:
    """Claims due deliveries, posts them signed, records every attempt; several may run at once."""

    def __init__(self, config: Config, *, clock=utcnow, batch_size: int = 32, threads: int = 8,
                 lease_seconds: float | None = None, resolve=socket.getaddrinfo):
        self.schedule = tuple(config.webhook_retry_schedule)
        self.timeout = config.webhook_timeout_seconds
        self.poll_seconds = config.webhook_poll_seconds
        self.allow_private_live = config.webhook_allow_private_live
        self.allow_private_test = config.webhook_allow_private_test
        # An attempt ends at its deadline (the time-out) and a claim is sent at once, on a free
        # thread: a lease of three deadlines only runs out when its worker is gone.
        self.lease = dt.timedelta(seconds=lease_seconds or max(60.0, 3 * self.timeout))
        self.clock = clock
        self.batch_size = batch_size
        self.threads = threads
        self.resolve = resolve
        self.ssl_context = trust_context(config.webhook_ca_bundle)
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="webhook-send")
        self._local = threading.local()
        self._sessions: list[requests.Session] = []
        self._stopping = threading.Event()
        # Endpoints (organization, environment) whose receiver failed an attempt of a round not yet
        # recorded: not claimed meanwhile, so free threads do not pile more attempts on a dead host.
        self._failing: set[tuple[int, str]] = set()
        # A failed run (tick) is logged whole the first time, then one line a minute, then the recovery.
        self.failures = outages.FailureLog(log, "webhook delivery run")

    # The three steps, public so that tests can stop between them like a dying process would.

    def claim(self, limit: int) -> list[Claim]:
        """Take the lease on up to `limit` due deliveries whose endpoint is enabled and not known down."""
        now = self.clock()
        candidates = self._due_ids(now, limit)
        if not candidates:
            return []  # an idle poll reads only; it takes no write lock
        token = new_id()
        # The write lock covers this UPDATE of at most `limit` rows by primary key. Its WHERE repeats
        # the due condition: of two workers racing for a row, the second finds it already leased and
        # updates nothing (PostgreSQL re-checks it after the first commits).
        with db.atomic():
            (WebhookEvent
             .update(delivery_status="delivering", lock_token=token, locked_until=now + self.lease)
             .where(WebhookEvent.id.in_(candidates) & _due(now))
             .execute())
        rows = (WebhookEvent
                .select(WebhookEvent.id, WebhookEvent.organization, WebhookEvent.environment, WebhookEvent.type,
                        WebhookEvent.created_at, WebhookEvent.stored_payload, WebhookEvent.calculation_id,
                        WebhookEvent.attempt_count, WebhookEndpoint.url, WebhookEndpoint.secret,
                        WebhookEndpoint.next_secret, WebhookEndpoint.overlap_ends_at, WebhookEndpoint.down_since,
                        WebhookEndpoint.signature)
                .join(WebhookEndpoint, on=endpoint_join())
                # By primary key: the candidates this worker leased (a rival may have taken some).
                .where(WebhookEvent.id.in_(candidates) & (WebhookEvent.lock_token == token))
                .objects())
        order = {event_id: place for place, event_id in enumerate(candidates)}
        rows = sorted(rows, key=lambda row: order[row.id])
        # A skipped event queued again by redeliver carries no body: payload rebuilds it.
        return [Claim(row.id, row.organization_id, row.environment, row.payload, row.attempt_count, token,
                      row.url, *signing_secrets(row.secret, row.next_secret, row.overlap_ends_at, now),
                      row.down_since, row.signature)
                for row in rows]

    def _due_ids(self, now: dt.datetime, limit: int) -> list[str]:
        """The ids of up to `limit` due deliveries of enabled endpoints, oldest due first; reads only.

        Asked endpoint by endpoint through webhook_event_due (migration 0012): each reads at most
        `limit` index entries however long its backlog, and pending events of an organization
        without an enabled endpoint are never read. An endpoint known down is skipped until its
        probe time, and then gives one delivery, its oldest due: the probe.
        """
        endpoints = {(organization_id, environment): down_since is not None
                     for organization_id, environment, down_since in
                     WebhookEndpoint.select(WebhookEndpoint.organization, WebhookEndpoint.environment,
                                            WebhookEndpoint.down_since)
                     .where((WebhookEndpoint.status == "enabled")
                            & (WebhookEndpoint.down_until.is_null() | (WebhookEndpoint.down_until <= now)))
                     .tuples()
                     if (organization_id, environment) not in self._failing}
        found: dict[tuple, list[tuple]] = {key: [] for key in endpoints}
        for (organization_id, environment), probing in endpoints.items():
            found[organization_id, environment].extend(
                WebhookEvent.select(WebhookEvent.next_attempt_at, WebhookEvent.id)
                .where((WebhookEvent.organization == organization_id)
                       & (WebhookEvent.environment == environment)
                       & (WebhookEvent.delivery_status == "pending")
                       & (WebhookEvent.next_attempt_at <= now))
                .order_by(WebhookEvent.next_attempt_at).limit(1 if probing else limit).tuples())
        if endpoints:
            # Leases that ran out (their worker died), through webhook_event_delivering.
            for locked_until, event_id, organization_id, environment in (
                    WebhookEvent.select(WebhookEvent.locked_until, WebhookEvent.id, WebhookEvent.organization,
                                        WebhookEvent.environment)
                    .where((WebhookEvent.delivery_status == "delivering") & (WebhookEvent.locked_until <= now))
                    .order_by(WebhookEvent.locked_until).limit(limit).tuples()):
                if (organization_id, environment) in found:
                    found[organization_id, environment].append((locked_until, event_id))
        due = [row for key, rows in found.items() for row in sorted(rows)[:1 if endpoints[key] else limit]]
        return [event_id for _, event_id in sorted(due)[:limit]]

    def send(self, claim: Claim) -> AttemptResult:
        """POST one signed attempt; never raises, every failure becomes the attempt's error."""
        attempted_at = self.clock()
        try:
            return self._send(claim, attempted_at)
        except Exception as exc:
            # A fault of ours (not the receiver's) must not cost the round: the attempt records it.
            log.exception("webhook attempt failed unexpectedly", extra={"fields": {"event_id": claim.event_id}})
            return AttemptResult(attempted_at, None, None, f"internal error ({type(exc).__name__})", None)

    def _send(self, claim: Claim, attempted_at: dt.datetime) -> AttemptResult:
        body = claim.payload.encode()
        headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT,
                   **signed_headers(claim.secret, claim.event_id, body, int(attempted_at.timestamp()),
                                    claim.next_secret, claim.scheme)}
        started = time.perf_counter()
        status_code = excerpt = error = None
        public_only = not private_allowed(claim.environment, self.allow_private_live, self.allow_private_test)
        with Attempt(self.timeout, public_only, claim.environment) as attempt:
            try:
                if public_only:
                    # Checked again at send time: DNS may have changed since the endpoint was set.
                    parts = urlsplit(claim.url)
                    check_public_host(parts.hostname, parts.port or (443 if parts.scheme == "https" else 80),
                                      self.resolve, claim.environment)
                with self._session().post(claim.url, data=body, headers=headers, timeout=self.timeout,
                                          allow_redirects=False, stream=True) as response:
                    status_code = response.status_code
                    excerpt = next(response.iter_content(RESPONSE_EXCERPT_BYTES), b"").decode("utf-8", "replace")
            except WebhookError as exc:
                error = f"refused: {exc}"
            except Exception as exc:  # timeouts, refused connections, TLS errors: all a failed attempt
                try:
                    error = failure_phrase(exc, self.timeout)
                except Exception:
                    error = f"request failed ({type(exc).__name__})"
        if attempt.expired:  # whatever arrived before the deadline, the answer was not complete in time
            status_code = excerpt = None
            error = f"timed out after {self.timeout:g} s"
        elif status_code is not None and not 200 <= status_code < 300:
            error = f"HTTP {status_code}"
        latency_ms = round((time.perf_counter() - started) * 1000)
        return AttemptResult(attempted_at, status_code, latency_ms, _storable(error, 500),
                             _storable(excerpt, RESPONSE_EXCERPT_BYTES))

    def complete(self, claim: Claim, result: AttemptResult) -> str:
        """Record one attempt and move its delivery on; return its new status."""
        return self.record([(claim, result)])[0]

    def record(self, outcomes: list[tuple[Claim, AttemptResult]]) -> list[str]:
        """Record a round's attempts in one write transaction; return each delivery's new status.

        Each delivery moves on by its own schedule. Each endpoint of the round is marked up when its
        receiver answered any attempt, and down (until its next probe) when it answered none.
        Rows are updated in one order, the events by id and then the endpoints by key, so two
        workers recording rounds at once on PostgreSQL wait for each other instead of deadlocking.
        """
        now = self.clock()
        recorded: dict[str, tuple[int, str]] = {}
        with db.atomic():
            for claim, result in sorted(outcomes, key=lambda outcome: outcome[0].event_id):
                recorded[claim.event_id] = self._record_one(claim, result, now)
            gone = {claim.event_id for claim, result in outcomes
                    if result.status_code == 410 and recorded[claim.event_id][1] != "lease-lost"}
            self._mark_endpoints(outcomes, gone, now)
        self._failing -= {(claim.organization_id, claim.environment) for claim, _ in outcomes}
        for claim, result in outcomes:
            number, status = recorded[claim.event_id]
            log.info("delivery attempt", extra={"fields": {
                "event_id": claim.event_id, "attempt": number, "url": loggable_url(claim.url),
                "status_code": result.status_code, "latency_ms": result.latency_ms, "error": result.error,
                "delivery_status": status}})
        return [recorded[claim.event_id][1] for claim, _ in outcomes]

    def _record_one(self, claim: Claim, result: AttemptResult, now: dt.datetime) -> tuple[int, str]:
        attempt_count = claim.attempt_count + 1
        changes = {"attempt_count": attempt_count, "lock_token": None, "locked_until": None}
        if result.succeeded:
            changes.update(delivery_status="succeeded", delivered_at=now, next_attempt_at=None)
        elif result.status_code == 410 or attempt_count > len(self.schedule):
            changes.update(delivery_status="failed", next_attempt_at=None)
        else:
            changes.update(delivery_status="pending",
                           next_attempt_at=now + dt.timedelta(seconds=self.schedule[attempt_count - 1]))
        number = (WebhookAttempt.select(pw.fn.COALESCE(pw.fn.MAX(WebhookAttempt.number), 0))
                  .where(WebhookAttempt.event == claim.event_id).scalar()) + 1
        WebhookAttempt.create(event=claim.event_id, number=number, url=claim.url,
                              attempted_at=result.attempted_at, status_code=result.status_code,
                              latency_ms=result.latency_ms, error=result.error,
                              response_excerpt=result.response_excerpt)
        # Only the lease holder moves the delivery on; a worker that lost its lease just reports.
        held = (WebhookEvent.update(**changes)
                .where((WebhookEvent.id == claim.event_id) & (WebhookEvent.lock_token == claim.lock_token))
                .execute())
        return number, changes["delivery_status"] if held else "lease-lost"

    @staticmethod
    def _endpoint_of(claim: Claim):
        """The endpoint the claim was sent to, if it still has that URL (a new URL is a new receiver)."""
        return ((WebhookEndpoint.organization == claim.organization_id)
                & (WebhookEndpoint.environment == claim.environment) & (WebhookEndpoint.url == claim.url))

    def _mark_endpoints(self, outcomes: list[tuple[Claim, AttemptResult]], gone: set[str],
                        now: dt.datetime) -> None:
        """Mark each endpoint of the round up, down or (a 410 to a delivery still held) disabled: one
        UPDATE each, in order of (organization, environment, url).

        Down: the next probe waits as long as the outage has lasted so far, at least the first retry
        step and at most ENDPOINT_PROBE_MAX_SECONDS, so probes thin out while a receiver stays down.
        The outage is the stored one: a `webhook set` that ended it while the round was on the wire
        is not undone, a failure after it starts a new outage.
        """
        by_endpoint: dict[tuple, list[tuple[Claim, AttemptResult]]] = {}
        for claim, result in outcomes:
            by_endpoint.setdefault((claim.organization_id, claim.environment, claim.url), []).append((claim, result))
        for key in sorted(by_endpoint):
            group = by_endpoint[key]
            claim = group[0][0]
            if any(c.event_id in gone for c, _ in group):
                (WebhookEndpoint
                 .update(status="disabled", updated_at=now, down_since=None, down_until=None,
                         disabled_reason=f"the receiver answered 410 Gone at {isoformat(now)}")
                 .where(self._endpoint_of(claim))
                 .execute())
            elif all(result.receiver_down for _, result in group):
                stored = (WebhookEndpoint.select(WebhookEndpoint.down_since)
                          .where(self._endpoint_of(claim) & (WebhookEndpoint.status == "enabled")).scalar())
                wait_seconds = min(max(self.schedule[0] if self.schedule else 0,
                                       (now - (stored or now)).total_seconds()),
                                   ENDPOINT_PROBE_MAX_SECONDS)
                (WebhookEndpoint
                 .update(down_since=pw.fn.COALESCE(WebhookEndpoint.down_since, now),
                         down_until=now + dt.timedelta(seconds=wait_seconds))
                 .where(self._endpoint_of(claim) & (WebhookEndpoint.status == "enabled"))
                 .execute())
            else:
                (WebhookEndpoint.update(down_since=None, down_until=None)
                 .where(self._endpoint_of(claim) & WebhookEndpoint.down_since.is_null(False))
                 .execute())

    # Running.

    def run_once(self) -> dict[str, int]:
        """Deliver everything that is due, until nothing is due or in flight; count outcomes.

        A claim takes only as many deliveries as there are free threads, and while some are in
        flight the free threads keep polling: one slow receiver holds one thread, not the others.
        A claim's round is recorded in one write transaction once all its attempts have ended. A
        round in which no receiver answered ends the run's claiming: the next comes a poll later, so
        receivers that are down cost at most a round a poll however many of them there are. A
        receiver that answers, even with a refusal, is up: its deliveries move on by their schedule
        and do not hold up the others.
        """
        counts = {"succeeded": 0, "pending": 0, "failed": 0, "lease-lost": 0}
        rounds: list[list[tuple[Claim, Future]]] = []
        claiming = True
        opened = db.is_closed()
        if opened:
            db.connect()
        try:
            while True:
                running = [future for round_ in rounds for _, future in round_ if not future.done()]
                free = self.threads - len(running)  # below 0 when PostgreSQL's claim returned extra rows
                if free > 0 and claiming and not self._stopping.is_set():
                    claims = self.claim(min(free, self.batch_size))
                    # A probe holds its endpoint until it is recorded: polls meanwhile send no second one.
                    self._failing |= {(claim.organization_id, claim.environment) for claim in claims
                                      if claim.down_since is not None}
                    if claims:
                        rounds.append([(claim, self._pool.submit(self.send, claim)) for claim in claims])
                        running += [future for _, future in rounds[-1]]
                if not rounds:
                    break
                if running:
                    wait(running, timeout=self.poll_seconds, return_when=FIRST_COMPLETED)
                self._failing |= {(claim.organization_id, claim.environment) for round_ in rounds
                                  for claim, future in round_ if future.done() and _result(future).receiver_down}
                for round_ in [round_ for round_ in rounds if all(future.done() for _, future in round_)]:
                    rounds.remove(round_)
                    statuses = self.record([(claim, _result(future)) for claim, future in round_])
                    claiming = claiming and not all(_result(future).receiver_down for _, future in round_)
                    for status in statuses:
                        counts[status] += 1
        finally:
            self._failing.clear()  # what was recorded is in the database; what was not, was not attempted
            if opened:
                db.close()
        return counts

    def tick(self) -> None:
        """run_once for a scheduler: log a failure (database down) instead of raising it.

        A run comes every WEBHOOK_POLL_SECONDS: during an outage, the first failure is logged with
        its traceback, then one line a minute while they go on, and one when a run succeeds again.
        """
        try:
            self.run_once()
        except Exception as exc:
            self.failures.failed(exc)
        else:
            self.failures.succeeded()

    def run_forever(self, poll_seconds: float) -> None:
        """Deliver every `poll_seconds` until stop() is called."""
        while not self._stopping.is_set():
            self.tick()
            self._stopping.wait(poll_seconds)

    def stop(self) -> None:
        """Finish the deliveries in flight, then stop claiming."""
        self._stopping.set()

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        for session in self._sessions:
            session.close()

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
            session.trust_env = False  # no HTTP(S)_PROXY: the deadline and the peer check need our own sockets
            session.mount("http://", GuardedAdapter())
            session.mount("https://", GuardedAdapter(self.ssl_context))
            self._sessions.append(session)
        return session
