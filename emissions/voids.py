"""Corrections without rewriting history (docs/api.md, "Corrections"): a calculation or a shipment
voided, or replaced by a new one, stays readable and leaves every total.

A void is one transaction (store.Write): the record's row marked voided and its stored body made
again with `status: "voided"` and its `voided` block (so that the GET, the lists and a replay keep
serving stored bytes), what it added to its customer's rollups and its organization's day rows
taken away again, its `calculation.voided` or `shipment.voided` event. A shipment's void voids its
legs and hubs with it. The usage counter is left as it is: what was calculated stays billed.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from . import jsoncodec
from . import rollups
from . import store
from .auth import Principal
from .db import is_postgres
from .errors import ApiError, IdempotencyError, InvalidRequest, NotFound
from .models import HUB, Calculation, Shipment, ShipmentHub, WebhookEvent, isoformat, utcnow
from .webhooks import events as webhook_events

CALCULATION = "calculation"
SHIPMENT = "shipment"
MODELS = {CALCULATION: Calculation, SHIPMENT: Shipment}
LEG_KEY_PREFIX = "shipment/"  # a shipment's legs are calculations keyed "shipment/<id>/<index>" (shipments.py)


class VoidRefused(Exception):
    """The record was voided by another transaction first (store.Write's refusal: nothing is written)."""


@dataclass(frozen=True)
class Voided:
    """What a void answers: the record's stored body, whether it is a replay, and the calculation ids
    whose stored bodies changed (an API process forgets what it remembered of them)."""

    body: str
    replayed: bool
    changed: tuple[str, ...] = ()


def not_found(kind: str) -> NotFound:
    return NotFound(f"No {kind} with this id exists.")


def already_voided(kind: str, record_id: str, field: str | None = None) -> ApiError:
    details = [{"field": field, "message": f"names a voided {kind}"}] if field else None
    return ApiError(f"The {kind} {record_id} is voided already; a voided record stays as it is.",
                    code="ALREADY_VOIDED", status=409, details=details)


def leg_refused(record: Calculation, field: str | None = None) -> ApiError:
    shipment = jsoncodec.loads(record.body)["shipment"]
    details = [{"field": field, "message": "names a leg of a shipment"}] if field else None
    return ApiError(f"The calculation {record.id} is leg {shipment['element_index']} of the shipment "
                    f"{shipment['id']}: a leg is not voided alone; void or replace its shipment "
                    f"(POST /v1/shipments/{shipment['id']}/void).", code="SHIPMENT_LEG", status=409,
                    details=details)


def find(kind: str, principal: Principal, record_id: str):
    """The record of the principal's organization and environment, or None (another tenant's too)."""
    model = MODELS[kind]
    return model.get_or_none((model.id == record_id) & (model.organization == principal.organization_id)
                             & (model.environment == principal.environment))


def is_leg(record) -> bool:
    return isinstance(record, Calculation) and record.idempotency_key.startswith(LEG_KEY_PREFIX)


def linked(body: dict, **links) -> dict:
    """The body with `links` (voided, replaced_by, replaces) placed after its status, the order the API shows."""
    shown = {}
    for name, value in body.items():
        if name not in links:
            shown[name] = value
        if name == "status":
            shown.update(links)
    return shown


def voided_body(body: str, at: dt.datetime, reason: str, by: str, replaced_by: str | None) -> str:
    """The stored body as a voided record shows it."""
    found = jsoncodec.loads(body)
    found["status"] = "voided"
    links = {"voided": {"at": isoformat(at), "reason": reason, "by": by}}
    if replaced_by:
        links["replaced_by"] = replaced_by
    return jsoncodec.dumps(linked(found, **links))


UPDATE = ("UPDATE {} SET voided_at = ?, void_reason = ?, voided_by = ?, void_key = ?, replaced_by = ?, body = ?"
          " WHERE id = ? AND voided_at IS NULL")
VOID_HUBS = "UPDATE shipment_hub SET voided_at = ? WHERE shipment_id = ? AND voided_at IS NULL"
# A skipped calculation.succeeded event keeps no body of its own (WebhookEvent.payload rebuilds it
# from the calculation's): it is given its body as it was before the calculation's is made again.
KEEP_EVENT_BODY = "UPDATE webhook_event SET payload = ? WHERE id = ? AND payload = ''"
LOCK_CUSTOMER = "SELECT id FROM customer WHERE id = ? FOR KEY SHARE"


def _addition(row, mode: str, activity) -> rollups.Addition:
    return rollups.Addition(customer_id=row.customer_id, environment=row.environment, mode=mode,
                            business_context=row.business_context, activity_date=row.activity_date,
                            activity_tkm=activity, emissions_kg=row.emissions_kg,
                            emissions_ttw_kg=row.emissions_ttw_kg, emissions_wtt_kg=row.emissions_wtt_kg)


def _keep_event_bodies(write: store.Write, calculation: Calculation) -> None:
    for event in WebhookEvent.select().where((WebhookEvent.calculation_id == calculation.id)
                                             & (WebhookEvent.stored_payload == "")):
        write.add(KEEP_EVENT_BODY, (WebhookEvent.envelope(event.id, event.type, event.created_at,
                                                          event.environment, calculation.body), event.id))


def _void_calculation(write: store.Write, calculation: Calculation, values: list, body: str) -> None:
    write.add(UPDATE.format("calculation"), [*values, body, calculation.id], refusal=VoidRefused)
    _keep_event_bodies(write, calculation)
    write.take_away(_addition(calculation, calculation.mode, calculation.activity_tkm))


def plan(write: store.Write, kind: str, record, at: dt.datetime, reason: str, by: str, key: str | None,
         replaced_by: str | None = None) -> tuple[str, tuple[str, ...]]:
    """Add the record's void to `write` (commit() raises VoidRefused when it was voided meanwhile):
    its row and body, its shipment's legs and hubs, the rollups taken away again and its event.
    Returns the voided body and the ids of the calculations whose bodies changed."""
    if is_postgres():  # as a new calculation does: a rebuild's FOR UPDATE on the customer keeps it out
        write.add(LOCK_CUSTOMER, (record.customer_id,))
    stamp = Calculation.voided_at.db_value(at)
    values = [stamp, reason, by, key, replaced_by]
    body = voided_body(record.body, at, reason, by, replaced_by)
    kinds, changed = set(), []
    if kind == CALCULATION:
        _void_calculation(write, record, values, body)
        kinds.add((record.mode, record.business_context))
        changed.append(record.id)
    else:
        write.add(UPDATE.format("shipment"), [*values, body, record.id], refusal=VoidRefused)
        leg_ids = [element["calculation_id"] for element in jsoncodec.loads(record.body)["elements"]
                   if element["type"] == "leg"]
        for leg in Calculation.select().where(Calculation.id.in_(leg_ids)).order_by(Calculation.id):
            leg_values = [stamp, reason, by, None, None]  # the shipment holds the key and the link
            _void_calculation(write, leg, leg_values, voided_body(leg.body, at, reason, by, None))
            kinds.add((leg.mode, leg.business_context))
            changed.append(leg.id)
        write.add(VOID_HUBS, (stamp, record.id))
        for hub in ShipmentHub.select().where(ShipmentHub.shipment == record.id).order_by(ShipmentHub.element_index):
            write.take_away(_addition(hub, HUB, hub.tonnes))
            kinds.add((HUB, hub.business_context))
    for text, params in rollups.tidy_rollups(record.customer_id, record.environment, kinds):
        write.after_days(text, params)
    write.after_days(rollups.EMPTY_DAYS, (record.organization_id, record.environment))
    write.event(webhook_events.new_event(record.organization_id, record.environment, f"{kind}.voided", body, at))
    return body, tuple(changed)


def _answer_voided(kind: str, record, reason: str, key: str) -> Voided:
    """A voided record met by a void: the replay of the void its key made, or a 409."""
    if record.void_key == key:
        if record.void_reason != reason:
            raise IdempotencyError("This Idempotency-Key was already used with a different request body; "
                                   "use a new key for a new void.")
        return Voided(record.body, replayed=True)
    raise already_voided(kind, record.id)


def _key_used_elsewhere(principal: Principal, key: str, record_id: str) -> bool:
    for model in MODELS.values():
        if (model.select(model.id).where((model.organization == principal.organization_id)
                                         & (model.environment == principal.environment)
                                         & (model.void_key == key) & (model.id != record_id)).exists()):
            return True
    return False


def void(principal: Principal, kind: str, record_id: str, reason: str, key: str) -> Voided:
    """Void a calculation or a shipment of the principal's organization and environment, or replay
    the void its Idempotency-Key made. A second void with another key is 409 ALREADY_VOIDED."""
    record = find(kind, principal, record_id)
    if record is None:
        raise not_found(kind)
    if record.voided_at is not None:
        return _answer_voided(kind, record, reason, key)
    if _key_used_elsewhere(principal, key, record_id):
        raise IdempotencyError("This Idempotency-Key was already used with a different request; "
                               "use a new key for a new void.")
    if is_leg(record):
        raise leg_refused(record)
    at = utcnow()
    write = store.Write(principal.organization_id, principal.environment)
    body, changed = plan(write, kind, record, at, reason, principal.key_id, key)
    try:
        write.commit()
    except VoidRefused:  # voided meanwhile by another request: answer as if it had come first
        return _answer_voided(kind, find(kind, principal, record_id), reason, key)
    return Voided(body, replayed=False, changed=changed)


def replaced(kind: str, principal: Principal, record_id: str, customer_id: int):
    """The record a new one `replaces` (checked before the new one is worked out), or the error to answer."""
    record = find(kind, principal, record_id)
    if record is None:
        raise NotFound(f"The {kind} to replace does not exist.",
                       details=[{"field": "replaces", "message": f"names no {kind}"}])
    if is_leg(record):
        raise leg_refused(record, "replaces")
    if record.voided_at is not None:
        raise already_voided(kind, record.id, "replaces")
    if record.customer_id != customer_id:
        raise InvalidRequest(f"The {kind} to replace belongs to another customer; a replacement names "
                             "the same customer_reference.", status=422,
                             details=[{"field": "replaces", "message": f"names a {kind} of another customer"}])
    return record


def replace_in(write: store.Write, kind: str, principal: Principal, record, new_id: str,
               at: dt.datetime) -> tuple[str, ...]:
    """Add the void of `record`, replaced by the new record `new_id`, to the new record's write."""
    _, changed = plan(write, kind, record, at, f"replaced by {new_id}", principal.key_id, None, replaced_by=new_id)
    return changed
