"""API keys as an organization manages them: creating and revoking, each with its audit record; listing."""
from __future__ import annotations

import datetime as dt
from typing import Callable

from . import audit
from . import auth
from . import text
from .db import db
from .models import ApiKey, Organization, SCOPES, isoformat, utcnow

ALL_SCOPES = "all"  # what `--scopes all` names: every scope in SCOPES


class ApiKeyError(ValueError):
    """A key that cannot be created as asked; the message says why."""


def parse_scopes(text: str) -> list[str]:
    """Comma-separated scopes, or `all` for every one."""
    if text.strip().lower() == ALL_SCOPES:
        return list(SCOPES)
    return [scope.strip() for scope in text.split(",") if scope.strip()]


# --- reading ---------------------------------------------------------------------------------------

def find(key_id: str, organization: Organization | None = None) -> ApiKey | None:
    """The key with this id (of this organization, when given), or None."""
    query = ApiKey.id == key_id[:40]
    if organization is not None:
        query &= ApiKey.organization == organization.id
    return ApiKey.get_or_none(query)


def of_organization(organization: Organization, environment: str | None = None, *,
                    newest_first: bool = False) -> list[ApiKey]:
    """The organization's keys (of one environment, when given), oldest first unless asked otherwise."""
    query = ApiKey.select().where(ApiKey.organization == organization.id)
    if environment is not None:
        query = query.where(ApiKey.environment == environment)
    return list(query.order_by(ApiKey.created_at.desc() if newest_first else ApiKey.created_at))


def status(key: ApiKey, now: dt.datetime | None = None) -> str:
    """active, expired or revoked (a revoked key says so even when it has expired since)."""
    if key.revoked_at is not None:
        return "revoked"
    if key.expires_at is not None and key.expires_at <= (now or utcnow()):
        return "expired"
    return "active"


def live_count() -> int:
    """How many live keys can still be used (neither revoked nor expired)."""
    return (ApiKey.select()
            .where((ApiKey.environment == "live") & ApiKey.revoked_at.is_null()
                   & (ApiKey.expires_at.is_null() | (ApiKey.expires_at > utcnow())))
            .count())


# --- writing ---------------------------------------------------------------------------------------

def create(organization: Organization, environment: str, scopes: list[str], *, secret: bytes, name: str = "",
           expires_at: dt.datetime | None = None, actor: str,
           then: Callable[[ApiKey, str], None] | None = None) -> tuple[ApiKey, str]:
    """A new key and its plain value (shown once, never stored), recorded as `key.created`.

    `then(key, plain)` runs in the same transaction: a caller that must show the key keeps it there,
    so that no key is made that is never shown.
    """
    if len(name) > 200:
        raise ApiKeyError("name must be at most 200 characters")
    if text.problem(name):
        raise ApiKeyError("name " + text.problem(name))
    if expires_at is not None and expires_at <= utcnow():
        raise ApiKeyError(f"expires_at {isoformat(expires_at)} is not in the future; such a key could never be used")
    try:
        with db.atomic():
            key, plain = auth.create_key(organization, environment, scopes, secret, name=name,
                                         expires_at=expires_at)
            audit.record("key.created", key.id, actor=actor, organization=organization, environment=key.environment,
                         details={"name": key.name, "scopes": sorted(key.scope_set),
                                  "expires_at": isoformat(key.expires_at)})
            if then is not None:
                then(key, plain)
    except ValueError as exc:
        raise ApiKeyError(str(exc)) from None
    return key, plain


def revoke(key: ApiKey, *, actor: str) -> bool:
    """Revoke the key, recorded as `key.revoked`; False when it was revoked already (nothing changes)."""
    now = utcnow()
    with db.atomic():
        revoked = ApiKey.update(revoked_at=now).where((ApiKey.id == key.id) & ApiKey.revoked_at.is_null()).execute()
        if revoked:
            audit.record("key.revoked", key.id, actor=actor, organization=key.organization_id,
                         environment=key.environment, details={"name": key.name})
    if revoked:
        key.revoked_at = now
    return bool(revoked)
