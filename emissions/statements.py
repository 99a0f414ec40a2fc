"""A customer's emissions statement for a period: what a forwarder hands its customer.

The totals, by mode and by month come from the period analytics (periods.py), so the API, the CLI and
the statement agree to the last decimal; the factor versions used are counted from the period's
calculations, and the CSV lists those calculations one per row.
"""
from __future__ import annotations

import datetime as dt
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
from .models import Calculation, Factor, ShipmentHub, isoformat, utcnow

SIX_PLACES = Decimal("0.000001")
STANDARD = "ISO 14083:2023"
CSV_COLUMNS = (
    "calculation_id", "external_reference", "customer_reference", "activity_date", "created_at", "mode",
    "business_context", "scope3_category", "origin_code", "origin_label", "origin_country", "destination_code",
    "destination_label", "destination_country", "cargo_tonnes", "distance_km", "activity_tkm", "emissions_kgco2e",
    "emissions_ttw_kgco2e", "emissions_wtt_kgco2e", "factor_reference", "factor_version", "factor_name",
    "factor_source",
)


def intensity(emissions: Decimal, activity: Decimal) -> dict:
    """kgCO2e per tkm, rounded half-even to 6 places; null without activity."""
    value = (emissions / activity).quantize(SIX_PLACES, rounding=ROUND_HALF_EVEN) if activity else None
    return {"value": value, "unit": "kgCO2e/tkm"}


def _in_period(model, customer_id: int, start: dt.date | None, end: dt.date | None):
    """The customer's rows of `model` (calculations or shipment hubs) with an activity date in start..end."""
    condition = model.customer == customer_id
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
        "totals": {"calculation_count": analytics["calculation_count"], "activity": analytics["activity"],
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
        "methodology": {"standard": STANDARD, "boundary": "WTW",
                        "description": "Activity in tonne-kilometres (cargo tonnes x distance km) times a governed "
                                       "well-to-wheel emission factor in kgCO2e/tkm; each calculation rounded "
                                       "half-even to 6 decimal places, totals exact sums of the rounded values.",
                        "publications": publications},
        "generated_at": isoformat(utcnow()),
    }


BODY_BATCH = 500


def _bodies(ids: Iterator[str]) -> Iterator[tuple]:
    """(body, factor name, factor source) of each calculation id, in the ids' order, a batch at a time."""
    while True:
        batch = list(itertools.islice(ids, BODY_BATCH))
        if not batch:
            return
        found = {row[0]: row[1:] for row in (
            Calculation.select(Calculation.id, Calculation.body, Factor.name, Factor.source).join(Factor)
            .where(Calculation.id.in_(batch)).tuples())}
        yield from (found[calculation_id] for calculation_id in batch)


def calculation_rows(organization_id: int, environment: str, reference: str, start: dt.date | None,
                     end: dt.date | None) -> Iterator[list]:
    """The period's calculations as CSV rows (CSV_COLUMNS), by activity date then creation."""
    customer = customers.find(organization_id, environment, reference)
    if customer is None:
        return
    # The order is taken from calculation_customer_created alone (its entries carry activity_date,
    # created_at and id), so what is sorted before the first row is a list of ids, not the bodies;
    # the bodies are then read a batch at a time.
    order = (Calculation.select(Calculation.id).where(_in_period(Calculation, customer.id, start, end))
             .order_by(Calculation.activity_date, Calculation.created_at, Calculation.id).tuples())
    for body, factor_name, factor_source in _bodies(id for (id,) in order.iterator()):
        calculation = jsoncodec.loads(body)
        origin, destination = calculation["origin"], calculation["destination"]
        breakdown = calculation["emissions"].get("breakdown") or {}
        yield [calculation["id"], calculation["external_reference"], calculation["customer"]["reference"],
               calculation["activity_date"], calculation["created_at"], calculation["mode"],
               calculation["methodology"]["business_context"], calculation["methodology"]["scope3_category"],
               origin.get("code", ""), origin.get("label", ""), origin.get("country", ""),
               destination.get("code", ""), destination.get("label", ""), destination.get("country", ""),
               calculation["cargo"]["value"], calculation["distance"]["value"], calculation["activity"]["value"],
               calculation["emissions"]["value"], breakdown.get("ttw", ""), breakdown.get("wtt", ""),
               calculation["factor"]["reference"], calculation["factor"]["version"], factor_name, factor_source]


NUMERIC_COLUMNS = tuple(CSV_COLUMNS.index(name) for name in (
    "scope3_category", "cargo_tonnes", "distance_km", "activity_tkm", "emissions_kgco2e", "emissions_ttw_kgco2e",
    "emissions_wtt_kgco2e", "factor_version"))


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


def as_html(found: dict) -> str:
    """The statement as a printable page (A4), its numbers written for people as the workspace writes them."""
    def number(value) -> str:
        return "" if value is None else figures.number_text(value)

    def exact(value) -> str:
        return "—" if value is None else jsoncodec.decimal_text(value)

    def table(headers: list[str], rows: list[list]) -> str:
        # Each table writes its emissions (Co2e cells) in one unit, from its largest, named in the headers
        # that say kgCO2e; counts get thousands separators.
        unit = figures.co2e_unit(*(cell for row in rows for cell in row if isinstance(cell, Co2e)))
        head = "".join(f"<th>{html.escape(h.replace('kgCO2e', unit.name))}</th>" for h in headers)
        written = [[unit.number(cell) if isinstance(cell, Co2e) else f"{cell:,}" if isinstance(cell, (int, Decimal))
                    else str(cell) for cell in row] for row in rows]
        body = "".join("<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>" for row in written)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def aggregate_row(name: str, totals: dict) -> list:
        emissions = totals["emissions"]
        return [name, totals["calculation_count"], number(totals["activity"]["value"]), Co2e(emissions["value"]),
                Co2e(emissions["breakdown"]["ttw"]), Co2e(emissions["breakdown"]["wtt"])]

    period = found["period"]
    totals = found["totals"]
    columns = ["", "calculations", "tkm", "kgCO2e", "TTW kgCO2e", "WTT kgCO2e"]
    customer = found["customer"]
    return "\n".join([
        "<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>Emissions statement: {html.escape(customer['name'])}</title>",
        "<style>@page { size: A4; margin: 18mm } body { font: 10pt sans-serif } "
        "table { border-collapse: collapse; margin: 0 0 12pt } td, th { border: 1px solid #999; padding: 2pt 6pt; "
        "text-align: right } td:first-child, th:first-child { text-align: left }</style></head><body>",
        f"<h1>Emissions statement: {html.escape(customer['name'])} ({html.escape(customer['reference'])})</h1>",
        f"<p>Period: {html.escape(period['from'] or 'start')} to {html.escape(period['to'] or 'today')} "
        f"(by activity date; {found['environment']} environment). Generated {html.escape(found['generated_at'])}.</p>",
        "<h2>Totals</h2>", table(columns, [aggregate_row("Total", totals)]),
        f"<p>Intensity: {exact(totals['intensity']['value'])} kgCO2e/tkm</p>",
        "<h2>By mode</h2>", table(columns, [aggregate_row(mode, t) for mode, t in found["by_mode"].items()]),
        "<h2>By month</h2>", table(columns, [aggregate_row(m["month"], m) for m in found["by_month"]]),
        "<h2>Factors used</h2>",
        table(["reference", "version", "name", "source", "calculations"],
              [[f["reference"], f["version"], f["name"], f["source"], f["calculation_count"]] for f in found["factors"]]),
        "<h2>Method</h2>",
        f"<p>{html.escape(found['methodology']['standard'])}, well-to-wheel (WTW). "
        f"{html.escape(found['methodology']['description'])}</p>",
        "".join(f"<p>Source: {html.escape(str(p['title']))}, {html.escape(str(p['publisher']))} {p['year']}.</p>"
                for p in found["methodology"]["publications"]),
        "</body></html>", ""])
