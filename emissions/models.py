"""Peewee models: the tables, each described once, with their query helpers and views."""
from __future__ import annotations

import datetime as dt
import json
import uuid
from decimal import Decimal

import peewee as pw

from . import clock, jsoncodec
from .db import db
from .fields import ExactDecimalField, TimestampField

ENVIRONMENTS = ("test", "live")
SCOPES = ("emissions:calculate", "emissions:read", "customers:read", "customer-analytics:read")
MODES = ("ROAD", "SEA", "AIR", "RAIL")  # a factor's transport modes; the v1 calculation takes ROAD, SEA, AIR
# A hub factor's mode and its hub types: a shipment's hubs take factors of their own.
HUB = "HUB"
HUB_TYPES = ("transshipment", "storage_and_transshipment", "warehouse", "liquid_bulk_terminal", "container_terminal")

# The columns a void writes (migration 0019), null on a new record but for `replaces`.
VOID_COLUMNS = ("voided_at", "void_reason", "voided_by", "void_key", "replaced_by", "replaces")

utcnow = clock.now  # the service's one clock (emissions/clock.py): records, pages and commands read it


def new_id() -> str:
    """A random (version 4) UUID."""
    return str(uuid.uuid4())


def isoformat(value: dt.datetime | None) -> str | None:
    """RFC 3339 with milliseconds and a Z, the way every timestamp leaves the service."""
    if value is None:
        return None
    return value.astimezone(dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class BaseModel(pw.Model):
    class Meta:
        database = db
        legacy_table_names = False

    def attributes(self, *names: str) -> dict:
        """The named attributes as they are, for a view that shows them unchanged."""
        return {name: getattr(self, name) for name in names}


class InstanceSecret(BaseModel):
    """The keyed-hash secret, generated once per installation unless SECRET_KEY is set."""

    name = pw.CharField(primary_key=True, max_length=40)
    value = pw.CharField(max_length=128)


class Organization(BaseModel):
    slug = pw.CharField(unique=True, max_length=64)
    name = pw.CharField(max_length=200)
    status = pw.CharField(max_length=16, default="active")  # active | suspended
    entitled = pw.BooleanField(default=True)
    live_capacity = pw.IntegerField(null=True)  # None: unlimited
    test_capacity = pw.IntegerField(null=True)  # None: the sandbox default
    created_at = TimestampField(default=utcnow)

    def to_dict(self) -> dict:
        """The organization's columns as the command line prints them: all but its id and creation."""
        return self.attributes("slug", "name", "status", "entitled", "live_capacity", "test_capacity")


class ApiKey(BaseModel):
    id = pw.CharField(primary_key=True, max_length=40)  # "key_" + random, safe to log
    organization = pw.ForeignKeyField(Organization, backref="api_keys", on_delete="CASCADE")
    environment = pw.CharField(max_length=4)
    key_hash = pw.CharField(unique=True, max_length=64)
    prefix = pw.CharField(max_length=24)  # "service_test_AbCd", for people to recognise a key
    name = pw.CharField(max_length=200, default="")
    scopes = pw.TextField()  # space-separated
    expires_at = TimestampField(null=True)
    revoked_at = TimestampField(null=True)
    created_at = TimestampField(default=utcnow)
    last_used_at = TimestampField(null=True)  # written at most once a minute per key (auth.KeyStore)

    @property
    def scope_set(self) -> frozenset[str]:
        return frozenset(self.scopes.split())

    def to_dict(self) -> dict:
        return {
            **self.attributes("id", "name", "prefix", "environment"),
            "scopes": sorted(self.scope_set),
            "expires_at": isoformat(self.expires_at),
            "revoked": self.revoked_at is not None,
            "created_at": isoformat(self.created_at),
        }


class Factor(BaseModel):
    """One version of a governed emission factor, global (organization null) or private."""

    reference = pw.CharField(max_length=120, index=True)
    version = pw.IntegerField()
    organization = pw.ForeignKeyField(Organization, null=True, backref="factors", on_delete="CASCADE")
    status = pw.CharField(max_length=16)  # draft | active | superseded | retired
    mode = pw.CharField(max_length=8)
    value = ExactDecimalField()  # kgCO2e per tkm, well-to-wheel
    ttw_value = ExactDecimalField(null=True)
    wtt_value = ExactDecimalField(null=True)
    name = pw.CharField(max_length=200)
    source = pw.CharField(max_length=300)
    region = pw.CharField(max_length=64, null=True)
    valid_from = pw.DateField(null=True)
    valid_to = pw.DateField(null=True)
    created_at = TimestampField(default=utcnow)
    # Where the figures come from (migration 0006): the publication's row ids of the two parts,
    # whether an AIR factor includes radiative forcing, and the publication itself.
    ttw_id = pw.CharField(max_length=64, null=True)
    wtt_id = pw.CharField(max_length=64, null=True)
    radiative_forcing = pw.BooleanField(null=True)
    publication_title = pw.CharField(max_length=300, null=True)
    publication_publisher = pw.CharField(max_length=200, null=True)
    publication_year = pw.IntegerField(null=True)
    publication_licence = pw.CharField(max_length=100, null=True)
    hub_type = pw.CharField(max_length=32, null=True)  # shipments (migration 0010): a HUB factor's hub type

    class Meta:
        indexes = ((("reference", "version"), True),)

    @property
    def unit(self) -> str:
        """kgCO2e per tonne handled for a hub factor, per tonne-km for the others."""
        return "kgCO2e/t" if self.mode == HUB else "kgCO2e/tkm"

    def applies_to(self, mode: str, activity_date: dt.date) -> str | None:
        """None when the factor applies, else the reason it does not."""
        if self.mode != mode:
            return f"factor {self.reference} is for mode {self.mode}, not {mode}"
        if self.valid_from and activity_date < self.valid_from:
            return f"activity_date {activity_date} is before factor {self.reference} is valid ({self.valid_from})"
        if self.valid_to and activity_date > self.valid_to:
            return f"activity_date {activity_date} is after factor {self.reference} stopped being valid ({self.valid_to})"
        return None

    def lineage(self) -> dict:
        """The safe lineage a calculation shows: no ids, no owner, no numeric value."""
        return {
            **self.attributes("reference", "version", "name", "source", "region", "mode", "unit"),
            "valid_from": self.valid_from.isoformat() if self.valid_from else None,
            "valid_to": self.valid_to.isoformat() if self.valid_to else None,
            "radiative_forcing": self.radiative_forcing,
            **({"hub_type": self.hub_type} if self.mode == HUB else {}),
        }

    @property
    def source_row(self) -> dict | None:
        """The publication's row ids of the two parts, or None when none is recorded."""
        if self.ttw_id is None and self.wtt_id is None:
            return None
        return {"ttw_id": self.ttw_id, "wtt_id": self.wtt_id}

    @property
    def publication(self) -> dict | None:
        if self.publication_title is None:
            return None
        return {"title": self.publication_title, "publisher": self.publication_publisher,
                "year": self.publication_year, "licence": self.publication_licence}

    def to_dict(self) -> dict:
        """The factor as the command line prints it: the lineage with its status, its figures as text
        and its owner's slug, in the command line's order."""
        members = {**self.lineage(), "status": self.status, "value": str(self.value),
                   "ttw": None if self.ttw_value is None else str(self.ttw_value),
                   "wtt": None if self.wtt_value is None else str(self.wtt_value),
                   "source_row": self.source_row, "publication": self.publication,
                   "organization": self.organization.slug if self.organization_id else None}
        return {name: members[name] for name in FACTOR_ON_THE_COMMAND_LINE if name in members}


# The order of a factor's members on the command line; hub_type only for a hub factor, as in its lineage.
FACTOR_ON_THE_COMMAND_LINE = ("reference", "version", "status", "mode", "value", "ttw", "wtt", "source_row",
                              "radiative_forcing", "publication", "unit", "hub_type", "name", "source", "region",
                              "valid_from", "valid_to", "organization")


class Customer(BaseModel):
    organization = pw.ForeignKeyField(Organization, backref="customers", on_delete="CASCADE")
    environment = pw.CharField(max_length=4)
    reference = pw.CharField(max_length=120)
    name = pw.CharField(max_length=200)
    status = pw.CharField(max_length=16, default="active")  # active | suspended | archived
    country_code = pw.CharField(max_length=2, null=True)
    created_at = TimestampField(default=utcnow)

    class Meta:
        indexes = ((("organization", "environment", "reference"), True),)

    def to_dict(self, analytics: dict | None = None) -> dict:
        return customer_view(self.reference, self.name, self.status, self.country_code, analytics)


def customer_view(reference: str, name: str, status: str, country_code: str | None,
                  analytics: dict | None = None) -> dict:
    """A customer as the API shows it (also built from bare columns, without a model)."""
    return {"reference": reference, "name": name, "status": status, "country_code": country_code,
            "analytics": analytics}


class Recorded(BaseModel):
    """The columns of a request the API recorded once under its idempotency key, and whose answer
    (`body`, the exact JSON the API returned) it replays: a calculation or a shipment."""

    id = pw.CharField(primary_key=True, max_length=36)
    # No index of their own on organization and customer: the unique index below and each table's
    # listing indexes start with them.
    organization = pw.ForeignKeyField(Organization, on_delete="CASCADE", index=False)
    environment = pw.CharField(max_length=4)
    external_reference = pw.CharField(max_length=120)
    idempotency_key = pw.CharField(max_length=200)
    fingerprint = pw.CharField(max_length=64)  # calculations.fingerprint(): 128 bits in hexadecimal
    business_context = pw.CharField(max_length=12)
    activity_date = pw.DateField()
    cargo_tonnes = ExactDecimalField()
    activity_tkm = ExactDecimalField()
    emissions_kg = ExactDecimalField()
    body = pw.TextField()
    created_at = TimestampField(default=utcnow)
    # Voids (migration 0019, docs/api.md "Corrections"): null while the record counts.
    voided_at = TimestampField(null=True)
    void_reason = pw.TextField(null=True)
    voided_by = pw.CharField(max_length=300, null=True)
    void_key = pw.CharField(max_length=200, null=True)
    replaced_by = pw.CharField(max_length=36, null=True)
    replaces = pw.CharField(max_length=36, null=True)

    class Meta:
        indexes = ((("organization", "environment", "idempotency_key"), True),)


class Calculation(Recorded):
    """An immutable calculation."""

    # Nothing looks calculations up by factor (factors are never deleted): no index of its own
    # (migration 0002), nor on customer, which calculation_customer_created starts with.
    customer = pw.ForeignKeyField(Customer, backref="calculations", on_delete="CASCADE", index=False)
    mode = pw.CharField(max_length=8)
    distance_km = ExactDecimalField()
    factor = pw.ForeignKeyField(Factor, on_delete="RESTRICT", index=False)
    factor_version = pw.IntegerField()
    factor_value = ExactDecimalField()
    # The emissions' TTW and WTT parts when the factor version had them (migration 0006), else null.
    emissions_ttw_kg = ExactDecimalField(null=True)
    emissions_wtt_kg = ExactDecimalField(null=True)


class CustomerRollup(BaseModel):
    """Running totals of one customer's calculations for one mode and business context."""

    customer = pw.ForeignKeyField(Customer, on_delete="CASCADE")
    environment = pw.CharField(max_length=4)
    mode = pw.CharField(max_length=8)
    business_context = pw.CharField(max_length=12)
    calculation_count = pw.BigIntegerField(default=0)
    activity_tkm = ExactDecimalField()
    emissions_kg = ExactDecimalField()
    first_activity_date = pw.DateField()
    last_activity_date = pw.DateField()
    # Sums over the calculations that have TTW and WTT parts (migration 0006).
    emissions_ttw_kg = ExactDecimalField(default=Decimal(0))
    emissions_wtt_kg = ExactDecimalField(default=Decimal(0))

    class Meta:
        indexes = ((("customer", "environment", "mode", "business_context"), True),)


# --- period rollups --------------------------------------------------------------------------------

class PeriodTotals(BaseModel):
    """The columns of a period rollup row after its owner: an activity day or month (span), a mode, a
    business context and the running totals of the calculations in it."""

    environment = pw.CharField(max_length=4)
    span = pw.CharField(max_length=5)  # day | month (activity_date is then the month's first day)
    activity_date = pw.DateField()
    mode = pw.CharField(max_length=8)
    business_context = pw.CharField(max_length=12)
    calculation_count = pw.BigIntegerField()
    activity_tkm = ExactDecimalField()
    emissions_kg = ExactDecimalField()
    emissions_ttw_kg = ExactDecimalField()  # over the calculations that have TTW and WTT parts
    emissions_wtt_kg = ExactDecimalField()


class CustomerPeriodRollup(PeriodTotals):
    """Running totals of one customer's calculations for one activity day or month (span), mode and
    business context (migration 0009; emissions/rollups/ reads and writes them)."""

    customer = pw.ForeignKeyField(Customer, on_delete="CASCADE", index=False)

    class Meta:
        # Keyed by its key (migration 0016; on SQLite a WITHOUT ROWID table, the key's one b-tree).
        primary_key = pw.CompositeKey("customer", "environment", "span", "activity_date", "mode", "business_context")
        without_rowid = True


class OrganizationPeriodRollup(PeriodTotals):
    """Running totals of one organization's calculations for one activity day, mode and business
    context: its customers' day rows added up, written in the same transactions (migration 0017;
    rollups.OrganizationDays). The workspace overview reads them: a row per day, mode and business
    context, however many customers there are. Only span 'day' is written."""

    organization = pw.ForeignKeyField(Organization, on_delete="CASCADE", index=False)

    class Meta:
        primary_key = pw.CompositeKey("organization", "environment", "span", "activity_date", "mode",
                                      "business_context")
        without_rowid = True

# --- end of period rollups -------------------------------------------------------------------------


class UsageCounter(BaseModel):
    """Billable calculations of one organization and environment in one calendar month (UTC)."""

    organization = pw.ForeignKeyField(Organization, on_delete="CASCADE")
    environment = pw.CharField(max_length=4)
    period = pw.CharField(max_length=7)  # "2026-11"
    count = pw.BigIntegerField(default=0)

    class Meta:
        indexes = ((("organization", "environment", "period"), True),)


class WebhookEndpoint(BaseModel):
    organization = pw.ForeignKeyField(Organization, on_delete="CASCADE")
    environment = pw.CharField(max_length=4)
    url = pw.CharField(max_length=2048)
    secret = pw.CharField(max_length=100)
    # A rotation's new secret, signed beside `secret` until overlap_ends_at, then the only one (0011).
    next_secret = pw.CharField(max_length=100, null=True)
    overlap_ends_at = TimestampField(null=True)
    status = pw.CharField(max_length=16, default="enabled")  # enabled | disabled
    disabled_reason = pw.CharField(max_length=200, null=True)
    # Known down (0014): since when its receiver stopped answering, and when the next probe may go out.
    down_since = TimestampField(null=True)
    down_until = TimestampField(null=True)
    # How deliveries are signed (0018): service (X-Service-Webhook-*) | standard (Standard Webhooks).
    signature = pw.CharField(max_length=16, default="service")
    created_at = TimestampField(default=utcnow)
    updated_at = TimestampField(default=utcnow)

    class Meta:
        indexes = ((("organization", "environment"), True),)

    def to_dict(self) -> dict:
        """The endpoint without its secret (the secret is shown once, when set or rotated)."""
        return {
            "organization": self.organization.slug,
            "environment": self.environment,
            "url": self.url,
            "status": self.status,
            "signature": self.signature,
            "disabled_reason": self.disabled_reason,
            "down_since": isoformat(self.down_since),
            "next_probe_at": isoformat(self.down_until) if self.down_since else None,
            "overlap_ends_at": (isoformat(self.overlap_ends_at)
                                if self.next_secret and self.overlap_ends_at > utcnow() else None),
            "created_at": isoformat(self.created_at),
            "updated_at": isoformat(self.updated_at),
        }


class WebhookEvent(BaseModel):
    """An event and the state of its delivery (the outbox row)."""

    id = pw.CharField(primary_key=True, max_length=36)
    organization = pw.ForeignKeyField(Organization, on_delete="CASCADE", index=False)
    environment = pw.CharField(max_length=4)
    type = pw.CharField(max_length=40)
    # The exact body bytes sent, as UTF-8 text; '' for a skipped calculation event (migration 0012),
    # whose body is rebuilt from its calculation when needed: read `payload`, not this.
    stored_payload = pw.TextField(column_name="payload")
    calculation_id = pw.CharField(max_length=36, null=True)  # a calculation.succeeded event's calculation
    created_at = TimestampField(default=utcnow)
    # pending | delivering | succeeded | failed | skipped (no endpoint when it happened)
    delivery_status = pw.CharField(max_length=12)
    attempt_count = pw.IntegerField(default=0)
    next_attempt_at = TimestampField(null=True)
    locked_until = TimestampField(null=True)
    lock_token = pw.CharField(max_length=36, null=True)
    delivered_at = TimestampField(null=True)

    @property
    def payload(self) -> str:
        """The exact body: as stored, or for a skipped calculation event rebuilt from the calculation."""
        if self.stored_payload or self.calculation_id is None:
            return self.stored_payload
        body = Calculation.select(Calculation.body).where(Calculation.id == self.calculation_id).scalar()
        return self.envelope(self.id, self.type, self.created_at, self.environment, body)

    @staticmethod
    def envelope(event_id: str, event_type: str, created_at: dt.datetime, environment: str, data_json: str) -> str:
        """An event's body around its data (JSON text, kept byte for byte)."""
        return jsoncodec.dumps({"id": event_id, "type": event_type, "created_at": isoformat(created_at),
                                "environment": environment, "data": jsoncodec.Raw(data_json)})

    def to_dict(self, attempts: list[dict] | None = None) -> dict:
        return {
            "event_id": self.id,
            "type": self.type,
            "organization": self.organization.slug,
            "environment": self.environment,
            "created_at": isoformat(self.created_at),
            "delivery_status": self.delivery_status,
            "attempt_count": self.attempt_count,
            "next_attempt_at": isoformat(self.next_attempt_at),
            "delivered_at": isoformat(self.delivered_at),
            "attempts": attempts if attempts is not None else [],
        }


# The indexes of webhook_event (migrations 0002 and 0012): two partial ones holding just the rows the
# delivery worker looks for, and the time order of the pages and commands that list events.
WebhookEvent.add_index(WebhookEvent.index(WebhookEvent.organization, WebhookEvent.environment,
                                          WebhookEvent.next_attempt_at, name="webhook_event_due")
                       .where(WebhookEvent.delivery_status == "pending"))
WebhookEvent.add_index(WebhookEvent.index(WebhookEvent.locked_until, name="webhook_event_delivering")
                       .where(WebhookEvent.delivery_status == "delivering"))
WebhookEvent.add_index(WebhookEvent.index(WebhookEvent.organization, WebhookEvent.environment,
                                          WebhookEvent.created_at, name="webhook_event_organization_created"))
WebhookEvent.add_index(WebhookEvent.index(WebhookEvent.created_at, name="webhook_event_created"))


class WebhookAttempt(BaseModel):
    event = pw.ForeignKeyField(WebhookEvent, backref="attempts", on_delete="CASCADE")
    number = pw.IntegerField()
    url = pw.CharField(max_length=2048)
    attempted_at = TimestampField(default=utcnow, index=True)  # migration 0012
    status_code = pw.IntegerField(null=True)
    latency_ms = pw.IntegerField(null=True)
    error = pw.CharField(max_length=500, null=True)
    response_excerpt = pw.CharField(max_length=1000, null=True)

    def to_dict(self) -> dict:
        return {
            "number": self.number,
            "attempted_at": isoformat(self.attempted_at),
            "url": self.url,
            "status_code": self.status_code,
            "latency_ms": self.latency_ms,
            "error": self.error,
            "response_excerpt": self.response_excerpt,
        }

    @classmethod
    def last_of(cls, organization_id: int, environment: str) -> "WebhookAttempt | None":
        """The organization's newest attempt in the environment: attempts read newest first through
        webhook_attempt_attempted_at until one is the organization's (SQLite keeps a CROSS JOIN's
        order; otherwise it would sort every attempt of the organization's events)."""
        return (cls.select().join(WebhookEvent, pw.JOIN.CROSS)
                .where((WebhookEvent.id == cls.event) & (WebhookEvent.organization == organization_id)
                       & (WebhookEvent.environment == environment))
                .order_by(cls.attempted_at.desc()).first())


class User(BaseModel):
    """A workspace login belonging to one organization."""

    organization = pw.ForeignKeyField(Organization, backref="users", on_delete="CASCADE")
    email = pw.CharField(unique=True, max_length=254)
    password_hash = pw.CharField(max_length=200)
    created_at = TimestampField(default=utcnow)
    last_sign_in_at = TimestampField(null=True)


class WorkspaceSession(BaseModel):
    """A signed-in browser: the JWT names it by a random id, stored here only as its SHA-256, so that
    deleting the row (sign-out, password change, user removed) ends the session at once."""

    id = pw.CharField(primary_key=True, max_length=64)
    user = pw.ForeignKeyField(User, backref="sessions", on_delete="CASCADE")
    csrf = pw.CharField(max_length=64)
    environment = pw.CharField(max_length=4, default="test")  # the workspace's test/live switch
    created_at = TimestampField(default=utcnow)
    expires_at = TimestampField()


class WorkspaceFlash(BaseModel):
    """What a page shows once after a redirect, sealed with a one-time pad the browser's cookie holds
    (workspace.flash.Flash); deleted when shown, with its session, or once it expires."""

    id = pw.CharField(primary_key=True, max_length=32)
    session = pw.ForeignKeyField(WorkspaceSession, backref="flashes", on_delete="CASCADE")
    kind = pw.CharField(max_length=16)
    sealed = pw.TextField()
    expires_at = TimestampField()


class AuditEvent(BaseModel):
    """An administrative action: who (actor) did what (action) to which object (target), and when."""

    organization = pw.ForeignKeyField(Organization, null=True, backref="audit_events", on_delete="CASCADE")
    actor = pw.CharField(max_length=300)  # "cli", "user:ada@example.com"
    action = pw.CharField(max_length=64)  # "key.created", "endpoint.set", ...
    target = pw.CharField(max_length=300)  # the object's public name: a key id, a URL, a reference
    environment = pw.CharField(max_length=4, null=True)
    details = pw.TextField(null=True)  # a small JSON object, never a secret
    created_at = TimestampField(default=utcnow)

    def to_dict(self) -> dict:
        return {
            "time": isoformat(self.created_at),
            "organization": self.organization.slug if self.organization_id else None,
            "actor": self.actor,
            "action": self.action,
            "target": self.target,
            "environment": self.environment,
            "details": json.loads(self.details) if self.details else None,
        }


# --- shipments (migration 0010) ---------------------------------------------------------

class Shipment(Recorded):
    """A transport chain. Its legs are calculations."""

    # The list's indexes (migration 0013) start with organization and customer: none of their own.
    customer = pw.ForeignKeyField(Customer, backref="shipments", on_delete="CASCADE", index=False)
    element_count = pw.IntegerField()
    emissions_ttw_kg = ExactDecimalField()
    emissions_wtt_kg = ExactDecimalField()
    request_id = pw.CharField(max_length=36)


class ShipmentHub(BaseModel):
    """A shipment's hub element: what the customer analytics' `hubs` block counts."""

    shipment = pw.ForeignKeyField(Shipment, backref="hubs", on_delete="CASCADE", index=False)
    element_index = pw.IntegerField()
    customer = pw.ForeignKeyField(Customer, on_delete="CASCADE")
    environment = pw.CharField(max_length=4)
    hub_type = pw.CharField(max_length=32)
    business_context = pw.CharField(max_length=12)
    activity_date = pw.DateField()
    tonnes = ExactDecimalField()
    emissions_kg = ExactDecimalField()
    emissions_ttw_kg = ExactDecimalField(null=True)
    emissions_wtt_kg = ExactDecimalField(null=True)
    factor = pw.ForeignKeyField(Factor, on_delete="RESTRICT", index=False)
    factor_version = pw.IntegerField()
    factor_value = ExactDecimalField()
    voided_at = TimestampField(null=True)  # with its shipment (migration 0019)

    class Meta:
        table_name = "shipment_hub"
        indexes = ((("shipment", "element_index"), True),)


ALL_MODELS = [
    InstanceSecret, Organization, ApiKey, Factor, Customer, Calculation, CustomerRollup, CustomerPeriodRollup,
    OrganizationPeriodRollup, UsageCounter, WebhookEndpoint, WebhookEvent, WebhookAttempt, User, AuditEvent,
    WorkspaceSession, WorkspaceFlash, Shipment, ShipmentHub,
]
