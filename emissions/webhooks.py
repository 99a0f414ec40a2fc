"""Webhooks: endpoints, the outbox rows written with each outcome, signing, delivery and verification.

An event row is written in the outcome's own transaction (new_event, then store.insert_event). A Deliverer claims due rows
with one conditional UPDATE that sets a lock token and a lease, posts them, and records the attempt;
a row whose lease ran out (its worker died) is claimed again, so delivery is at least once.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import ipaddress
import logging
import re
import socket
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import NamedTuple
from urllib.parse import urlsplit

import peewee as pw
import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from . import auth
from . import jsoncodec
from .config import Config
from . import store
from .db import db, is_postgres
from .models import Organization, WebhookAttempt, WebhookEndpoint, WebhookEvent, isoformat, new_id, utcnow

SIGNATURE_VERSION = "v1"
DEFAULT_TOLERANCE_SECONDS = 300
SECRET_PREFIX = "whsec_"
SECRET_RANDOM_LENGTH = 32  # base62 characters, about 190 bits
MAX_URL_LENGTH = 2048
RESPONSE_EXCERPT_BYTES = 1000
USER_AGENT = "emissions-webhooks/1"

log = logging.getLogger("emissions.webhooks")


class WebhookError(ValueError):
    """An endpoint or delivery operation the service refuses; the message says why."""


class InvalidSignature(ValueError):
    """A delivery whose headers, signature or timestamp do not verify."""


# --- signing and verifying ------------------------------------------------------------------

def sign(secret: str, event_id: str, timestamp: str, body: bytes) -> str:
    """The X-Service-Webhook-Signature value: v1= + hex HMAC-SHA256 of id.timestamp.body."""
    message = event_id.encode() + b"." + timestamp.encode() + b"." + body
    return "v1=" + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signed_headers(secret: str, event_id: str, body: bytes, unix_seconds: int) -> dict[str, str]:
    """The three X-Service-Webhook-* headers of one delivery attempt."""
    timestamp = str(unix_seconds)
    return {
        "X-Service-Webhook-Id": event_id,
        "X-Service-Webhook-Timestamp": timestamp,
        "X-Service-Webhook-Signature": sign(secret, event_id, timestamp, body),
    }


def verify(secret: str, headers, body: bytes, tolerance: int = DEFAULT_TOLERANCE_SECONDS,
           now: float | None = None) -> str:
    """Check a received delivery (headers: any mapping, body: the raw bytes); return the event id or raise InvalidSignature."""
    lowered = {str(name).lower(): value for name, value in headers.items()}
    event_id = lowered.get("x-service-webhook-id")
    timestamp = lowered.get("x-service-webhook-timestamp")
    signature = lowered.get("x-service-webhook-signature")
    if not (event_id and timestamp and signature):
        raise InvalidSignature("missing X-Service-Webhook-Id, -Timestamp or -Signature header")
    # ASCII digits only: str.isdigit() accepts "²", which int() refuses; 15 digits outlast any clock.
    if not re.fullmatch(r"[0-9]{1,15}", timestamp):
        raise InvalidSignature("X-Service-Webhook-Timestamp is not Unix seconds")
    now = time.time() if now is None else now
    if abs(now - int(timestamp)) > tolerance:
        raise InvalidSignature("X-Service-Webhook-Timestamp is outside the tolerance")
    if isinstance(body, str):
        body = body.encode()
    # Bytes, because compare_digest raises TypeError on a str with non-ASCII characters.
    if not hmac.compare_digest(sign(secret, event_id, timestamp, body).encode(), signature.encode()):
        raise InvalidSignature("signature does not match")
    return event_id


# --- events (the outbox) --------------------------------------------------------------------

class NewEvent(NamedTuple):
    """An event ready to be written: new_event() builds it, store.insert_event() writes it."""

    id: str
    organization_id: int
    environment: str
    type: str
    payload: str
    created_at: dt.datetime


def loggable_url(url: str) -> str:
    """An endpoint's URL for a log line or the audit trail: its query and fragment, where receivers
    often put a token, as "?…" and "#…"."""
    url, hash_sign, _ = url.partition("#")
    base, question, _ = url.partition("?")
    return base + ("?…" if question else "") + ("#…" if hash_sign else "")


def new_event(organization_id: int, environment: str, event_type: str, data_json: str,
              created_at: dt.datetime | None = None) -> NewEvent:
    """The event and its exact body, built before the outcome's transaction so that it stays short.

    `data_json` is the event's data as JSON text; `created_at` is the outcome's own moment when it
    has one (a calculation's created_at).
    """
    event_id = new_id()
    created_at = created_at or utcnow()
    payload = jsoncodec.dumps({"id": event_id, "type": event_type, "created_at": isoformat(created_at),
                               "environment": environment, "data": jsoncodec.Raw(data_json)})
    return NewEvent(event_id, organization_id, environment, event_type, payload, created_at)


def record_event(organization_id: int, environment: str, event_type: str, data_json: str) -> WebhookEvent:
    """new_event and store.insert_event in one call, returning the row (for tools and tests;
    calculations build the event before their transaction and insert it inside)."""
    event = new_event(organization_id, environment, event_type, data_json)
    store.insert_event(event)
    return WebhookEvent.get_by_id(event.id)


def recent_deliveries(organization_id: int | None = None, environment: str | None = None,
                      limit: int = 20) -> list[dict]:
    """The most recent events (newest first) with their delivery state and attempts."""
    query = (WebhookEvent.select(WebhookEvent, Organization.slug).join(Organization)
             .order_by(WebhookEvent.created_at.desc(), WebhookEvent.id).limit(limit))
    if organization_id is not None:
        query = query.where(WebhookEvent.organization == organization_id)
    if environment is not None:
        query = query.where(WebhookEvent.environment == environment)
    events = list(query)
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


def redeliver(event_id: str) -> WebhookEvent:
    """Queue an event for delivery now: a finished one (succeeded, failed or skipped) for a new round
    of attempts, a pending one without waiting for its next retry."""
    event = WebhookEvent.get_or_none(WebhookEvent.id == event_id)
    if event is None:
        raise WebhookError(f"no webhook event with id {event_id}")
    if event.delivery_status not in REDELIVERABLE:
        raise WebhookError(f"event {event_id} is being delivered right now")
    endpoint = endpoint_for(event.organization_id, event.environment)
    if endpoint is None or endpoint.status != "enabled":
        raise WebhookError(f"no enabled webhook endpoint for the event's organization ({event.environment})")
    updated = (WebhookEvent.update(_requeue(utcnow()))
               .where((WebhookEvent.id == event_id) & (WebhookEvent.delivery_status == event.delivery_status))
               .execute())
    if not updated:
        raise WebhookError(f"event {event_id} changed meanwhile; try again")
    return WebhookEvent.get_by_id(event_id)


def send_test_event(organization_id: int, environment: str) -> WebhookEvent:
    """Queue a calculation.succeeded event made of test data, marked `"test_event": true` in its
    data, for the test endpoint (never live: a live receiver would book it)."""
    if environment != "test":
        raise WebhookError("test events are sent in the test environment only")
    endpoint = endpoint_for(organization_id, environment)
    if endpoint is None or endpoint.status != "enabled":
        raise WebhookError("no enabled test endpoint to send to")
    now = utcnow()
    data = jsoncodec.dumps({
        "id": new_id(), "external_reference": "test-event", "status": "succeeded", "environment": "test",
        "customer": {"reference": "test-customer"}, "mode": "ROAD", "activity_date": now.date().isoformat(),
        "origin": {"label": "Test origin"}, "destination": {"label": "Test destination"},
        "cargo": {"value": 1, "unit": "tonne"}, "distance": {"value": 100, "unit": "km"},
        "activity": {"value": 100, "unit": "tkm"}, "emissions": {"value": 0, "unit": "kgCO2e"},
        "methodology": {"standard": "ISO 14083:2023", "boundary": "WTW", "business_context": "upstream",
                        "scope3_category": 4},
        "factor": {"reference": "test-factor", "version": 1, "name": "Test factor", "source": "Workspace test event",
                   "region": None, "mode": "ROAD", "unit": "kgCO2e/tkm", "valid_from": None, "valid_to": None},
        "created_at": isoformat(now), "test_event": True})
    return record_event(organization_id, environment, "calculation.succeeded", data)


def redeliver_since(since: dt.datetime, statuses: tuple[str, ...] = ("failed", "skipped"),
                    organization_id: int | None = None, environment: str | None = None) -> int:
    """Queue every event created at or after `since` with one of `statuses` whose endpoint is enabled; return how many."""
    unknown = sorted(set(statuses) - set(REDELIVERABLE))
    if unknown:
        raise WebhookError(f"cannot redeliver events that are {', '.join(unknown)}; "
                           f"choose from {', '.join(REDELIVERABLE)}")
    enabled = (WebhookEndpoint.select(WebhookEndpoint.id)
               .where(_endpoint_join() & (WebhookEndpoint.status == "enabled")))
    condition = ((WebhookEvent.created_at >= since) & WebhookEvent.delivery_status.in_(list(statuses))
                 & pw.fn.EXISTS(enabled))
    if organization_id is not None:
        condition &= WebhookEvent.organization == organization_id
    if environment is not None:
        condition &= WebhookEvent.environment == environment
    return WebhookEvent.update(_requeue(utcnow())).where(condition).execute()


def skipped_since(organization_id: int, environment: str, since: dt.datetime) -> int:
    """How many events of the endpoint's organization and environment were skipped since `since`."""
    return (WebhookEvent.select()
            .where((WebhookEvent.organization == organization_id) & (WebhookEvent.environment == environment)
                   & (WebhookEvent.delivery_status == "skipped") & (WebhookEvent.created_at >= since))
            .count())


PRUNE_BATCH = 1000


def prune(older_than: dt.timedelta, now: dt.datetime | None = None) -> dict[str, int]:
    """Delete finished events (and their attempts) created more than `older_than` ago; never a calculation.

    In batches, each its own short transaction, so that writers never wait long behind it.
    """
    cutoff = (now or utcnow()) - older_than
    deleted = {"events": 0, "attempts": 0}
    while True:
        with db.atomic():
            batch = [row.id for row in WebhookEvent.select(WebhookEvent.id)
                     .where((WebhookEvent.created_at < cutoff) & WebhookEvent.delivery_status.in_(list(FINISHED)))
                     .limit(PRUNE_BATCH)]
            if not batch:
                return deleted
            deleted["attempts"] += WebhookAttempt.delete().where(WebhookAttempt.event.in_(batch)).execute()
            deleted["events"] += WebhookEvent.delete().where(WebhookEvent.id.in_(batch)).execute()


# --- endpoints ------------------------------------------------------------------------------

def new_secret() -> str:
    return SECRET_PREFIX + auth.random_base62(SECRET_RANDOM_LENGTH)


def endpoint_for(organization_id: int, environment: str) -> WebhookEndpoint | None:
    return WebhookEndpoint.get_or_none((WebhookEndpoint.organization == organization_id)
                                       & (WebhookEndpoint.environment == environment))


def check_public_host(host: str, port: int, resolve=socket.getaddrinfo) -> None:
    """Raise WebhookError unless every address the host resolves to is a public one."""
    try:
        addresses = [ipaddress.ip_address(host)]
    except ValueError:
        try:
            infos = resolve(host, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as exc:
            raise WebhookError(f"the host {host} does not resolve ({exc})") from None
        addresses = [ipaddress.ip_address(info[4][0].split("%", 1)[0]) for info in infos]
    if not addresses:
        raise WebhookError(f"the host {host} does not resolve")
    for address in addresses:
        if not _is_public(address):
            raise WebhookError(
                f"the host {host} resolves to a loopback, private or link-local address ({_unmapped(address)}); "
                "live endpoints must be public (WEBHOOK_ALLOW_PRIVATE_LIVE=true allows it)")


# IPv6 prefixes whose last 32 bits are an IPv4 address: NAT64's well-known one and IPv4-compatible.
NAT64 = ipaddress.ip_network("64:ff9b::/96")
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
# NAT64 for one network (RFC 8215): where the IPv4 address sits depends on that network; never public.
LOCAL_NAT64 = ipaddress.ip_network("64:ff9b:1::/48")


def _unmapped(address: ipaddress.IPv4Address | ipaddress.IPv6Address):
    """The IPv4 address an IPv6 address carries (mapped, 6to4, NAT64, IPv4-compatible), else the address."""
    if address.version == 4:
        return address
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in NAT64 or (address in IPV4_COMPATIBLE and int(address) > 1):  # :: and ::1 are themselves
        return ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF)
    return address


def _is_public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """A global unicast address; an IPv6 address carrying an IPv4 one is as public as that."""
    if address in LOCAL_NAT64:
        return False
    address = _unmapped(address)
    return address.is_global and not address.is_multicast


def validate_url(url: str, environment: str, allow_private_live: bool = False,
                 resolve=socket.getaddrinfo) -> str:
    """The URL if an endpoint of this environment may use it; otherwise raise WebhookError."""
    url = url.strip()
    if not url:
        raise WebhookError("the URL is empty")
    if len(url) > MAX_URL_LENGTH:
        raise WebhookError(f"the URL is longer than {MAX_URL_LENGTH} characters")
    if any(ord(char) <= 32 or ord(char) == 127 for char in url):
        raise WebhookError("the URL contains spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise WebhookError(f"the URL is not valid ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise WebhookError("the URL must start with https:// (or http:// for a test endpoint)")
    if environment == "live" and scheme != "https":
        raise WebhookError("a live endpoint must use https")
    if not parts.hostname:
        raise WebhookError("the URL has no host")
    if parts.username is not None or parts.password is not None:
        raise WebhookError("the URL must not carry credentials; receivers authenticate by the signature")
    if environment == "live" and not allow_private_live:
        check_public_host(parts.hostname, port or 443, resolve)
    return url


def set_endpoint(organization_id: int, environment: str, url: str, *, allow_private_live: bool = False,
                 resolve=socket.getaddrinfo) -> tuple[WebhookEndpoint, str]:
    """Create or replace the organization's endpoint for an environment; return it and its new secret."""
    if environment not in ("test", "live"):
        raise WebhookError("environment must be test or live")
    url = validate_url(url, environment, allow_private_live, resolve)
    secret = new_secret()
    now = utcnow()
    try:
        with db.atomic():
            endpoint = endpoint_for(organization_id, environment)
            if endpoint is None:
                endpoint = WebhookEndpoint.create(organization=organization_id, environment=environment,
                                                  url=url, secret=secret, created_at=now, updated_at=now)
            else:
                endpoint.url, endpoint.secret, endpoint.updated_at = url, secret, now
                endpoint.status, endpoint.disabled_reason = "enabled", None
                endpoint.save()
    except pw.IntegrityError:
        raise WebhookError("the endpoint was changed at the same moment; try again") from None
    return endpoint, secret


def rotate_secret(organization_id: int, environment: str) -> tuple[WebhookEndpoint, str]:
    """Give the endpoint a new secret (used from the next attempt on); return it."""
    endpoint = endpoint_for(organization_id, environment)
    if endpoint is None:
        raise WebhookError(f"no webhook endpoint is set for {environment}")
    secret = new_secret()
    (WebhookEndpoint.update(secret=secret, updated_at=utcnow())
     .where(WebhookEndpoint.id == endpoint.id).execute())
    endpoint.secret = secret
    return endpoint, secret


def remove_endpoint(organization_id: int, environment: str) -> WebhookEndpoint:
    """Delete the endpoint; events stay, and pending ones wait for a new endpoint."""
    endpoint = endpoint_for(organization_id, environment)
    if endpoint is None:
        raise WebhookError(f"no webhook endpoint is set for {environment}")
    endpoint.delete_instance()
    return endpoint


# --- delivery -------------------------------------------------------------------------------

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


def _storable(text: str | None, limit: int) -> str | None:
    """Text a receiver sent, safe for a text column: no NUL (PostgreSQL refuses it), at most `limit` characters."""
    return text.replace("\x00", "\ufffd")[:limit] if text else None


def _due(now: dt.datetime):
    return (((WebhookEvent.delivery_status == "pending") & (WebhookEvent.next_attempt_at <= now))
            | ((WebhookEvent.delivery_status == "delivering") & (WebhookEvent.locked_until <= now)))


def _endpoint_join():
    return ((WebhookEndpoint.organization == WebhookEvent.organization)
            & (WebhookEndpoint.environment == WebhookEvent.environment))


# --- one attempt on the wire -----------------------------------------------------------------

def _causes(exc: BaseException):
    """The exception and everything it wraps (requests wraps urllib3, which wraps the socket's error)."""
    seen, stack = set(), [exc]
    while stack:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        stack.extend([current.__cause__, current.__context__, getattr(current, "reason", None),
                      *(arg for arg in current.args if isinstance(arg, BaseException))])


def failure_phrase(exc: BaseException, timeout: float) -> str:
    """An attempt's failure as one short phrase for people: `connection refused`, `timed out after 10 s`."""
    causes = list(_causes(exc))
    if any(isinstance(cause, (requests.Timeout, socket.timeout, TimeoutError)) for cause in causes):
        return f"timed out after {timeout:g} s"
    if any(isinstance(cause, ConnectionRefusedError) for cause in causes):
        return "connection refused"
    if any(isinstance(cause, socket.gaierror) for cause in causes) or any(
            type(cause).__name__ == "NameResolutionError" for cause in causes):
        return "host not found"
    if any(isinstance(cause, requests.exceptions.SSLError) for cause in causes):
        return "TLS handshake failed"
    if any(isinstance(cause, ConnectionResetError) for cause in causes):
        return "connection reset"
    if any(type(cause).__name__ in ("RemoteDisconnected", "ProtocolError") for cause in causes):
        return "connection closed without an answer"
    for cause in causes:
        if isinstance(cause, OSError) and cause.strerror:
            return f"connection failed: {cause.strerror.lower()}"
    return f"request failed ({type(exc).__name__})"


_current = threading.local()


def _shut(sock) -> None:
    """Wake any thread blocked on the socket; the base method, so that TLS state is left alone."""
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass


class _Attempt:
    """One attempt's wall-clock deadline and peer rule, applied to every connection it uses.

    requests' timeout bounds each socket read, not the answer: a receiver trickling one byte at a
    time would hold a worker for ever. At the deadline a timer shuts the attempt's sockets down.
    """

    def __init__(self, seconds: float, public_only: bool):
        self.public_only = public_only
        self.expired = False
        self._connections: list = []
        self._lock = threading.Lock()
        self._finished = False
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> "_Attempt":
        _current.attempt = self
        self._timer.start()
        return self

    def __exit__(self, *exc_info) -> None:
        _current.attempt = None
        with self._lock:
            self._finished = True  # from here on `expired` no longer changes
        self._timer.cancel()

    def admit(self, connection, sock) -> None:
        """Refuse a socket whose peer is not public (when required); watch its connection for the deadline."""
        if self.public_only:
            # The name was checked before connecting, but DNS may answer differently the second time.
            peer = ipaddress.ip_address(sock.getpeername()[0].split("%", 1)[0])
            if not _is_public(peer):
                raise WebhookError(f"the connection reached a loopback, private or link-local address "
                                   f"({_unmapped(peer)}); live endpoints must be public")
        with self._lock:
            if connection not in self._connections:
                self._connections.append(connection)
            if self.expired:
                _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            if self._finished:
                return
            self.expired = True
            for connection in self._connections:
                if connection.sock is not None:
                    _shut(connection.sock)


class _GuardedConnection:
    """A urllib3 connection that submits its socket to the current attempt, new or reused."""

    def _new_conn(self):
        sock = super()._new_conn()
        attempt = getattr(_current, "attempt", None)
        if attempt is not None:
            try:
                attempt.admit(self, sock)  # before TLS and before a byte of the request
            except BaseException:
                sock.close()
                raise
        return sock

    def request(self, *args, **kwargs):
        attempt = getattr(_current, "attempt", None)
        if attempt is not None:
            if self.sock is None:
                self.connect()
            attempt.admit(self, self.sock)  # a kept-alive connection was checked by another attempt
        return super().request(*args, **kwargs)


class _HTTPConnection(_GuardedConnection, HTTPConnection):
    pass


class _HTTPSConnection(_GuardedConnection, HTTPSConnection):
    pass


class _HTTPConnectionPool(HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSConnectionPool(HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


class _GuardedAdapter(HTTPAdapter):
    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _HTTPConnectionPool, "https": _HTTPSConnectionPool}


class Deliverer:
    """Claims due deliveries, posts them signed, records every attempt; several may run at once."""

    def __init__(self, config: Config, *, clock=utcnow, batch_size: int = 32, threads: int = 8,
                 lease_seconds: float | None = None, resolve=socket.getaddrinfo):
        self.schedule = tuple(config.webhook_retry_schedule)
        self.timeout = config.webhook_timeout_seconds
        self.poll_seconds = config.webhook_poll_seconds
        self.allow_private_live = config.webhook_allow_private_live
        # An attempt ends at its deadline (the time-out) and a claim is sent at once, on a free
        # thread: a lease of three deadlines only runs out when its worker is gone.
        self.lease = dt.timedelta(seconds=lease_seconds or max(60.0, 3 * self.timeout))
        self.clock = clock
        self.batch_size = batch_size
        self.threads = threads
        self.resolve = resolve
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="webhook-send")
        self._local = threading.local()
        self._sessions: list[requests.Session] = []
        self._stopping = threading.Event()
        self._failed_runs = 0  # runs failed in a row (tick): the first is logged whole, then one line a minute
        self._next_failure_line = 0.0

    # The three steps, public so that tests can stop between them like a dying process would.

    def claim(self, limit: int) -> list[Claim]:
        """Take the lease on up to `limit` due deliveries whose endpoint is enabled."""
        now = self.clock()
        token = new_id()
        enabled = (WebhookEndpoint.select(WebhookEndpoint.id)
                   .where(_endpoint_join() & (WebhookEndpoint.status == "enabled")))
        candidates = (WebhookEvent.select(WebhookEvent.id)
                      .where(_due(now) & pw.fn.EXISTS(enabled))
                      .order_by(WebhookEvent.next_attempt_at)
                      .limit(limit))
        if not candidates.exists():
            return []  # an idle poll reads only; it takes no write lock
        if is_postgres():
            candidates = candidates.for_update(skip_locked=True)
        # The WHERE repeats the due condition: of two workers racing for a row, the second finds
        # it already leased and updates nothing (PostgreSQL re-checks it after the first commits).
        with db.atomic():
            (WebhookEvent
             .update(delivery_status="delivering", lock_token=token, locked_until=now + self.lease)
             .where(WebhookEvent.id.in_(candidates) & _due(now))
             .execute())
        rows = (WebhookEvent
                .select(WebhookEvent.id, WebhookEvent.organization, WebhookEvent.environment,
                        WebhookEvent.payload, WebhookEvent.attempt_count, WebhookEndpoint.url,
                        WebhookEndpoint.secret)
                .join(WebhookEndpoint, on=_endpoint_join())
                # The status names the partial index webhook_event_delivering (migration 0002); the
                # rows just leased all have it, so the answer is the same as by the token alone.
                .where((WebhookEvent.delivery_status == "delivering") & (WebhookEvent.lock_token == token))
                .order_by(WebhookEvent.next_attempt_at)
                .objects())
        return [Claim(row.id, row.organization_id, row.environment, row.payload, row.attempt_count, token,
                      row.url, row.secret) for row in rows]

    def send(self, claim: Claim) -> AttemptResult:
        """POST one signed attempt; never raises, every failure becomes the attempt's error."""
        attempted_at = self.clock()
        body = claim.payload.encode()
        headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT,
                   **signed_headers(claim.secret, claim.event_id, body, int(attempted_at.timestamp()))}
        started = time.perf_counter()
        status_code = excerpt = error = None
        public_only = claim.environment == "live" and not self.allow_private_live
        with _Attempt(self.timeout, public_only) as attempt:
            try:
                if public_only:
                    # Checked again at send time: DNS may have changed since the endpoint was set.
                    parts = urlsplit(claim.url)
                    check_public_host(parts.hostname, parts.port or 443, self.resolve)
                with self._session().post(claim.url, data=body, headers=headers, timeout=self.timeout,
                                          allow_redirects=False, stream=True) as response:
                    status_code = response.status_code
                    excerpt = next(response.iter_content(RESPONSE_EXCERPT_BYTES), b"").decode("utf-8", "replace")
            except WebhookError as exc:
                error = f"refused: {exc}"
            except Exception as exc:  # timeouts, refused connections, TLS errors: all a failed attempt
                error = failure_phrase(exc, self.timeout)
        if attempt.expired:  # whatever arrived before the deadline, the answer was not complete in time
            status_code = excerpt = None
            error = f"timed out after {self.timeout:g} s"
        elif status_code is not None and not 200 <= status_code < 300:
            error = f"HTTP {status_code}"
        latency_ms = round((time.perf_counter() - started) * 1000)
        return AttemptResult(attempted_at, status_code, latency_ms, _storable(error, 500),
                             _storable(excerpt, RESPONSE_EXCERPT_BYTES))

    def complete(self, claim: Claim, result: AttemptResult) -> str:
        """Record the attempt and move the delivery on; return its new status."""
        now = self.clock()
        attempt_count = claim.attempt_count + 1
        changes = {"attempt_count": attempt_count, "lock_token": None, "locked_until": None}
        if result.succeeded:
            changes.update(delivery_status="succeeded", delivered_at=now, next_attempt_at=None)
        elif result.status_code == 410 or attempt_count > len(self.schedule):
            changes.update(delivery_status="failed", next_attempt_at=None)
        else:
            changes.update(delivery_status="pending",
                           next_attempt_at=now + dt.timedelta(seconds=self.schedule[attempt_count - 1]))
        with db.atomic():
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
            if held and result.status_code == 410:
                (WebhookEndpoint
                 .update(status="disabled", updated_at=now,
                         disabled_reason=f"the receiver answered 410 Gone at {isoformat(now)}")
                 .where((WebhookEndpoint.organization == claim.organization_id)
                        & (WebhookEndpoint.environment == claim.environment)
                        & (WebhookEndpoint.url == claim.url))
                 .execute())
        status = changes["delivery_status"] if held else "lease-lost"
        log.info("delivery attempt", extra={"fields": {
            "event_id": claim.event_id, "attempt": number, "url": loggable_url(claim.url), "status_code": result.status_code,
            "latency_ms": result.latency_ms, "error": result.error, "delivery_status": status}})
        return status

    # Running.

    def run_once(self) -> dict[str, int]:
        """Deliver everything that is due, until nothing is due or in flight; count outcomes.

        A claim takes only as many deliveries as there are free threads, and while some are in
        flight the free threads keep polling: one slow receiver holds one thread, not the others.
        """
        counts = {"succeeded": 0, "pending": 0, "failed": 0, "lease-lost": 0}
        in_flight: dict = {}
        opened = db.is_closed()
        if opened:
            db.connect()
        try:
            while True:
                free = self.threads - len(in_flight)  # below 0 when PostgreSQL's claim returned extra rows
                if free > 0 and not self._stopping.is_set():
                    for claim in self.claim(min(free, self.batch_size)):
                        in_flight[self._pool.submit(self.send, claim)] = claim
                if not in_flight:
                    break
                done, _ = wait(in_flight, timeout=self.poll_seconds, return_when=FIRST_COMPLETED)
                for future in done:
                    counts[self.complete(in_flight.pop(future), future.result())] += 1
        finally:
            if opened:
                db.close()
        return counts

    FAILURE_LINE_SECONDS = 60.0

    def tick(self) -> None:
        """run_once for a scheduler: log a failure (database down) instead of raising it.

        A run comes every WEBHOOK_POLL_SECONDS: during an outage, the first failure is logged with
        its traceback, then one line a minute while they go on, and one when a run succeeds again.
        """
        try:
            self.run_once()
        except Exception as exc:
            now = time.monotonic()
            self._failed_runs += 1
            if self._failed_runs == 1:
                log.exception("webhook delivery run failed; the next run retries")
                self._next_failure_line = now + self.FAILURE_LINE_SECONDS
            elif now >= self._next_failure_line:
                log.error("webhook delivery runs still failing", extra={"fields": {
                    "failed_runs": self._failed_runs, "error": (str(exc).splitlines() or [type(exc).__name__])[0]}})
                self._next_failure_line = now + self.FAILURE_LINE_SECONDS
        else:
            if self._failed_runs:
                log.warning("webhook delivery runs succeed again", extra={"fields": {"failed_runs": self._failed_runs}})
                self._failed_runs = 0

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
            session.mount("http://", _GuardedAdapter())
            session.mount("https://", _GuardedAdapter())
            self._sessions.append(session)
        return session
