"""Webhook endpoints, one per organization and environment, and the checks on their addresses."""
from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import secrets
import socket
from collections.abc import Callable
from urllib.parse import urlsplit

import peewee as pw

from .. import audit
from .. import auth
from .. import text
from ..db import db
from ..models import Organization, WebhookEndpoint, WebhookEvent, isoformat, utcnow
from .signing import SCHEMES

SECRET_PREFIX = "whsec_"
SECRET_RANDOM_LENGTH = 32  # base62 characters, about 190 bits
STANDARD_SECRET_BYTES = 32  # Standard Webhooks asks for 24 to 64
MAX_URL_LENGTH = 2048


class WebhookError(ValueError):
    """An endpoint or delivery operation the service refuses; the message says why."""


def loggable_url(url: str) -> str:
    """An endpoint's URL for a log line or the audit trail: its query and fragment, where receivers
    often put a token, as "?…" and "#…"."""
    url, hash_sign, _ = url.partition("#")
    base, question, _ = url.partition("?")
    return base + ("?…" if question else "") + ("#…" if hash_sign else "")


def new_secret(scheme: str = "service") -> str:
    """A new secret for the signature scheme: whsec_ + base62 (service), whsec_ + base64 of 32 random
    bytes (standard: the specification's form, whose decoded bytes are the HMAC key)."""
    if scheme == "standard":
        return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(STANDARD_SECRET_BYTES)).decode()
    return SECRET_PREFIX + auth.random_base62(SECRET_RANDOM_LENGTH)


def endpoint_for(organization_id: int, environment: str) -> WebhookEndpoint | None:
    return WebhookEndpoint.get_or_none((WebhookEndpoint.organization == organization_id)
                                       & (WebhookEndpoint.environment == environment))


def down_endpoints(organization_id: int | None = None, environment: str | None = None) -> list[dict]:
    """The enabled endpoints known down (their receiver answered no attempt of the last round), with
    when the outage began and when the next probe goes out; read from the endpoints alone."""
    query = (WebhookEndpoint.select(WebhookEndpoint, Organization.slug).join(Organization)
             .where((WebhookEndpoint.status == "enabled") & WebhookEndpoint.down_since.is_null(False)))
    if organization_id is not None:
        query = query.where(WebhookEndpoint.organization == organization_id)
    if environment is not None:
        query = query.where(WebhookEndpoint.environment == environment)
    return [{"organization": endpoint.organization.slug, "environment": endpoint.environment,
             "url": loggable_url(endpoint.url), "down_since": isoformat(endpoint.down_since),
             "next_probe_at": isoformat(endpoint.down_until)}
            for endpoint in query.order_by(WebhookEndpoint.down_since)]


PRIVATE_SETTINGS = {"live": "WEBHOOK_ALLOW_PRIVATE_LIVE", "test": "WEBHOOK_ALLOW_PRIVATE_TEST"}


def must_be_public(environment: str) -> str:
    """The rule a refusal names: which endpoints must be public, and the operator's setting that lifts it."""
    return (f"{environment} endpoints must be public unless the operator allows private ones "
            f"({PRIVATE_SETTINGS[environment]})")


def check_public_host(host: str, port: int, resolve=socket.getaddrinfo, environment: str = "live") -> None:
    """Raise WebhookError unless every address the host resolves to is a public one.

    The message names the rule, never the addresses: a workspace user must not map internal names.
    """
    try:
        addresses = [ipaddress.ip_address(host)]
    except ValueError:
        try:
            infos = resolve(host, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError):
            raise WebhookError(f"the host {host} does not resolve") from None
        addresses = [ipaddress.ip_address(info[4][0].split("%", 1)[0]) for info in infos]
    if not addresses:
        raise WebhookError(f"the host {host} does not resolve")
    for address in addresses:
        kind = non_public_kind(address)
        if kind is not None:
            raise WebhookError(f"the host {host} resolves to {kind} address; {must_be_public(environment)}")


# IPv6 prefixes whose last 32 bits are an IPv4 address: NAT64's well-known one and IPv4-compatible.
NAT64 = ipaddress.ip_network("64:ff9b::/96")
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
# IPv4-translated (RFC 2765, SIIT): ::ffff:0:a.b.c.d; Python calls the whole range global.
IPV4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")
# NAT64 for one network (RFC 8215): where the IPv4 address sits depends on that network; never public.
LOCAL_NAT64 = ipaddress.ip_network("64:ff9b:1::/48")


def unmapped(address: ipaddress.IPv4Address | ipaddress.IPv6Address):
    """The IPv4 address an IPv6 address carries (mapped, translated, 6to4, NAT64, IPv4-compatible), else the address."""
    if address.version == 4:
        return address
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in NAT64 or address in IPV4_TRANSLATED or (address in IPV4_COMPATIBLE and int(address) > 1):  # :: and ::1 are themselves
        return ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF)
    return address


def is_public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """A global unicast address; an IPv6 address carrying an IPv4 one is as public as that."""
    return non_public_kind(address) is None


def non_public_kind(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """None for a public address, else what it is, for a refusal: "a loopback", "a private", ..."""
    if address in LOCAL_NAT64:
        return "a network-specific NAT64"
    address = unmapped(address)
    if address.is_global and not address.is_multicast:
        return None
    if address.is_loopback:
        return "a loopback"
    if address.is_link_local:
        return "a link-local"
    if address.is_multicast:
        return "a multicast"
    if address.is_private:
        return "a private"
    return "a reserved"


def private_allowed(environment: str, allow_private_live: bool, allow_private_test: bool) -> bool:
    """Whether the operator lets this environment's endpoints reach non-public addresses."""
    return allow_private_live if environment == "live" else allow_private_test


def validate_url(url: str, environment: str, allow_private_live: bool = False, allow_private_test: bool = False,
                 resolve=socket.getaddrinfo) -> str:
    """The URL if an endpoint of this environment may use it; otherwise raise WebhookError."""
    url = url.strip()
    if not url:
        raise WebhookError("the URL is empty")
    if len(url) > MAX_URL_LENGTH:
        raise WebhookError(f"the URL is longer than {MAX_URL_LENGTH} characters")
    if any(ord(char) <= 32 or ord(char) == 127 for char in url) or text.problem(url):
        raise WebhookError("the URL contains spaces, control characters or bidirectional controls")
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
    if not private_allowed(environment, allow_private_live, allow_private_test):
        check_public_host(parts.hostname, port or (443 if scheme == "https" else 80), resolve, environment)
    return url


def set_endpoint(organization_id: int, environment: str, url: str, *, actor: str, allow_private_live: bool = False,
                 allow_private_test: bool = False, resolve=socket.getaddrinfo,
                 signature: str | None = None,
                 then: Callable[[WebhookEndpoint, str], None] | None = None) -> tuple[WebhookEndpoint, str]:
    """Create or replace the organization's endpoint for an environment, with its audit event; return
    it and its new secret. `signature` is the scheme (service or standard); None keeps the
    endpoint's, or service for a new one. `then(endpoint, secret)` runs in the same transaction, as
    `keys.create`'s does."""
    if environment not in ("test", "live"):
        raise WebhookError("environment must be test or live")
    if signature is not None and signature not in SCHEMES:
        raise WebhookError(f"the signature must be {' or '.join(SCHEMES)}")
    url = validate_url(url, environment, allow_private_live, allow_private_test, resolve)
    now = utcnow()
    try:
        with db.atomic():
            endpoint = endpoint_for(organization_id, environment)
            scheme = signature or (endpoint.signature if endpoint is not None else "service")
            secret = new_secret(scheme)
            if endpoint is None:
                endpoint = WebhookEndpoint.create(organization=organization_id, environment=environment,
                                                  url=url, secret=secret, signature=scheme, created_at=now,
                                                  updated_at=now)
            else:
                endpoint.url, endpoint.secret, endpoint.signature, endpoint.updated_at = url, secret, scheme, now
                endpoint.next_secret, endpoint.overlap_ends_at = None, None  # a new secret ends any rotation
                endpoint.status, endpoint.disabled_reason = "enabled", None
                endpoint.down_since, endpoint.down_until = None, None  # a receiver set anew is tried at once
                endpoint.save()
            audit.record("endpoint.set", loggable_url(url), actor=actor, organization=organization_id,
                         environment=environment,
                         details={"signature": scheme} if scheme != "service" else None)  # named when not the default
            if then is not None:
                then(endpoint, secret)
    except pw.IntegrityError:
        raise WebhookError("the endpoint was changed at the same moment; try again") from None
    return endpoint, secret


DEFAULT_OVERLAP_HOURS = 24
MAX_OVERLAP_HOURS = 720  # 30 days


def signing_secrets(secret: str, next_secret: str | None, overlap_ends_at: dt.datetime | None,
                    now: dt.datetime) -> tuple[str, str | None]:
    """The secret a delivery signs X-Service-Webhook-Signature with, and the one for -Signature-Next
    (None outside a rotation's overlap); once the overlap ends the next secret is the only one."""
    if not next_secret:
        return secret, None
    if overlap_ends_at is not None and now < overlap_ends_at:
        return secret, next_secret
    return next_secret, None


def _settle(endpoint: WebhookEndpoint, now: dt.datetime) -> None:
    """Store an overlap that has run out as over: its next secret becomes the secret."""
    endpoint.secret, endpoint.next_secret = signing_secrets(endpoint.secret, endpoint.next_secret,
                                                            endpoint.overlap_ends_at, now)
    if endpoint.next_secret is None:
        endpoint.overlap_ends_at = None


def rotate_secret(organization_id: int, environment: str, *, actor: str,
                  overlap_hours: float = DEFAULT_OVERLAP_HOURS,
                  then: Callable[[WebhookEndpoint, str], None] | None = None) -> tuple[WebhookEndpoint, str]:
    """Issue the endpoint a new secret, with its audit event; return it.

    For `overlap_hours` deliveries carry signatures under both the current and the new secret, so the
    receiver can deploy the new one first; then the new one is the only one (0: at once). A rotation
    during an overlap replaces the next secret and starts the overlap again. `then(endpoint, secret)`
    runs in the same transaction, as `set_endpoint`'s does.
    """
    if not 0 <= overlap_hours <= MAX_OVERLAP_HOURS:
        raise WebhookError(f"the overlap must be from 0 to {MAX_OVERLAP_HOURS} hours")
    now = utcnow()
    with db.atomic():
        endpoint = endpoint_for(organization_id, environment)
        if endpoint is None:
            raise WebhookError(f"no webhook endpoint is set for {environment}")
        _settle(endpoint, now)
        secret = new_secret(endpoint.signature)
        if overlap_hours:
            endpoint.next_secret, endpoint.overlap_ends_at = secret, now + dt.timedelta(hours=overlap_hours)
            details = {"overlap_ends_at": isoformat(endpoint.overlap_ends_at)}
        else:
            endpoint.secret, endpoint.next_secret, endpoint.overlap_ends_at = secret, None, None
            details = {"overlap_ends_at": None}
        endpoint.updated_at = now
        endpoint.save(only=[WebhookEndpoint.secret, WebhookEndpoint.next_secret, WebhookEndpoint.overlap_ends_at,
                            WebhookEndpoint.updated_at])
        audit.record("endpoint.rotated", loggable_url(endpoint.url), actor=actor, organization=organization_id,
                     environment=environment, details=details)
        if then is not None:
            then(endpoint, secret)
    return endpoint, secret


def end_overlap(organization_id: int, environment: str, *, actor: str) -> WebhookEndpoint:
    """End a rotation's overlap now, with its audit event: the new secret becomes the only one."""
    now = utcnow()
    with db.atomic():
        endpoint = endpoint_for(organization_id, environment)
        if endpoint is None:
            raise WebhookError(f"no webhook endpoint is set for {environment}")
        if not endpoint.next_secret or endpoint.overlap_ends_at <= now:
            raise WebhookError(f"no secret rotation is in its overlap for {environment}")
        endpoint.secret, endpoint.next_secret, endpoint.overlap_ends_at = endpoint.next_secret, None, None
        endpoint.updated_at = now
        endpoint.save(only=[WebhookEndpoint.secret, WebhookEndpoint.next_secret, WebhookEndpoint.overlap_ends_at,
                            WebhookEndpoint.updated_at])
        audit.record("endpoint.overlap_ended", loggable_url(endpoint.url), actor=actor, organization=organization_id,
                     environment=environment)
    return endpoint


def remove_endpoint(organization_id: int, environment: str, *, actor: str) -> WebhookEndpoint:
    """Delete the endpoint, with its audit event; events stay, and pending ones wait for a new endpoint."""
    with db.atomic():
        endpoint = endpoint_for(organization_id, environment)
        if endpoint is None:
            raise WebhookError(f"no webhook endpoint is set for {environment}")
        endpoint.delete_instance()
        audit.record("endpoint.removed", loggable_url(endpoint.url), actor=actor, organization=organization_id,
                     environment=environment)
    return endpoint


def endpoint_join():
    """The condition joining an event to its organization's endpoint for the event's environment."""
    return ((WebhookEndpoint.organization == WebhookEvent.organization)
            & (WebhookEndpoint.environment == WebhookEvent.environment))
