"""Organizations: creating and changing them, each change with its audit record; and finding them."""
from __future__ import annotations

import re

import peewee as pw

from . import audit
from . import text
from .db import db
from .models import Organization
from . import accounts

STATUSES = ("active", "suspended")
SLUG = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
MAX_NAME = 200
MAX_CAPACITY = 2**31 - 1  # the capacity columns are 32-bit integers on PostgreSQL


class OrganizationError(ValueError):
    """An organization that cannot be created or changed as asked; the message says why."""


class _Unchanged:
    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED = _Unchanged()  # a capacity left as it is (None means unlimited, or the sandbox default)


# --- reading ---------------------------------------------------------------------------------------

def find(slug: str) -> Organization | None:
    """The organization with this slug, or None."""
    return Organization.get_or_none(Organization.slug == slug)


def listed() -> list[Organization]:
    """Every organization, by slug."""
    return list(Organization.select().order_by(Organization.slug))


def free_slug(name: str) -> str:
    """A slug derived from the name: the first of `acme-corp`, `acme-corp-2`, ... not taken."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:48] or "org"
    candidate, number = slug, 2
    while Organization.select().where(Organization.slug == candidate).exists():
        candidate, number = f"{slug}-{number}", number + 1
    return candidate


# --- writing ---------------------------------------------------------------------------------------

def _check_capacity(name: str, value) -> None:
    if value is None or value is UNCHANGED:
        return
    if type(value) is not int or not 0 <= value <= MAX_CAPACITY:
        raise OrganizationError(f"{name} must be a whole number from 0 to {MAX_CAPACITY}, or none")


def create(name: str, *, slug: str | None = None, entitled: bool = True, live_capacity: int | None = None,
           actor: str) -> Organization:
    """A new active organization (its slug derived from the name when not given), with `org.created`."""
    if not 0 < len(name.strip()) <= MAX_NAME:
        raise OrganizationError(f"name must be 1 to {MAX_NAME} characters")
    if text.problem(name):
        raise OrganizationError("name " + text.problem(name))
    slug = slug or free_slug(name)
    if not SLUG.fullmatch(slug):
        raise OrganizationError("slug must be lowercase letters, digits and dashes")
    _check_capacity("live capacity", live_capacity)
    try:
        with db.atomic():
            organization = Organization.create(slug=slug, name=name, entitled=entitled, live_capacity=live_capacity)
            audit.record("org.created", organization.slug, actor=actor, organization=organization,
                         details={"name": organization.name, "entitled": organization.entitled,
                                  "live_capacity": live_capacity})
    except pw.IntegrityError:
        raise OrganizationError(f"an organization with slug {slug} already exists") from None
    return organization


def update(organization: Organization, *, status: str | None = None, entitled: bool | None = None,
           live_capacity=UNCHANGED, test_capacity=UNCHANGED, actor: str) -> dict:
    """Change what is given; return the changes as {field: new value}, recorded as `org.updated`.

    A change of status signs the organization's people out: on suspension at once and for good, on
    reactivation any session left from before the suspension is ended too, never revived.
    """
    if status is not None and status not in STATUSES:
        raise OrganizationError("status must be active or suspended")
    _check_capacity("live capacity", live_capacity)
    _check_capacity("test capacity", test_capacity)
    before = organization.to_dict()
    if status is not None:
        organization.status = status
    if entitled is not None:
        organization.entitled = entitled
    if live_capacity is not UNCHANGED:
        organization.live_capacity = live_capacity
    if test_capacity is not UNCHANGED:
        organization.test_capacity = test_capacity
    changes = {name: value for name, value in organization.to_dict().items() if before.get(name) != value}
    with db.atomic():
        organization.save()
        if "status" in changes:
            accounts.end_sessions_of(organization.id)
        if changes:
            audit.record("org.updated", organization.slug, actor=actor, organization=organization, details=changes)
    return changes


def suspend(organization: Organization, *, actor: str) -> dict:
    """Suspend the organization: its keys and its people's sessions stop working at once."""
    return update(organization, status="suspended", actor=actor)


def reactivate(organization: Organization, *, actor: str) -> dict:
    """Make a suspended organization active again (its people sign in anew)."""
    return update(organization, status="active", actor=actor)
