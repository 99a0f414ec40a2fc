"""What the workspace reads about an organization's calculations: month totals, the daily series,
the newest-first list (keyset paging), its CSV, and one calculation with its webhook events.

The queries go through calculation_customer_created (customer_id, created_at): no index is added to
the calculation write path for the workspace (docs/workspace.md, "Queries").
"""
from __future__ import annotations

import datetime as dt
import io
import json
import re
from dataclasses import dataclass
from decimal import Decimal

import peewee as pw

from .. import csvfile
from .. import jsoncodec
from .. import limits
from ..jsoncodec import decimal_text
from ..db import EXACT_SUM, is_postgres
from ..models import (Calculation, Customer, CustomerRollup, Factor, Organization, Shipment, WebhookAttempt,
                      WebhookEvent, isoformat, utcnow)

PAGE_SIZE = 50
CSV_BATCH = 1000
ZERO = Decimal(0)


def _sum(column):
    """An exact sum: NUMERIC on PostgreSQL, decimal_sum over the text decimals on SQLite."""
    return pw.fn.SUM(column) if is_postgres() else pw.fn.decimal_sum(column)


def _day(column):
    """The UTC date of a timestamp column as YYYY-MM-DD text (not converted back by the column's type)."""
    day = pw.fn.to_char(column, "YYYY-MM-DD") if is_postgres() else pw.fn.substr(column, 1, 10)
    return day.coerce(False)


def _decimal(value) -> Decimal:
    return ZERO if value is None else Decimal(str(value))


def _customers_of(organization_id: int, environment: str):
    return Customer.select(Customer.id).where((Customer.organization == organization_id)
                                              & (Customer.environment == environment))


def _scope(organization_id: int, environment: str):
    # customer_id first, so that calculation_customer_created (customer_id, created_at) serves the range.
    return (Calculation.customer.in_(_customers_of(organization_id, environment))
            & (Calculation.organization == organization_id) & (Calculation.environment == environment))


def month_start(now: dt.datetime) -> dt.datetime:
    return now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


@dataclass
class Usage:
    environment: str
    billable: int
    capacity: int | None

    @property
    def percent(self) -> int:
        if not self.capacity:
            return 0 if self.capacity is None else 100
        return min(100, round(100 * self.billable / self.capacity))


def usage(organization: Organization, test_default: int, now: dt.datetime | None = None) -> list[Usage]:
    """This month's billable calculations against capacity, per environment."""
    counts = limits.usage(organization, limits.period_of(now or utcnow()))
    return [Usage(env, counts[env], limits.capacity_for(organization, env, test_default)) for env in ("test", "live")]


def emissions_since(organization_id: int, environment: str, since: dt.datetime) -> dict:
    """Count and kgCO2e of the calculations created since `since`, in total and by mode."""
    rows = (Calculation.select(Calculation.mode, pw.fn.COUNT(Calculation.id), _sum(Calculation.emissions_kg))
            .where(_scope(organization_id, environment) & (Calculation.created_at >= since))
            .group_by(Calculation.mode).tuples())
    by_mode = {mode: {"count": count, "kg": _decimal(kg)} for mode, count, kg in rows}
    total = ZERO
    for numbers in by_mode.values():
        total = EXACT_SUM.add(total, numbers["kg"])
    return {"count": sum(numbers["count"] for numbers in by_mode.values()), "kg": total,
            "by_mode": {mode: by_mode[mode] for mode in ("ROAD", "SEA", "AIR") if mode in by_mode}}


@dataclass
class Day:
    date: dt.date
    count: int
    kg: Decimal


def daily(organization_id: int, environment: str, days: int = 30, now: dt.datetime | None = None) -> list[Day]:
    """Calculations and kgCO2e per UTC day for the last `days` days (today included), zeros too."""
    today = (now or utcnow()).date()
    first = today - dt.timedelta(days=days - 1)
    since = dt.datetime.combine(first, dt.time(), tzinfo=dt.timezone.utc)
    day = _day(Calculation.created_at)
    rows = (Calculation.select(day, pw.fn.COUNT(Calculation.id), _sum(Calculation.emissions_kg))
            .where(_scope(organization_id, environment) & (Calculation.created_at >= since))
            .group_by(day).tuples())
    found = {str(text): (count, _decimal(kg)) for text, count, kg in rows}
    series = []
    for offset in range(days):
        date = first + dt.timedelta(days=offset)
        count, kg = found.get(date.isoformat(), (0, ZERO))
        series.append(Day(date, count, kg))
    return series


# --- the list ------------------------------------------------------------------------------------

@dataclass
class Filters:
    customer: str = ""
    mode: str = ""
    date_from: dt.date | None = None
    date_to: dt.date | None = None

    def query_string(self) -> dict:
        return {name: value for name, value in (
            ("customer", self.customer), ("mode", self.mode),
            ("from", self.date_from.isoformat() if self.date_from else ""),
            ("to", self.date_to.isoformat() if self.date_to else "")) if value}


def parse_date(text: str) -> dt.date | None:
    if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", text or ""):
        return None
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        return None


CURSOR = re.compile(r"([0-9]{13})_([0-9a-f-]{36})")


def cursor_of(calculation) -> str:
    """Where the next page starts: the last row's created_at (ms) and id."""
    return f"{int(calculation.created_at.timestamp() * 1000):013d}_{calculation.id}"


def parse_cursor(text: str) -> tuple[dt.datetime, str] | None:
    match = CURSOR.fullmatch(text or "")
    if not match:
        return None
    moment = dt.datetime.fromtimestamp(int(match.group(1)) / 1000, dt.timezone.utc)
    return moment, match.group(2)


def _filtered(organization_id: int, environment: str, filters: Filters):
    """The filtered calculations with their customer reference and factor reference; None when
    the customer filter names no customer."""
    condition = _scope(organization_id, environment)
    if filters.customer:
        customer = Customer.get_or_none((Customer.organization == organization_id)
                                        & (Customer.environment == environment)
                                        & (Customer.reference == filters.customer))
        if customer is None:
            return None
        condition &= Calculation.customer == customer.id
    if filters.mode:
        condition &= Calculation.mode == filters.mode
    if filters.date_from:
        condition &= Calculation.created_at >= dt.datetime.combine(filters.date_from, dt.time(),
                                                                   tzinfo=dt.timezone.utc)
    if filters.date_to and filters.date_to < dt.date.max:  # the last day there is bounds nothing
        condition &= Calculation.created_at < dt.datetime.combine(filters.date_to + dt.timedelta(days=1),
                                                                  dt.time(), tzinfo=dt.timezone.utc)
    return (Calculation
            .select(Calculation.id, Calculation.created_at, Calculation.external_reference, Calculation.mode,
                    Calculation.business_context, Calculation.activity_date, Calculation.cargo_tonnes,
                    Calculation.distance_km, Calculation.activity_tkm, Calculation.emissions_kg,
                    Calculation.factor_version, Customer.reference.alias("customer_reference"),
                    Factor.reference.alias("factor_reference"))
            .join(Customer, on=(Calculation.customer == Customer.id))
            .switch(Calculation).join(Factor, on=(Calculation.factor == Factor.id))
            .where(condition)
            .order_by(Calculation.created_at.desc(), Calculation.id.desc()))


def _after(query, cursor: tuple[dt.datetime, str] | None):
    if cursor is None:
        return query
    moment, calculation_id = cursor
    return query.where((Calculation.created_at < moment)
                       | ((Calculation.created_at == moment) & (Calculation.id < calculation_id)))


def page(organization_id: int, environment: str, filters: Filters, cursor=None, size: int | None = None):
    """One page, newest first, and the cursor of the next page (None on the last)."""
    size = size or PAGE_SIZE
    query = _filtered(organization_id, environment, filters)
    if query is None:
        return [], None
    rows = list(_after(query, cursor).limit(size + 1).objects())
    return rows[:size], (cursor_of(rows[size - 1]) if len(rows) > size else None)


CSV_COLUMNS = ("id", "created_at", "environment", "customer_reference", "external_reference", "mode",
               "business_context", "activity_date", "cargo_tonnes", "distance_km", "activity_tkm",
               "emissions_kgco2e", "factor_reference", "factor_version")
CSV_NUMERIC_COLUMNS = tuple(CSV_COLUMNS.index(name) for name in (
    "cargo_tonnes", "distance_km", "activity_tkm", "emissions_kgco2e", "factor_version"))


def csv_lines(organization_id: int, environment: str, filters: Filters):
    """The filtered list as CSV text, a batch at a time (keyset: memory stays flat at any size)."""
    buffer = io.StringIO()
    writer = csvfile.Writer(buffer, numeric_columns=CSV_NUMERIC_COLUMNS)
    writer.writerow(CSV_COLUMNS)
    yield buffer.getvalue()
    query = _filtered(organization_id, environment, filters)
    cursor = None
    while query is not None:
        rows = list(_after(query, cursor).limit(CSV_BATCH).objects())
        buffer.seek(0)
        buffer.truncate()
        for row in rows:
            writer.writerow((row.id, isoformat(row.created_at), environment, row.customer_reference,
                             row.external_reference, row.mode, row.business_context,
                             row.activity_date.isoformat(), *(decimal_text(value) for value in (
                                 row.cargo_tonnes, row.distance_km, row.activity_tkm, row.emissions_kg)),
                             row.factor_reference, row.factor_version))
        if rows:
            yield buffer.getvalue()
        if len(rows) < CSV_BATCH:
            break
        cursor = (rows[-1].created_at, rows[-1].id)


# --- one calculation -------------------------------------------------------------------------------

def calculation(organization_id: int, environment: str, calculation_id: str):
    """The stored calculation (body parsed) of this organization and environment, or None."""
    row = (Calculation.select(Calculation.id, Calculation.body, Calculation.created_at)
           .where((Calculation.id == calculation_id) & (Calculation.organization == organization_id)
                  & (Calculation.environment == environment)).first())
    if row is None:
        return None
    return row, json.loads(row.body)


def events_of(organization_id: int, environment: str, calculation_row) -> list[WebhookEvent]:
    """The calculation.succeeded event written with the calculation (same moment, its id in the body)."""
    marker = f'"data":{{"id":"{calculation_row.id}"'
    events = list(WebhookEvent.select()
                  .where((WebhookEvent.organization == organization_id) & (WebhookEvent.environment == environment)
                         & (WebhookEvent.created_at == calculation_row.created_at)))
    return [event for event in events if marker in event.payload]


def attempts_of(events) -> dict[str, list[WebhookAttempt]]:
    found: dict[str, list] = {event.id: [] for event in events}
    if found:
        for attempt in (WebhookAttempt.select().where(WebhookAttempt.event.in_(list(found)))
                        .order_by(WebhookAttempt.number)):
            found[attempt.event_id].append(attempt)
    return found


def recent_events(organization_id: int, environment: str, limit: int = 25) -> list[WebhookEvent]:
    return list(WebhookEvent.select()
                .where((WebhookEvent.organization == organization_id) & (WebhookEvent.environment == environment))
                .order_by(WebhookEvent.created_at.desc(), WebhookEvent.id.desc()).limit(limit))


def endpoint_health(organization_id: int, environment: str, since: dt.datetime) -> dict:
    """Deliveries since `since` by status, and the last attempt's outcome."""
    rows = (WebhookEvent.select(WebhookEvent.delivery_status, pw.fn.COUNT(WebhookEvent.id))
            .where((WebhookEvent.organization == organization_id) & (WebhookEvent.environment == environment)
                   & (WebhookEvent.created_at >= since))
            .group_by(WebhookEvent.delivery_status).tuples())
    counts = dict(rows)
    last = (WebhookAttempt.select().join(WebhookEvent)
            .where((WebhookEvent.organization == organization_id) & (WebhookEvent.environment == environment))
            .order_by(WebhookAttempt.attempted_at.desc()).first())
    return {"counts": counts, "last_attempt": last}


def event(organization_id: int, environment: str, event_id: str) -> WebhookEvent | None:
    """The webhook event of this organization and environment, or None."""
    return WebhookEvent.get_or_none((WebhookEvent.id == event_id[:36])
                                    & (WebhookEvent.organization == organization_id)
                                    & (WebhookEvent.environment == environment))


def customers_after(organization_id: int, environment: str, after: str, limit: int) -> list[Customer]:
    """Customers by reference, those after `after` ("" for the first), `limit` at most."""
    query = Customer.select().where((Customer.organization == organization_id) & (Customer.environment == environment))
    if after:
        query = query.where(Customer.reference > after)
    return list(query.order_by(Customer.reference).limit(limit))


def customer_totals(customer_ids: list[int]) -> dict[int, dict]:
    """Calculations and kgCO2e per customer, from the rollups (the numbers the API's analytics sum)."""
    totals: dict[int, dict] = {}
    if not customer_ids:
        return totals
    for row in CustomerRollup.select().where(CustomerRollup.customer.in_(customer_ids)):
        found = totals.setdefault(row.customer_id, {"count": 0, "kg": ZERO})
        found["count"] += row.calculation_count
        found["kg"] = EXACT_SUM.add(found["kg"], row.emissions_kg)
    return totals


def shipments(organization_id: int, environment: str, limit: int = 100) -> list[dict]:
    """The newest shipments of this organization and environment, their bodies parsed, newest first."""
    rows = (Shipment.select(Shipment.body).where((Shipment.organization == organization_id)
                                                 & (Shipment.environment == environment))
            .order_by(Shipment.created_at.desc(), Shipment.id.desc()).limit(limit))
    return [jsoncodec.loads(row.body) for row in rows]


def shipment(organization_id: int, environment: str, shipment_id: str) -> dict | None:
    """The shipment of this organization and environment, its body parsed, or None."""
    found = (Shipment.select(Shipment.body).where(
        (Shipment.id == shipment_id) & (Shipment.organization == organization_id)
        & (Shipment.environment == environment)).first())
    return None if found is None else jsoncodec.loads(found.body)
