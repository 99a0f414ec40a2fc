"""Signing webhook deliveries and verifying them, as a receiver does (docs/webhooks.md)."""
from __future__ import annotations

import base64
import hashlib
import hmac
import re
import time

SIGNATURE_VERSION = "v1"
SECRET_PREFIX = "whsec_"
SCHEMES = ("service", "standard")  # service: X-Service-Webhook-*; standard: Standard Webhooks
DEFAULT_TOLERANCE_SECONDS = 300


class InvalidSignature(ValueError):
    """A delivery whose headers, signature or timestamp do not verify."""


def sign(secret: str, event_id: str, timestamp: str, body: bytes) -> str:
    """The X-Service-Webhook-Signature value: v1= + hex HMAC-SHA256 of id.timestamp.body."""
    message = event_id.encode() + b"." + timestamp.encode() + b"." + body
    return "v1=" + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def standard_key(secret: str) -> bytes:
    """A Standard Webhooks secret's HMAC key: the bytes whsec_<base64> encodes."""
    encoded = secret.removeprefix(SECRET_PREFIX)
    return base64.b64decode(encoded + "=" * (-len(encoded) % 4))


def standard_sign(secret: str, event_id: str, timestamp: str, body: bytes) -> str:
    """A Standard Webhooks signature: v1, + base64 HMAC-SHA256 of id.timestamp.body under the decoded secret."""
    message = event_id.encode() + b"." + timestamp.encode() + b"." + body
    return "v1," + base64.b64encode(hmac.new(standard_key(secret), message, hashlib.sha256).digest()).decode()


def signed_headers(secret: str, event_id: str, body: bytes, unix_seconds: int,
                   next_secret: str | None = None, scheme: str = "service") -> dict[str, str]:
    """The X-Service-Webhook-* headers of one delivery attempt; during a rotation's overlap, also the
    signature under the next secret (X-Service-Webhook-Signature-Next).

    With the "standard" scheme, the Standard Webhooks headers instead, both signatures
    space-separated in webhook-signature during an overlap (the specification's way).
    """
    timestamp = str(unix_seconds)
    if scheme == "standard":
        signatures = [standard_sign(key, event_id, timestamp, body) for key in (secret, next_secret) if key]
        return {"webhook-id": event_id, "webhook-timestamp": timestamp, "webhook-signature": " ".join(signatures)}
    headers = {
        "X-Service-Webhook-Id": event_id,
        "X-Service-Webhook-Timestamp": timestamp,
        "X-Service-Webhook-Signature": sign(secret, event_id, timestamp, body),
    }
    if next_secret:
        headers["X-Service-Webhook-Signature-Next"] = sign(next_secret, event_id, timestamp, body)
    return headers


def verify(secret: str, headers, body: bytes, tolerance: int = DEFAULT_TOLERANCE_SECONDS,
           now: float | None = None) -> str:
    """Check a received delivery (headers: any mapping, body: the raw bytes); return the event id or raise InvalidSignature.

    Either signature may match: -Next carries the secret a rotation issued, before it becomes the only one.
    """
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
    expected = sign(secret, event_id, timestamp, body).encode()
    candidates = (signature, lowered.get("x-service-webhook-signature-next") or "")
    if not any([hmac.compare_digest(expected, candidate.encode()) for candidate in candidates]):  # both compared
        raise InvalidSignature("signature does not match")
    return event_id
