"""Webhook events: the outbox rows written with each outcome, and how they are signed."""
from __future__ import annotations

import hashlib
import hmac

import jsoncodec
from models import WebhookEndpoint, WebhookEvent, isoformat, new_id, utcnow


def sign(secret: str, event_id: str, timestamp: str, body: bytes) -> str:
    """The X-Service-Webhook-Signature value: v1= + hex HMAC-SHA256 of id.timestamp.body."""
    message = event_id.encode() + b"." + timestamp.encode() + b"." + body
    return "v1=" + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def record_event(organization_id: int, environment: str, event_type: str, data_json: str) -> WebhookEvent:
    """Write the event (and its pending delivery when an endpoint is enabled); call in the outcome's transaction."""
    event_id = new_id()
    created_at = utcnow()
    head = jsoncodec.dumps({"id": event_id, "type": event_type, "created_at": isoformat(created_at),
                            "environment": environment})
    payload = head[:-1] + ',"data":' + data_json + "}"
    has_endpoint = (WebhookEndpoint.select(WebhookEndpoint.id)
                    .where((WebhookEndpoint.organization == organization_id)
                           & (WebhookEndpoint.environment == environment)
                           & (WebhookEndpoint.status == "enabled"))
                    .exists())
    return WebhookEvent.create(
        id=event_id, organization=organization_id, environment=environment, type=event_type,
        payload=payload, created_at=created_at,
        delivery_status="pending" if has_endpoint else "skipped",
        next_attempt_at=created_at if has_endpoint else None,
    )
