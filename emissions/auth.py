"""API keys: generation, keyed hashing, a short-lived lookup cache and the access checks."""
from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
import string
import threading
import time
from dataclasses import dataclass

import peewee as pw

from .errors import AuthenticationError, PermissionError_
from . import store
from .db import db
from .models import ApiKey, InstanceSecret, Organization, SCOPES, utcnow

BASE62 = string.digits + string.ascii_letters
KEY_RANDOM_LENGTH = 40  # base62 characters, about 238 bits
KEY_PREFIXES = {"test": "service_test_", "live": "service_live_"}
KEY_FORMAT = re.compile(r"^service_(test|live)_[0-9A-Za-z]{32,200}\Z")


def random_base62(length: int) -> str:
    return "".join(secrets.choice(BASE62) for _ in range(length))


def instance_secret(configured: str | None = None) -> bytes:
    """SECRET_KEY if set, else the installation's own secret, created on first use."""
    if configured:
        return configured.encode()
    row = InstanceSecret.get_or_none(InstanceSecret.name == "api_key_hash")
    if row is None:
        try:
            with db.atomic():
                row = InstanceSecret.create(name="api_key_hash", value=secrets.token_hex(32))
        except pw.IntegrityError:  # another process created it first
            row = InstanceSecret.get(InstanceSecret.name == "api_key_hash")
    return row.value.encode()


def hash_key(secret: bytes, plain_key: str) -> str:
    """The keyed hash stored in place of the key."""
    return hmac.new(secret, plain_key.encode(), hashlib.sha256).hexdigest()


def create_key(organization: Organization, environment: str, scopes: list[str], secret: bytes,
               name: str = "", expires_at=None) -> tuple[ApiKey, str]:
    """Make the key's row in the caller's transaction; the plain value is returned once and never stored.
    keys.create is the write an organization's key is made by (with its audit record)."""
    unknown = sorted(set(scopes) - set(SCOPES))
    if unknown:
        raise ValueError(f"unknown scope(s): {', '.join(unknown)}; known: {', '.join(SCOPES)}")
    if not scopes:
        raise ValueError("a key needs at least one scope")
    if environment not in KEY_PREFIXES:
        raise ValueError("environment must be test or live")
    plain = KEY_PREFIXES[environment] + random_base62(KEY_RANDOM_LENGTH)
    key = ApiKey.create(
        id="key_" + random_base62(24),
        organization=organization,
        environment=environment,
        key_hash=hash_key(secret, plain),
        prefix=plain[: len(KEY_PREFIXES[environment]) + 4],
        name=name,
        scopes=" ".join(sorted(set(scopes))),
        expires_at=expires_at,
    )
    return key, plain


@dataclass(frozen=True)
class Principal:
    """Who is calling: the key and its organization, as read at most KEY_CACHE_SECONDS ago."""

    key_id: str
    organization_id: int
    organization_slug: str
    environment: str
    scopes: frozenset
    expires_at: object
    revoked: bool
    organization_active: bool
    entitled: bool


LAST_USED_SECONDS = 60


class KeyStore:
    """Looks keys up by hash, caching each answer (found or not) for a short time; notes when a key
    was last used, writing it at most once a minute per key and process."""

    def __init__(self, secret: bytes, ttl_seconds: float, clock=time.monotonic):
        self.secret = secret
        self.ttl = ttl_seconds
        self.clock = clock
        self._cache: dict[str, tuple[float, Principal | None]] = {}
        self._lock = threading.Lock()
        self._last_written: dict[str, float] = {}

    def note_use(self, key_id: str) -> None:
        """Write api_key.last_used_at unless this process wrote it for the key within the minute.

        A dictionary look-up on nearly every request; one UPDATE of its own (never inside a
        calculation's transaction) once a minute. A failed write is logged, never the request's failure.
        """
        now = self.clock()
        last = self._last_written.get(key_id)
        if last is not None and now - last < LAST_USED_SECONDS:
            return
        with self._lock:
            last = self._last_written.get(key_id)
            if last is not None and now - last < LAST_USED_SECONDS:
                return
            if len(self._last_written) > 100_000:  # only valid keys get here; a bound all the same
                self._last_written.clear()
            self._last_written[key_id] = now
        try:
            store.note_key_use(key_id, utcnow())
        except Exception:  # the database may be busy or gone; the request itself goes on or fails on its own
            logging.getLogger("emissions.error").warning("could not note the use of key %s", key_id, exc_info=True)

    def lookup(self, plain_key: str) -> Principal | None:
        digest = hash_key(self.secret, plain_key)
        now = self.clock()
        cached = self._cache.get(digest)
        if cached and now - cached[0] < self.ttl:
            return cached[1]
        principal = self._load(digest)
        with self._lock:
            if len(self._cache) > 10_000:  # unknown keys must not grow memory without bound
                self._cache.clear()
            self._cache[digest] = (now, principal)
        return principal

    @staticmethod
    def _load(digest: str) -> Principal | None:
        row = (ApiKey.select(ApiKey, Organization)
               .join(Organization)
               .where(ApiKey.key_hash == digest)
               .first())
        if row is None:
            return None
        org = row.organization
        return Principal(
            key_id=row.id, organization_id=org.id, organization_slug=org.slug,
            environment=row.environment, scopes=row.scope_set, expires_at=row.expires_at,
            revoked=row.revoked_at is not None, organization_active=org.status == "active",
            entitled=org.entitled,
        )


def parse_bearer(header: str | None) -> str:
    """The key from 'Authorization: Bearer <key>', or AuthenticationError."""
    if not header:
        raise AuthenticationError("Missing Authorization header; send 'Authorization: Bearer <API key>'.")
    scheme, _, value = header.strip().partition(" ")
    value = value.strip()
    if scheme.lower() != "bearer" or not value:
        raise AuthenticationError("Authorization must be 'Bearer <API key>'.")
    if not KEY_FORMAT.match(value):
        raise AuthenticationError("The API key is not valid.")
    return value


def authenticate(store: KeyStore, header: str | None) -> Principal:
    """401s first, then the organization's 403s, in the documented order."""
    plain = parse_bearer(header)
    principal = store.lookup(plain)
    if principal is None or not plain.startswith(KEY_PREFIXES[principal.environment]):
        raise AuthenticationError("The API key is not valid.")
    if principal.revoked:
        raise AuthenticationError("The API key was revoked.", code="API_KEY_REVOKED")
    if principal.expires_at is not None and principal.expires_at <= utcnow():
        raise AuthenticationError("The API key has expired.", code="API_KEY_EXPIRED")
    if not principal.organization_active:
        raise PermissionError_("The organization is not active.", code="ORGANIZATION_NOT_ACTIVE")
    if not principal.entitled:
        raise PermissionError_("The organization is not entitled to the embedded API.",
                               code="FEATURE_NOT_ENTITLED")
    store.note_use(principal.key_id)
    return principal


def require_scopes(principal: Principal, any_of: tuple = (), all_of: tuple = ()) -> None:
    """INSUFFICIENT_SCOPE unless the key holds all of `all_of` and one of `any_of`."""
    missing = [scope for scope in all_of if scope not in principal.scopes]
    if any_of and not principal.scopes.intersection(any_of):
        missing.append(" or ".join(any_of))
    if missing:
        raise PermissionError_(f"The API key lacks the scope {', '.join(missing)}.", code="INSUFFICIENT_SCOPE")
