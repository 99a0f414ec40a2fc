"""The service inside an integrator's own tests: `Sandbox()` is the real application on a temporary
SQLite file, with the shipped factor library, an organization, a customer and a test key.

No shortcuts: every request goes through `create_app` as in production (validation, idempotency,
errors, signatures). Nothing reaches a network: no live key is ever made, the webhook deliverer
never runs, and events() hands over what a receiver would get instead. See docs/testing.md.
"""
from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from waitress import wasyncore

from . import models
from . import organizations
from . import sandbox
from .db import db
from .webhooks import delivery as webhook_delivery
from .webhooks import endpoints as webhook_endpoints
from .webhooks import signing as webhook_signing
from .app import create_app
from .config import Config
from .serving.adaptations import close_listeners
from .serving.server import create_server

ACTOR = "sandbox"
ENVIRONMENT = sandbox.ENVIRONMENT
ORGANIZATION_SLUG = sandbox.SLUG
DEFAULT_CUSTOMER = sandbox.DEMO_CUSTOMER
ALL_SCOPES = sandbox.ALL_SCOPES
# A reserved name (RFC 2606) that never resolves: set so that events are pending, never sent.
WEBHOOK_PLACEHOLDER_URL = "https://receiver.invalid/webhooks"


# --- every call into the rest of the package, in one place --------------------------------------

def _open_app(config: Config):
    """The application as `emissions serve` builds it (binds and migrates the database)."""
    return create_app(config)


def _seed(customer_reference: str, customer_name: str, secret_key: str | None) -> tuple[models.Organization, str]:
    """The organization, factor library, customer and test key, as `emissions quickstart` seeds them."""
    return sandbox.seed(actor=ACTOR, secret_key=secret_key, key_name="sandbox", customer_reference=customer_reference,
                        customer_name=customer_name)


def _create_organization(slug: str, name: str) -> models.Organization:
    return organizations.create(name, slug=slug, actor=ACTOR)


def _create_customer(organization: models.Organization, reference: str, name: str,
                     country: str | None) -> None:
    sandbox.add_customer(organization, reference, name, country, actor=ACTOR)


def _create_test_key(organization: models.Organization, scopes: list[str], name: str, secret_key: str | None) -> str:
    return sandbox.new_test_key(organization, actor=ACTOR, secret_key=secret_key, name=name, scopes=scopes)


def _set_test_endpoint(organization: models.Organization) -> None:
    # A placeholder that never resolves: the sandbox's checks are the local ones, nothing is delivered.
    webhook_endpoints.set_endpoint(organization.id, ENVIRONMENT, WEBHOOK_PLACEHOLDER_URL, actor=ACTOR,
                                   allow_private_test=True)


def _endpoint_secret(organization: models.Organization) -> str:
    return webhook_endpoints.endpoint_for(organization.id, ENVIRONMENT).secret


def _outbox(organization: models.Organization) -> list[tuple[str, str, str]]:
    """(id, type, payload) of the organization's webhook events, oldest first."""
    event = models.WebhookEvent
    rows = (event.select(event.id, event.type, event.created_at, event.environment, event.stored_payload,
                         event.calculation_id)
            .where(event.organization == organization.id)
            .order_by(event.created_at, event.id))
    return [(row.id, row.type, row.payload) for row in rows]


def _delivery_headers(secret: str, event_id: str, body: bytes, unix_seconds: int) -> dict[str, str]:
    """The headers of a delivery attempt, as webhooks.Deliverer.send makes them."""
    return {"Content-Type": "application/json", "User-Agent": webhook_delivery.USER_AGENT,
            **webhook_signing.signed_headers(secret, event_id, body, unix_seconds)}


def _create_server(app, threads: int):
    """A Waitress server as `emissions serve` makes it, on a free loopback port."""
    return create_server(app, "127.0.0.1", 0, threads)


def _stop_accepting(server) -> None:
    close_listeners(server)


def _close_database() -> None:
    if db.obj is not None:  # None when the app could not be built
        db.close()


# --- the sandbox -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Event:
    """A webhook event as a receiver would get it: the exact body bytes and the signed headers."""

    id: str
    type: str
    headers: dict[str, str]
    body: bytes

    @property
    def payload(self) -> dict:
        """The body, parsed."""
        return json.loads(self.body)


class Sandbox:
    """The service on a temporary SQLite file: the real WSGI app in `.app`, a test key in `.key`.

    One sandbox at a time in a process (the service binds one database per process); close() it,
    or use it as a context manager.
    """

    _open: Sandbox | None = None

    def __init__(self, customer_reference: str = DEFAULT_CUSTOMER, customer_name: str = "Demo Customer Ltd",
                 **settings) -> None:
        if Sandbox._open is not None:
            raise RuntimeError("another Sandbox is open in this process; close() it first")
        if "database_url" in settings:
            raise ValueError("the sandbox makes its own database; database_url cannot be set")
        self._directory = Path(tempfile.mkdtemp(prefix="emissions-sandbox-"))
        try:
            # Its test endpoint points at a receiver on this machine: private addresses are allowed.
            self.config = Config(**{"log_requests": False, "webhook_allow_private_test": True, **settings,
                                    "database_url": f"sqlite:///{self._directory / 'sandbox.sqlite3'}"})
            self.app = _open_app(self.config)
            self._organization, self.key = _seed(customer_reference, customer_name, self.config.secret_key)
            self.customer = customer_reference
            _set_test_endpoint(self._organization)
        except BaseException:
            _close_database()
            shutil.rmtree(self._directory, ignore_errors=True)
            raise
        Sandbox._open = self

    def headers(self, idempotency_key: str | None = None, key: str | None = None) -> dict[str, str]:
        """The Authorization header of the sandbox's key (or `key`), and an Idempotency-Key if given."""
        headers = {"Authorization": f"Bearer {key or self.key}"}
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        return headers

    def add_customer(self, reference: str, name: str | None = None, country: str | None = None) -> str:
        """Add a customer in the test environment; return its reference."""
        _create_customer(self._organization, reference, name or reference, country)
        return reference

    def add_key(self, scopes=ALL_SCOPES, environment: str = ENVIRONMENT, name: str = "sandbox") -> str:
        """A new test key with these scopes (every scope by default); the sandbox never makes a live key."""
        if environment != ENVIRONMENT:
            raise ValueError("the sandbox makes test keys only; a live key is never made in it")
        return _create_test_key(self._organization, list(scopes), name, self.config.secret_key)

    @property
    def webhook_secret(self) -> str:
        """The secret of the test webhook endpoint, which signs every event."""
        return _endpoint_secret(self._organization)

    def events(self, type: str | None = None) -> list[Event]:
        """The webhook events the outbox holds, oldest first (of one type if given), each signed now
        with the endpoint's secret as a delivery attempt would be."""
        secret = self.webhook_secret
        now = int(time.time())
        found = []
        for event_id, event_type, payload in _outbox(self._organization):
            if type is None or event_type == type:
                body = payload.encode()
                found.append(Event(event_id, event_type, _delivery_headers(secret, event_id, body, now), body))
        return found

    @contextlib.contextmanager
    def serve(self) -> Iterator[str]:
        """Serve the app with Waitress on a free 127.0.0.1 port; yield its base URL."""
        server = _create_server(self.app, self.config.serving_threads)
        stop_accepting, accepting_stopped, stopping = threading.Event(), threading.Event(), threading.Event()

        def loop() -> None:
            # Waitress's own loop, a short poll at a time so that it can be told to stop. Every
            # socket is closed in this thread, never under a poll that is using it.
            try:
                while not stopping.is_set():
                    if stop_accepting.is_set() and not accepting_stopped.is_set():
                        _stop_accepting(server)
                        accepting_stopped.set()
                    wasyncore.loop(timeout=0.05, use_poll=True, map=server._map, count=1)
            finally:
                accepting_stopped.set()
                wasyncore.close_all(server._map, ignore_all=True)

        thread = threading.Thread(target=loop, name="emissions-sandbox-server", daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.effective_port}"
        finally:
            stop_accepting.set()
            accepting_stopped.wait(10)
            server.task_dispatcher.shutdown()  # the requests in hand are answered while the loop still runs
            stopping.set()
            thread.join(timeout=10)

    def close(self) -> None:
        """Close the database and remove the temporary directory."""
        if Sandbox._open is self:
            Sandbox._open = None
            _close_database()
        shutil.rmtree(self._directory, ignore_errors=True)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
