"""The calculation: tonnes x km = tkm, tkm x governed factor = kgCO2e, stored once, replayed exactly."""
from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from functools import lru_cache

import peewee as pw

from . import factors
from . import jsoncodec
from . import limits
from . import store
from . import voids
from .exports import json as views
from .webhooks import events as webhook_events
from .auth import Principal
from .config import DEFAULT_TEST_CAPACITY
from .errors import (ApiError, CalculationFailed, IdempotencyError, InvalidRequest, NotFound, PermissionError_,
                     customer_not_found, factor_not_found)
from .models import Factor, new_id, utcnow
from .sql import decoded

SIX_PLACES = Decimal("0.000001")


@dataclass(frozen=True)
class Outcome:
    """What the API answers: the stored body, and whether it is a replay."""

    calculation_id: str
    body: str
    replayed: bool
    changed: tuple[str, ...] = ()  # the ids of the calculations a replacement voided (voids.py)


def round6(value: Decimal) -> Decimal:
    return value.quantize(SIX_PLACES, rounding=ROUND_HALF_EVEN)


def compute(cargo_tonnes: Decimal, distance_km: Decimal, factor_value: Decimal) -> tuple[Decimal, Decimal]:
    """(activity tkm, emissions kgCO2e), each rounded half-even to 6 places; emissions use the rounded tkm."""
    with localcontext() as context:
        # Wide enough for both exact products, so that only the documented rounding ever happens.
        context.prec = 60 + sum(len(value.as_tuple().digits) for value in (cargo_tonnes, distance_km, factor_value))
        activity = round6(cargo_tonnes * distance_km)
        emissions = round6(activity * factor_value)
    return activity, emissions


def refuse_zero(activity: Decimal, emissions: Decimal) -> None:
    """A shipment whose activity or emissions round to 0 is a 422 naming the fields, never a zero calculation.

    Here, after the arithmetic both validators lead to, rather than in a schema: the emissions depend
    on the factor's value too.
    """
    if activity == 0:
        message = "times the other value is 0.0000005 tkm or less, which rounds to 0"
        raise InvalidRequest("The request body is invalid: cargo.value × distance.value rounds to 0 tkm.",
                             status=422, details=[{"field": "cargo.value", "message": message},
                                                  {"field": "distance.value", "message": message}])
    if emissions == 0:
        message = "gives emissions that round to 0 kgCO2e with this factor"
        raise InvalidRequest("The request body is invalid: the emissions round to 0 kgCO2e.", status=422,
                             details=[{"field": "cargo.value", "message": message},
                                      {"field": "distance.value", "message": message}])


def fingerprint(payload: dict) -> str:
    """A digest of the material payload, equal for the same data however it was written: the first
    128 bits of its SHA-256, in hexadecimal, enough to tell two bodies sent with one key apart."""
    return hashlib.sha256(jsoncodec.canonical(payload).encode()).hexdigest()[:32]


def with_defaults(payload: dict) -> dict:
    """The validated body with documented defaults applied."""
    return {**payload, "business_context": payload.get("business_context", "upstream")}


@lru_cache(maxsize=1024)
def factor_of_row(row: store.FactorRow) -> Factor:
    """The factor version a lookup row holds (every column of models.Factor). Kept by the columns
    themselves (the lookup checks the status every time), so a kept one cannot differ from its row."""
    return Factor(**{field.name: value for field, value in zip(row.fields, decoded(row))})


def _replay(existing, payload_fingerprint: str) -> Outcome:
    if existing.fingerprint != payload_fingerprint:
        raise IdempotencyError("This Idempotency-Key was already used with a different request body; "
                               "use a new key for a new calculation.")
    return Outcome(existing.id, existing.body, replayed=True)


def get(principal: Principal, calculation_id: str) -> str:
    """The stored body of a calculation of the principal's organization and environment, or a tenant-safe 404."""
    body = store.calculation_body(principal.organization_id, principal.environment, calculation_id)
    if body is None:
        raise NotFound("No calculation with this id exists.")
    return body


def calculate(principal: Principal, payload: dict, idempotency_key: str, *, request_id: str | None = None,
              test_capacity: int = DEFAULT_TEST_CAPACITY) -> Outcome:
    """Create a calculation for a validated payload, or replay the one its idempotency key made.

    `test_capacity` is the sandbox's monthly capacity for organizations without their own.
    """
    organization_id, environment = principal.organization_id, principal.environment
    request_id = request_id or str(uuid.uuid4())
    payload = with_defaults(payload)
    payload_fingerprint = fingerprint(payload)
    existing, customer, factor_row = store.lookup(organization_id, environment, idempotency_key,
                                                  payload["customer_reference"], payload["factor_reference"])
    if existing is not None:
        return _replay(existing, payload_fingerprint)

    if customer is None:
        raise customer_not_found("customer_reference")
    if customer.status != "active":
        raise PermissionError_(f"The customer is {customer.status}; only active customers can be charged "
                               "with new calculations.", code="CUSTOMER_ACCESS_DENIED")
    if factor_row is None:
        raise factor_not_found("factor_reference")
    replacing = None
    if "replaces" in payload:  # only then: a calculation that replaces nothing sends no more statements
        replacing = voids.replaced(voids.CALCULATION, principal, payload["replaces"], customer.id)
    factor = factor_of_row(factor_row)
    activity_date = dt.date.fromisoformat(payload["activity_date"])
    reason = factor.applies_to(payload["mode"], activity_date)
    if reason is not None:
        _fail(organization_id, environment, payload, request_id,
              CalculationFailed(f"The factor does not apply: {reason}."))

    cargo, distance = payload["cargo"]["value"], payload["distance"]["value"]
    activity, emissions = compute(cargo, distance, factor.value)
    refuse_zero(activity, emissions)
    parts = factors.breakdown(activity, emissions, factor.ttw_value)  # (ttw, wtt) or None
    calculation_id = new_id()
    created_at = utcnow()
    view = views.calculation(calculation_id, environment, payload, customer.reference, activity, emissions, factor,
                             created_at, parts)
    body = jsoncodec.dumps(voids.linked(view, replaces=replacing.id) if replacing else view)
    ttw, wtt = parts or (None, None)
    calculation = store.NewCalculation(
        id=calculation_id, organization_id=organization_id, environment=environment, customer_id=customer.id,
        external_reference=payload["external_reference"], idempotency_key=idempotency_key,
        fingerprint=payload_fingerprint, mode=payload["mode"], business_context=payload["business_context"],
        activity_date=activity_date, cargo_tonnes=cargo, distance_km=distance, activity_tkm=activity,
        emissions_kg=emissions, factor_id=factor.id, factor_version=factor.version, factor_value=factor.value,
        body=body, created_at=created_at, emissions_ttw_kg=ttw, emissions_wtt_kg=wtt,
        replaces=replacing.id if replacing else None)
    event = webhook_events.new_event(organization_id, environment, "calculation.succeeded", body, created_at,
                                     calculation_id)
    changed = ()
    try:
        if replacing is None:
            store.write_calculation(calculation, test_capacity, limits.period_of(created_at), event)
        else:
            changed = _write_replacement(principal, calculation, replacing, test_capacity, event)
    except voids.VoidRefused:
        raise voids.already_voided(voids.CALCULATION, replacing.id, "replaces") from None
    except limits.CapacityUsedUp:
        limits.capacity_used_up(created_at)
    except pw.IntegrityError:
        # A concurrent request with the same key committed first: answer as its replay.
        existing = store.find_by_key(organization_id, environment, idempotency_key)
        if existing is None:
            raise
        return _replay(existing, payload_fingerprint)
    return Outcome(calculation_id, body, replayed=False, changed=changed)


def _write_replacement(principal: Principal, calculation: store.NewCalculation, replacing, test_capacity: int,
                       event) -> tuple[str, ...]:
    """The new calculation and the void of the one it replaces, in one transaction."""
    write = store.Write(principal.organization_id, principal.environment)
    write.calculation(calculation, test_capacity, limits.period_of(calculation.created_at))
    changed = voids.replace_in(write, voids.CALCULATION, principal, replacing, calculation.id,
                               calculation.created_at)
    write.event(event)
    write.commit()
    return changed


def _fail(organization_id: int, environment: str, payload: dict, request_id: str, error: ApiError):
    """Commit a calculation.failed event for this outcome, then raise the error."""
    data = jsoncodec.dumps({
        "external_reference": payload["external_reference"],
        "customer": {"reference": payload["customer_reference"]},
        "error": {"code": error.code, "message": error.message, "request_id": request_id},
    })
    store.insert_event(webhook_events.new_event(organization_id, environment, "calculation.failed", data))
    raise error
