"""A customer's emissions statement for a period: what a forwarder hands its customer.

The totals, by mode and by month come from the period analytics (periods.py), so the API, the CLI and
the statement agree to the last decimal; the factor versions used are counted from the period's
calculations and shipment hubs, and the CSV lists those calculations and hubs one per row, so that
every output adds up to its own totals.
"""
from __future__ import annotations

import base64
import datetime as dt
import hashlib
import heapq
import html
import io
import itertools
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Iterator

import peewee as pw

from . import csvfile
from . import customers
from . import figures
from . import jsoncodec
from . import periods
from . import shipments
from .calculations import SCOPE3_CATEGORY
from .models import HUB, Calculation, Factor, Shipment, ShipmentHub, isoformat, utcnow

SIX_PLACES = Decimal("0.000001")
STANDARD = "ISO 14083:2023"
CSV_COLUMNS = (
    "calculation_id", "external_reference", "customer_reference", "activity_date", "created_at", "mode",
    "business_context", "scope3_category", "origin_code", "origin_label", "origin_country", "destination_code",
    "destination_label", "destination_country", "cargo_tonnes", "distance_km", "activity_tkm", "emissions_kgco2e",
    "emissions_ttw_kgco2e", "emissions_wtt_kgco2e", "factor_reference", "factor_version", "factor_name",
    "factor_source", "shipment_id", "element_index", "hub_type",
)


def intensity(emissions: Decimal, activity: Decimal) -> dict:
    """kgCO2e per tkm, rounded half-even to 6 places; null without activity."""
    value = (emissions / activity).quantize(SIX_PLACES, rounding=ROUND_HALF_EVEN) if activity else None
    return {"value": value, "unit": "kgCO2e/tkm"}


def _in_period(model, customer_id: int, start: dt.date | None, end: dt.date | None, counted: bool = True):
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
                               .where(_in_period(model, customer_id, start, end)).group_by(model.factor).tuples())
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
                                .where(_in_period(Shipment, customer_id, start, end)).tuples().get())
    hubs = ShipmentHub.select().where(_in_period(ShipmentHub, customer_id, start, end)).count()
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
        "methodology": {"standard": STANDARD, "boundary": "WTW",
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
                 .where(_in_period(model, customer_id, start, end, counted=False) & model.voided_at.is_null(False)))
        if model is Calculation:
            query = query.where(~Calculation.idempotency_key.startswith("shipment/"))  # legs: their shipment's
        found += [(row.activity_date, row.voided_at, row.id, {
            "object": kind, "id": row.id, "external_reference": row.external_reference,
            "activity_date": row.activity_date.isoformat(), "emissions": {"value": row.emissions_kg, "unit": "kgCO2e"},
            "voided_at": isoformat(row.voided_at), "reason": row.void_reason, "replaced_by": row.replaced_by})
            for row in query]
    return [entry for *_, entry in sorted(found, key=lambda item: item[:3])]


BODY_BATCH = 500


def _bodies(order: Iterator[tuple]) -> Iterator[tuple]:
    """(activity date, created_at, body, factor name, factor source) of each (id, activity date,
    created_at) in `order`, in its order, a batch at a time."""
    while True:
        batch = list(itertools.islice(order, BODY_BATCH))
        if not batch:
            return
        found = {row[0]: row[1:] for row in (
            Calculation.select(Calculation.id, Calculation.body, Factor.name, Factor.source).join(Factor)
            .where(Calculation.id.in_([calculation_id for calculation_id, _, _ in batch])).tuples())}
        yield from ((day, created_at, *found[calculation_id]) for calculation_id, day, created_at in batch)


def _calculation_entries(customer_id: int, start: dt.date | None, end: dt.date | None) -> Iterator[tuple]:
    """((activity date, created_at), chain position, row) of the period's calculations, by activity date
    then creation."""
    # The order is taken from calculation_customer_created alone (its entries carry activity_date,
    # created_at and id), so what is sorted before the first row is a list of ids, not the bodies;
    # the bodies are then read a batch at a time.
    # The voided are left out by their ids (calculation_customer_voided holds them), not by a condition
    # that would read every row the index orders.
    period = _in_period(Calculation, customer_id, start, end, counted=False)
    voided = {calculation_id for (calculation_id,) in Calculation.select(Calculation.id)
              .where(period & Calculation.voided_at.is_null(False)).tuples()}
    order = (Calculation.select(Calculation.id, Calculation.activity_date, Calculation.created_at)
             .where(period).order_by(Calculation.activity_date, Calculation.created_at, Calculation.id).tuples())
    counted = (row for row in order.iterator() if row[0] not in voided)
    for day, created_at, body, factor_name, factor_source in _bodies(counted):
        calculation = jsoncodec.loads(body)
        origin, destination = calculation["origin"], calculation["destination"]
        breakdown = calculation["emissions"].get("breakdown") or {}
        shipment = calculation.get("shipment") or {}
        row = [calculation["id"], calculation["external_reference"], calculation["customer"]["reference"],
               calculation["activity_date"], calculation["created_at"], calculation["mode"],
               calculation["methodology"]["business_context"], calculation["methodology"]["scope3_category"],
               origin.get("code", ""), origin.get("label", ""), origin.get("country", ""),
               destination.get("code", ""), destination.get("label", ""), destination.get("country", ""),
               calculation["cargo"]["value"], calculation["distance"]["value"], calculation["activity"]["value"],
               calculation["emissions"]["value"], breakdown.get("ttw", ""), breakdown.get("wtt", ""),
               calculation["factor"]["reference"], calculation["factor"]["version"], factor_name, factor_source,
               shipment.get("id", ""), shipment.get("element_index", ""), ""]
        yield (day, created_at), (shipment.get("id", calculation["id"]), shipment.get("element_index", 0)), row


def _hub_entries(customer_id: int, start: dt.date | None, end: dt.date | None) -> Iterator[tuple]:
    """((activity date, created_at), chain position, row) of the period's shipment hubs, in the order
    of _calculation_entries: a hub has no tkm, its cargo is the tonnes it handled."""
    # The period's hubs come through the customer's index unsorted; their shipments' creation times are
    # read by id, and the order is made here, so no statement sorts the customer's history.
    keys = list(ShipmentHub.select(ShipmentHub.id, ShipmentHub.activity_date, ShipmentHub.shipment,
                                   ShipmentHub.element_index).where(_in_period(ShipmentHub, customer_id, start, end)).tuples().iterator())
    created: dict[str, dt.datetime] = {}
    shipment_ids = sorted({shipment_id for _, _, shipment_id, _ in keys})
    for offset in range(0, len(shipment_ids), BODY_BATCH):
        created.update(Shipment.select(Shipment.id, Shipment.created_at)
                       .where(Shipment.id.in_(shipment_ids[offset:offset + BODY_BATCH])).tuples())
    ordered = sorted(keys, key=lambda key: (key[1], created[key[2]], key[2], key[3]))
    hubs = (row for offset in range(0, len(ordered), BODY_BATCH) for row in sorted(
        (ShipmentHub.select(ShipmentHub.activity_date, Shipment.created_at, Shipment.id,
                            Shipment.external_reference, Shipment.body, ShipmentHub.element_index,
                            ShipmentHub.business_context, Factor.name, Factor.source)
         .join(Shipment, on=(ShipmentHub.shipment == Shipment.id))
         .switch(ShipmentHub).join(Factor, on=(ShipmentHub.factor == Factor.id))
         .where(ShipmentHub.id.in_([hub_id for hub_id, _, _, _ in ordered[offset:offset + BODY_BATCH]])).tuples()),
        key=lambda hub: (hub[0], hub[1], hub[2], hub[5])))
    for day, created_at, shipment_id, external_reference, body, index, context, factor_name, factor_source in hubs:
        # The numbers come from the stored Shipment, written as the legs' calculations are.
        shipment = jsoncodec.loads(body)
        hub = shipment["elements"][index]
        place = shipments.v1_place(hub["location"]) if "location" in hub else {}
        breakdown = hub["emissions"].get("breakdown") or {}
        row = [None, external_reference, shipment["customer"]["reference"], shipment["activity_date"],
               shipment["created_at"], HUB, context, SCOPE3_CATEGORY[context], place.get("code", ""),
               place.get("label", ""), place.get("country", ""), "", "", "", hub["activity"]["value"], "", "",
               hub["emissions"]["value"], breakdown.get("ttw", ""), breakdown.get("wtt", ""),
               hub["factor"]["reference"], hub["factor"]["version"], factor_name, factor_source, shipment_id,
               index, hub["hub_type"]]
        yield (day, created_at), (shipment_id, index), row


def calculation_rows(organization_id: int, environment: str, reference: str, start: dt.date | None,
                     end: dt.date | None) -> Iterator[list]:
    """The period's calculations and shipment hubs as CSV rows (CSV_COLUMNS), by activity date then
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


NUMERIC_COLUMNS = tuple(CSV_COLUMNS.index(name) for name in (
    "scope3_category", "cargo_tonnes", "distance_km", "activity_tkm", "emissions_kgco2e", "emissions_ttw_kgco2e",
    "emissions_wtt_kgco2e", "factor_version", "element_index"))


def csv_lines(rows: Iterator[list]) -> Iterator[str]:
    """The header and the rows as CSV text, a line at a time, through the one CSV writer (csvfile)."""
    out = io.StringIO()
    writer = csvfile.Writer(out, numeric_columns=NUMERIC_COLUMNS)
    for row in itertools.chain([CSV_COLUMNS], rows):
        writer.writerow([format(value, "f") if isinstance(value, Decimal) else value for value in row])
        yield out.getvalue()
        out.seek(0)
        out.truncate()


def as_csv(rows: Iterator[list]) -> str:
    """The statement's CSV: the period's calculations, one per row."""
    return "".join(csv_lines(rows))


class Co2e(Decimal):
    """Emissions in kg in a table of the HTML statement, which writes them in the table's unit."""


HTML_STYLE = ("@page { size: A4; margin: 18mm } body { font: 10pt sans-serif } "
              "table { border-collapse: collapse; margin: 0 0 12pt } td, th { border: 1px solid #999; padding: 2pt 6pt; "
              "text-align: right } td:first-child, th:first-child { text-align: left }")
# The workspace's policy, for a page opened from disk where no header applies: nothing loads or runs
# but its own inline stylesheet, named by its hash (frame-ancestors has no effect in a <meta>).
HTML_POLICY = ("default-src 'none'; style-src 'sha256-"
               + base64.b64encode(hashlib.sha256(HTML_STYLE.encode()).digest()).decode()
               + "'; script-src 'none'; img-src 'none'; form-action 'none'; base-uri 'none'")


def as_html(found: dict) -> str:
    """The statement as a printable page (A4), its numbers written for people as the workspace writes them."""
    def number(value) -> str:
        return "" if value is None else figures.number_text(value)

    def exact(value) -> str:
        return "—" if value is None else jsoncodec.decimal_text(value)

    def table(headers: list[str], rows: list[list]) -> str:
        # Each table writes its emissions (Co2e cells) in one unit, from its largest, named in the headers
        # that say kgCO2e; counts get thousands separators. A Co2e cell carries its exact kg in data-value,
        # by which the rows add up to the total where the rounded figures may miss it by a hundredth.
        unit = figures.co2e_unit(*(cell for row in rows for cell in row if isinstance(cell, Co2e)))
        head = "".join(f"<th>{html.escape(h.replace('kgCO2e', unit.name))}</th>" for h in headers)

        def cell_html(cell) -> str:
            if isinstance(cell, Co2e):
                return f'<td data-value="{exact(cell)}"><bdi>{html.escape(unit.number(cell))}</bdi></td>'
            text = f"{cell:,}" if isinstance(cell, (int, Decimal)) else str(cell)
            return f"<td><bdi>{html.escape(text)}</bdi></td>"  # <bdi>: stored text cannot reorder what is beside it

        body = "".join("<tr>" + "".join(cell_html(cell) for cell in row) + "</tr>" for row in rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def aggregate_row(name: str, totals: dict) -> list:
        emissions = totals["emissions"]
        return [name, totals["calculation_count"], number(totals["activity"]["value"]), Co2e(emissions["value"]),
                Co2e(emissions["breakdown"]["ttw"]), Co2e(emissions["breakdown"]["wtt"]),
                Co2e(emissions["breakdown"]["unattributed"])]

    def hubs_row() -> list[list]:
        """The hubs' row below the modes: no calculations and no tkm, so every column still adds up."""
        hubs = found.get("hubs")
        if not hubs:
            return []
        emissions = hubs["emissions"]
        return [[f"Hubs ({hubs['count']}, {number(hubs['activity']['value'])} t handled)", "", "",
                 Co2e(emissions["value"]), Co2e(emissions["breakdown"]["ttw"]),
                 Co2e(emissions["breakdown"]["wtt"]), Co2e(emissions["breakdown"]["unattributed"])]]

    def used_by(factor: dict) -> list:
        return [factor["calculation_count"] or ("" if factor.get("hub_count") else 0), factor.get("hub_count", "")]

    period = found["period"]
    totals = found["totals"]
    columns = ["", "calculations", "tkm", "kgCO2e", "TTW kgCO2e", "WTT kgCO2e", "not split kgCO2e"]
    customer = found["customer"]
    counts = [totals["shipment_count"], totals["single_calculation_count"], totals["calculation_count"],
              found["hubs"]["count"] if "hubs" in found else 0]
    return "\n".join([
        "<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{HTML_POLICY}">',
        f"<title>Emissions statement: {html.escape(customer['name'])}</title>",
        f"<style>{HTML_STYLE}</style></head><body>",
        f"<h1>Emissions statement: <bdi>{html.escape(customer['name'])}</bdi> "
        f"(<bdi>{html.escape(customer['reference'])}</bdi>)</h1>",
        f"<p>Period: {html.escape(period['from'] or 'start')} to {html.escape(period['to'] or 'today')} "
        f"(by activity date; {found['environment']} environment). Generated {html.escape(found['generated_at'])}.</p>",
        "<h2>Totals</h2>", table(columns, [aggregate_row("Total", totals)]),
        f"<p>Intensity: {exact(totals['intensity']['value'])} kgCO2e/tkm</p>",
        table(["", "shipments", "single calculations", "calculations", "hubs"], [["Count", *counts]]),
        "<p>Calculations count each leg of a shipment and each single calculation; a hub is no calculation, "
        "its emissions are in its own row. TTW, WTT and not split (emissions whose factor gives only the "
        "well-to-wheel total) add up to kgCO2e.</p>",
        "<h2>By mode</h2>", table(columns, [aggregate_row(mode, t) for mode, t in found["by_mode"].items()]
                                  + hubs_row()),
        "<h2>By month</h2>", table(columns, [aggregate_row(m["month"], m) for m in found["by_month"]]),
        "<h2>Factors used</h2>",
        table(["reference", "version", "name", "source", "calculations", "hubs"],
              [[f["reference"], f["version"], f["name"], f["source"], *used_by(f)] for f in found["factors"]]),
        "<h2>Method</h2>",
        f"<p>{html.escape(found['methodology']['standard'])}, well-to-wheel (WTW). "
        f"{html.escape(found['methodology']['description'])}</p>",
        "".join(f"<p>Source: {html.escape(str(p['title']))}, {html.escape(str(p['publisher']))} {p['year']}.</p>"
                for p in found["methodology"]["publications"]),
        "</body></html>", ""])
