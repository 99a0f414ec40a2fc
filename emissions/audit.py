"""The audit trail of administrative actions, written by the CLI and the workspace."""
from __future__ import annotations

import json

import peewee as pw

from .models import AuditEvent, Organization

CLI_ACTOR = "cli"


def record(action: str, target: str, *, actor: str = CLI_ACTOR, organization: Organization | None = None,
           environment: str | None = None, details: dict | None = None) -> AuditEvent:
    """Write one audit event; call it inside the transaction of the change it records."""
    return AuditEvent.create(organization=organization, actor=actor[:300], action=action, target=str(target)[:300],
                             environment=environment,
                             details=json.dumps(details, sort_keys=True, default=str) if details else None)


def recent(organization: Organization | None = None, limit: int = 50) -> list[AuditEvent]:
    """The newest events first, of one organization or of all."""
    query = AuditEvent.select(AuditEvent, Organization).join(Organization, join_type=pw.JOIN.LEFT_OUTER)
    if organization is not None:
        query = query.where(AuditEvent.organization == organization)
    return list(query.order_by(AuditEvent.created_at.desc(), AuditEvent.id.desc()).limit(limit))
