"""Outbound HTTP for webhook deliveries, with its guards: one attempt's wall-clock deadline, the rule
that an endpoint's peer is a public address however DNS answers at connect time, the TLS trust, and
an attempt's failure in words for people."""
from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
import threading

import requests
import requests.certs
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from ..config import ConfigError
from .endpoints import WebhookError, must_be_public, non_public_kind


def _causes(exc: BaseException):
    """The exception and everything it wraps (requests wraps urllib3, which wraps the socket's error)."""
    seen, stack = set(), [exc]
    while stack:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        # `reason` is an exception on urllib3's errors but a string on ssl.SSLError ("CERTIFICATE_VERIFY_FAILED").
        reason = getattr(current, "reason", None)
        stack.extend([current.__cause__, current.__context__, reason if isinstance(reason, BaseException) else None,
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
    for cause in causes:
        if isinstance(cause, ssl.SSLCertVerificationError):
            detail = (cause.verify_message or "").rstrip(".")
            return f"TLS certificate verify failed ({detail})" if detail else "TLS certificate verify failed"
    if any(isinstance(cause, (requests.exceptions.SSLError, ssl.SSLError)) for cause in causes):
        return "TLS handshake failed"
    # Before the reset: RemoteDisconnected is a ConnectionResetError, but the peer closed cleanly.
    if any(isinstance(cause, http.client.RemoteDisconnected) for cause in causes):
        return "connection closed without an answer"
    if any(isinstance(cause, ConnectionResetError) for cause in causes):
        return "connection reset"
    if any(isinstance(cause, http.client.HTTPException) for cause in causes):
        return "the answer is not HTTP"
    if any(type(cause).__name__ == "ProtocolError" for cause in causes):
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


class Attempt:
    """One attempt's wall-clock deadline and peer rule, applied to every connection it uses.

    requests' timeout bounds each socket read, not the answer: a receiver trickling one byte at a
    time would hold a worker for ever. At the deadline a timer shuts the attempt's sockets down.
    """

    def __init__(self, seconds: float, public_only: bool, environment: str = "live"):
        self.public_only = public_only
        self.environment = environment
        self.expired = False
        self._connections: list = []
        self._lock = threading.Lock()
        self._finished = False
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> "Attempt":
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
            kind = non_public_kind(ipaddress.ip_address(sock.getpeername()[0].split("%", 1)[0]))
            if kind is not None:
                raise WebhookError(f"the connection reached {kind} address; {must_be_public(self.environment)}")
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


def trust_context(ca_bundle: str | None) -> ssl.SSLContext | None:
    """The TLS trust for deliveries: None for requests' default (certifi); with WEBHOOK_CA_BUNDLE,
    the system's and certifi's CAs plus the bundle's, so a private CA adds to the trust, never replaces it."""
    if ca_bundle is None:
        return None
    context = ssl.create_default_context()  # the system's CAs, certificate and host name checked
    context.load_verify_locations(cafile=requests.certs.where())
    try:
        context.load_verify_locations(cafile=ca_bundle)
    except (OSError, ssl.SSLError) as exc:  # Config read it at start; it changed since
        raise ConfigError(f"WEBHOOK_CA_BUNDLE {ca_bundle} cannot be loaded: {exc}") from None
    return context


class GuardedAdapter(HTTPAdapter):
    """A requests adapter whose connections submit to the current attempt, with the deliveries' TLS trust."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None):
        self.ssl_context = ssl_context  # read by init_poolmanager, which the base __init__ calls
        super().__init__()

    def init_poolmanager(self, *args, **kwargs):
        if self.ssl_context is not None:
            kwargs["ssl_context"] = self.ssl_context
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _HTTPConnectionPool, "https": _HTTPSConnectionPool}
