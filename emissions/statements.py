"""A customer's emissions statement for a period: what a forwarder hands its customer.

The totals, by mode and by month come from the period analytics (periods.py), so the API, the CLI and
the statement agree to the last decimal; the factor versions used are counted from the period's
calculations and shipment hubs, and the CSV lists those calculations and hubs one per row, so that
every output adds up to its own totals.
"""
from __future__ import annotations

import datetime as dt
import heapq
import itertools
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Iterable, Iterator

import peewee as pw

from . import customers
from . import jsoncodec
from . import periods
from .exports import json as views
from .exports.rows import CalculationRow
from .models import Calculation, Factor, Shipment, ShipmentHub, isoformat, utcnow

SIX_PLACES = Decimal("0.000001")


def intensity(emissions: Decimal, activity: Decimal) -> dict:
    """kgCO2e per tkm, rounded half-even to 6 places; null without activity."""
    value = (emissions / activity).quantize(SIX_PLACES, rounding=ROUND_HALF_EVEN) if activity else None
    return {"value": value, "unit": "kgCO2e/tkm"}


def in_period(model, customer_id: int, start: dt.date | None, end: dt.date | None, counted: bool = True):
    """The customer's rows of `model` (calculations, shipments or shipment hubs) with an activity date in
    start..end; only those that count (not voided) unless not `counted`."""
    condition = model.customer == customer_id
    if counted:
        condition &= model.voided_at.is_null()
    if start is not None:
        condition &= model.activity_date >= start
    if end is not None:
        condition &= model.activity_date <= end
    return condition


def factors_used(customer_id: int, start: dt.date | None, end: dt.date | None) -> list[dict]:
    """Each factor version the period's calculations and shipment hubs used: its lineage, publication
    and how many used it (hub_count for a HUB factor)."""
    counts, hub_counts = (dict(model.select(model.factor, pw.fn.COUNT(model.id))
                               .where(in_period(model, customer_id, start, end)).group_by(model.factor).tuples())
                          for model in (Calculation, ShipmentHub))
    used = sorted(Factor.select().where(Factor.id.in_([*counts, *hub_counts])),
                  key=lambda f: (f.reference, f.version))
    return [{**factor.lineage(), "publication": factor.publication, "calculation_count": counts.get(factor.id, 0),
             **({"hub_count": hub_counts[factor.id]} if factor.id in hub_counts else {})}
            for factor in used]


def shipment_counts(customer_id: int, start: dt.date | None, end: dt.date | None) -> tuple[int, int]:
    """(shipments, their legs) of the customer with an activity date in start..end: a shipment's legs are
    its elements less its hubs, and every leg has its shipment's activity date."""
    shipment_count, elements = (Shipment.select(pw.fn.COUNT(Shipment.id), pw.fn.SUM(Shipment.element_count))
                                .where(in_period(Shipment, customer_id, start, end)).tuples().get())
    hubs = ShipmentHub.select().where(in_period(ShipmentHub, customer_id, start, end)).count()
    return shipment_count, int(elements or 0) - hubs


def counts(customer_id: int, calculation_count: int, start: dt.date | None, end: dt.date | None) -> dict:
    """What a person counts: shipments, and the calculations made one by one (calculation_count less the
    shipments' legs), beside calculation_count, which counts each leg as a calculation."""
    shipment_count, legs = shipment_counts(customer_id, start, end)
    return {"shipment_count": int(shipment_count), "single_calculation_count": int(calculation_count) - legs}


def statement(organization_id: int, environment: str, reference: str, start: dt.date | None = None,
              end: dt.date | None = None) -> dict | None:
    """The customer's statement for activity dates start..end (inclusive, None is open), or None."""
    customer = customers.find(organization_id, environment, reference)
    text = periods.analytics_json(organization_id, environment, reference, start, end)
    if customer is None or text is None:
        return None
    analytics = jsoncodec.loads(text)["analytics"]
    factors = factors_used(customer.id, start, end)
    publications = []
    for factor in factors:
        if factor["publication"] and factor["publication"] not in publications:
            publications.append(factor["publication"])
    return {
        "object": "statement",
        "customer": {"reference": customer.reference, "name": customer.name, "country_code": customer.country_code},
        "environment": environment,
        "period": analytics["period"],
        "totals": {"calculation_count": analytics["calculation_count"],
                   **counts(customer.id, analytics["calculation_count"], start, end), "activity": analytics["activity"],
                   "emissions": analytics["emissions"],
                   "intensity": intensity(analytics["emissions"]["value"], analytics["activity"]["value"])},
        "by_mode": {mode: {**totals, "intensity": intensity(totals["emissions"]["value"], totals["activity"]["value"])}
                    for mode, totals in analytics["by_mode"].items()},
        "by_business_context": analytics["by_business_context"],
        **({"hubs": analytics["hubs"]} if "hubs" in analytics else {}),
        "by_month": analytics["by_month"],
        "first_activity_date": analytics["first_activity_date"],
        "last_activity_date": analytics["last_activity_date"],
        "factors": factors,
        "voided": voided_records(customer.id, start, end),
        "methodology": {"standard": views.STANDARD, "boundary": "WTW",
                        "description": "Activity in tonne-kilometres (cargo tonnes x distance km) times a governed "
                                       "well-to-wheel emission factor in kgCO2e/tkm; each calculation rounded "
                                       "half-even to 6 decimal places, totals exact sums of the rounded values.",
                        "publications": publications},
        "generated_at": isoformat(utcnow()),
    }


def voided_records(customer_id: int, start: dt.date | None, end: dt.date | None) -> list[dict]:
    """The period's voided calculations and shipments (a shipment's legs with it, not apart), each with
    its reason and what replaced it, by activity date: what the totals no longer count."""
    found = []
    for kind, model in (("calculation", Calculation), ("shipment", Shipment)):
        query = (model.select(model.id, model.external_reference, model.activity_date, model.emissions_kg,
                              model.voided_at, model.void_reason, model.replaced_by)
                 .where(in_period(model, customer_id, start, end, counted=False) & model.voided_at.is_null(False)))
        if model is Calculation:
            query = query.where(~Calculation.idempotency_key.startswith("shipment/"))  # legs: their shipment's
        found += [(row.activity_date, row.voided_at, row.id, {
            "object": kind, "id": row.id, "external_reference": row.external_reference,
            "activity_date": row.activity_date.isoformat(), "emissions": {"value": row.emissions_kg, "unit": "kgCO2e"},
            "voided_at": isoformat(row.voided_at), "reason": row.void_reason, "replaced_by": row.replaced_by})
            for row in query]
    return [entry for *_, entry in sorted(found, key=lambda item: item[:3])]


BODY_BATCH = 500


def batches(items: Iterable) -> Iterator[list]:
    """The items a list of BODY_BATCH at a time, for reads by id that keep a statement's size bounded."""
    items = iter(items)
    while batch := list(itertools.islice(items, BODY_BATCH)):
        yield batch


def voided_ids(model, customer_id: int, start: dt.date | None, end: dt.date | None) -> set[str]:
    """The ids of the period's voided calculations or shipments, found through the customer's
    <table>_customer_voided index rather than a condition on every row the period holds."""
    return {record_id for record_id, in model.select(model.id)
            .where(in_period(model, customer_id, start, end, counted=False) & model.voided_at.is_null(False))
            .tuples()}


def _bodies(order: Iterator) -> Iterator[tuple]:
    """(activity date, created_at, body, factor name, factor source) of each row (id, activity_date,
    created_at) in `order`, in its order, a batch at a time."""
    for batch in batches(order):
        found = {row.id: row for row in (
            Calculation.select(Calculation.id, Calculation.body, Factor.name, Factor.source).join(Factor)
            .where(Calculation.id.in_([entry.id for entry in batch])).namedtuples())}
        yield from ((entry.activity_date, entry.created_at, found[entry.id].body, found[entry.id].name,
                     found[entry.id].source) for entry in batch)


def _calculation_entries(customer_id: int, start: dt.date | None, end: dt.date | None) -> Iterator[tuple]:
    """((activity date, created_at), chain position, row) of the period's calculations, by activity date
    then creation."""
    # The order is taken from calculation_customer_created alone (its entries carry activity_date,
    # created_at and id), so what is sorted before the first row is a list of ids, not the bodies;
    # the bodies are then read a batch at a time.
    # The voided are left out by their ids (calculation_customer_voided holds them), not by a condition
    # that would read every row the index orders.
    period = in_period(Calculation, customer_id, start, end, counted=False)
    voided = voided_ids(Calculation, customer_id, start, end)
    order = (Calculation.select(Calculation.id, Calculation.activity_date, Calculation.created_at)
             .where(period).order_by(Calculation.activity_date, Calculation.created_at, Calculation.id)
             .namedtuples())
    counted = (row for row in order.iterator() if row.id not in voided)
    for day, created_at, body, factor_name, factor_source in _bodies(counted):
        row = CalculationRow.of_calculation(jsoncodec.loads(body), factor_name, factor_source)
        yield (day, created_at), (row.shipment_id or row.calculation_id, row.element_index or 0), row


def _hub_entries(customer_id: int, start: dt.date | None, end: dt.date | None) -> Iterator[tuple]:
    """((activity date, created_at), chain position, row) of the period's shipment hubs, in the order
    of _calculation_entries: a hub has no tkm, its cargo is the tonnes it handled."""
    # The period's hubs come through the customer's index unsorted; their shipments' creation times are
    # read by id, and the order is made here, so no statement sorts the customer's history.
    keys = list(ShipmentHub.select(ShipmentHub.id, ShipmentHub.activity_date, ShipmentHub.shipment,
                                   ShipmentHub.element_index)
                .where(in_period(ShipmentHub, customer_id, start, end)).namedtuples().iterator())
    created: dict[str, dt.datetime] = {}
    shipment_ids = sorted({key.shipment for key in keys})
    for batch in batches(shipment_ids):
        created.update(Shipment.select(Shipment.id, Shipment.created_at).where(Shipment.id.in_(batch)).tuples())
    ordered = sorted(keys, key=lambda key: (key.activity_date, created[key.shipment], key.shipment,
                                            key.element_index))
    hubs = (row for batch in batches(ordered) for row in sorted(
        (ShipmentHub.select(ShipmentHub.activity_date, Shipment.created_at, Shipment.id,
                            Shipment.external_reference, Shipment.body, ShipmentHub.element_index,
                            ShipmentHub.business_context, Factor.name, Factor.source)
         .join(Shipment, on=(ShipmentHub.shipment == Shipment.id))
         .switch(ShipmentHub).join(Factor, on=(ShipmentHub.factor == Factor.id))
         .where(ShipmentHub.id.in_([key.id for key in batch])).namedtuples()),
        key=lambda hub: (hub.activity_date, hub.created_at, hub.id, hub.element_index)))
    for day, created_at, shipment_id, external_reference, body, index, context, factor_name, factor_source in hubs:
        # The numbers come from the stored Shipment, written as the legs' calculations are.
        row = CalculationRow.of_hub(jsoncodec.loads(body), index, external_reference, context, factor_name,
                                    factor_source)
        yield (day, created_at), (shipment_id, index), row


def calculation_rows(organization_id: int, environment: str, reference: str, start: dt.date | None,
                     end: dt.date | None) -> Iterator[CalculationRow]:
    """The period's calculations and shipment hubs as rows, by activity date then
    creation, a shipment's legs and hubs together in chain order: the rows add up to the statement's
    totals."""
    customer = customers.find(organization_id, environment, reference)
    if customer is None:
        return
    entries = heapq.merge(_calculation_entries(customer.id, start, end), _hub_entries(customer.id, start, end),
                          key=lambda entry: entry[0])
    # Rows made at one moment (a shipment's legs and hubs share its created_at) are put in chain order.
    for _, together in itertools.groupby(entries, key=lambda entry: entry[0]):
        for _, _, row in sorted(together, key=lambda entry: entry[1]):
            yield row
