"""The calculation: tonnes x km = tkm, tkm x governed factor = kgCO2e, stored once, replayed exactly."""
from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal, localcontext

import peewee as pw

import customers
import factors
import jsoncodec
import limits
import webhooks
from errors import ApiError, CalculationFailed, IdempotencyError, NotFound, PermissionError_
from models import Calculation, db, isoformat, new_id, utcnow

SIX_PLACES = Decimal("0.000001")
SCOPE3_CATEGORY = {"upstream": 4, "downstream": 9}


@dataclass(frozen=True)
class Outcome:
    """What the API answers: the stored body, and whether it is a replay."""

    calculation_id: str
    body: str
    replayed: bool


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


def fingerprint(payload: dict) -> str:
    """A digest of the material payload, equal for the same data however it was written."""
    return hashlib.sha256(jsoncodec.canonical(payload).encode()).hexdigest()


def with_defaults(payload: dict) -> dict:
    """The validated body with documented defaults applied."""
    return {**payload, "business_context": payload.get("business_context", "upstream")}


def find_by_key(organization_id: int, environment: str, idempotency_key: str):
    return (Calculation.select(Calculation.id, Calculation.fingerprint, Calculation.body)
            .where((Calculation.organization == organization_id) & (Calculation.environment == environment)
                   & (Calculation.idempotency_key == idempotency_key))
            .first())


def _replay(existing, payload_fingerprint: str) -> Outcome:
    if existing.fingerprint != payload_fingerprint:
        raise IdempotencyError("This Idempotency-Key was already used with a different request body; "
                               "use a new key for a new calculation.")
    return Outcome(existing.id, existing.body, replayed=True)


def get(organization_id: int, environment: str, calculation_id: str) -> str:
    """The stored body of a calculation in this organization and environment, or a tenant-safe 404."""
    row = (Calculation.select(Calculation.body)
           .where((Calculation.id == calculation_id) & (Calculation.organization == organization_id)
                  & (Calculation.environment == environment))
           .first())
    if row is None:
        raise NotFound("No calculation with this id exists.")
    return row.body


def calculate(organization_id: int, environment: str, payload: dict, idempotency_key: str,
              request_id: str, test_capacity_default: int) -> Outcome:
    """Create a calculation for a validated payload, or replay the one its idempotency key made."""
    payload = with_defaults(payload)
    payload_fingerprint = fingerprint(payload)
    existing = find_by_key(organization_id, environment, idempotency_key)
    if existing is not None:
        return _replay(existing, payload_fingerprint)

    customer = customers.find(organization_id, environment, payload["customer_reference"])
    if customer is None:
        raise NotFound("No customer with this customer_reference exists.", code="CUSTOMER_NOT_FOUND")
    if customer.status != "active":
        raise PermissionError_(f"The customer is {customer.status}; only active customers can be charged "
                               "with new calculations.", code="CUSTOMER_ACCESS_DENIED")
    factor = factors.resolve(organization_id, payload["factor_reference"])
    if factor is None:
        raise NotFound("No active governed factor with this factor_reference is available.",
                       code="FACTOR_NOT_FOUND")
    activity_date = dt.date.fromisoformat(payload["activity_date"])
    reason = factor.applies_to(payload["mode"], activity_date)
    if reason is not None:
        _fail(organization_id, environment, payload, request_id,
              CalculationFailed(f"The factor does not apply: {reason}."))

    activity, emissions = compute(payload["cargo"]["value"], payload["distance"]["value"], factor.value)
    calculation_id = new_id()
    created_at = utcnow()
    body = jsoncodec.dumps({
        "id": calculation_id,
        "external_reference": payload["external_reference"],
        "status": "succeeded",
        "environment": environment,
        "customer": {"reference": customer.reference},
        "mode": payload["mode"],
        "activity_date": payload["activity_date"],
        "origin": payload["origin"],
        "destination": payload["destination"],
        "cargo": {"value": payload["cargo"]["value"], "unit": "tonne"},
        "distance": {"value": payload["distance"]["value"], "unit": "km"},
        "activity": {"value": activity, "unit": "tkm"},
        "emissions": {"value": emissions, "unit": "kgCO2e"},
        "methodology": {"standard": "ISO 14083:2023", "boundary": "WTW",
                        "business_context": payload["business_context"],
                        "scope3_category": SCOPE3_CATEGORY[payload["business_context"]]},
        "factor": factor.lineage(),
        "created_at": isoformat(created_at),
    })
    try:
        with db.atomic():
            Calculation.insert(
                id=calculation_id, organization=organization_id, environment=environment,
                customer=customer.id, external_reference=payload["external_reference"],
                idempotency_key=idempotency_key, fingerprint=payload_fingerprint, mode=payload["mode"],
                business_context=payload["business_context"], activity_date=activity_date,
                cargo_tonnes=payload["cargo"]["value"], distance_km=payload["distance"]["value"],
                activity_tkm=activity, emissions_kg=emissions, factor=factor.id,
                factor_version=factor.version, factor_value=factor.value, request_id=request_id,
                body=body, created_at=created_at,
            ).execute()
            # Counted after the insert: a concurrent request with the same key fails on the unique
            # key above and becomes a replay, which capacity never blocks.
            limits.consume(organization_id, environment, test_capacity_default, now=created_at)
            customers.add_to_rollup(customer.id, environment, payload["mode"], payload["business_context"],
                                    activity, emissions, activity_date)
            webhooks.record_event(organization_id, environment, "calculation.succeeded", body)
    except pw.IntegrityError:
        # A concurrent request with the same key committed first: answer as its replay.
        existing = find_by_key(organization_id, environment, idempotency_key)
        if existing is None:
            raise
        return _replay(existing, payload_fingerprint)
    return Outcome(calculation_id, body, replayed=False)


def _fail(organization_id: int, environment: str, payload: dict, request_id: str, error: ApiError):
    """Commit a calculation.failed event for this outcome, then raise the error."""
    data = jsoncodec.dumps({
        "external_reference": payload["external_reference"],
        "customer": {"reference": payload["customer_reference"]},
        "error": {"code": error.code, "message": error.message, "request_id": request_id},
    })
    with db.atomic():
        webhooks.record_event(organization_id, environment, "calculation.failed", data)
    raise error
