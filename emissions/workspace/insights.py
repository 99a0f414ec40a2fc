"""What the workspace reads about an organization's calculations: figures by activity date, the
newest-first list (keyset paging), its CSV, and one calculation with its webhook events.

Every read is bounded by what the page shows, never by the history (docs/workspace.md, "Queries"):
figures come from the rollups, the list walks an index in its own order (calculation_created, or
calculation_customer_created for one customer, migration 0008) and stops at the page's end. No index
is added to the calculation's write path for the workspace.
"""
from __future__ import annotations

import calendar
import datetime as dt
import json
import re
from dataclasses import dataclass
from typing import NamedTuple
from decimal import Decimal

import peewee as pw

from .. import clock
from .. import jsoncodec
from .. import limits
from .. import periods
from .. import statements
from ..exports import csv as export_csv
from ..exports.rows import CALCULATION_COLUMNS, CALCULATION_NUMBERS, CalculationRow
from ..figures import co2e_text, co2e_unit, number_text  # noqa: F401 (the pages' helpers)
from ..db import EXACT_SUM, exact_sum
from ..models import (HUB, Calculation, Customer, CustomerRollup, Factor, Organization, OrganizationPeriodRollup,
                      Shipment, WebhookAttempt, WebhookEvent)

PAGE_SIZE = 50
CSV_BATCH = 1000
ZERO = Decimal(0)


def _decimal(value) -> Decimal:
    return ZERO if value is None else Decimal(str(value))


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
    counts = limits.usage(organization, limits.period_of(now or clock.now()))
    return [Usage(env, counts[env], limits.capacity_for(organization, env, test_default)) for env in ("test", "live")]


@dataclass
class Day:
    date: dt.date
    count: int
    kg: Decimal


class ActivityDay(NamedTuple):
    """A day, mode and business context of the organization's day rows."""

    day: dt.date
    mode: str
    count: int
    kg: Decimal


def activity_days(organization_id: int, environment: str, first: dt.date, last: dt.date) -> list[ActivityDay]:
    """(activity day, mode, count, kgCO2e) from the organization's day rows (its customers' added up
    as they are written): a row per day, mode and business context, however many customers there are."""
    rows = (OrganizationPeriodRollup
            .select(OrganizationPeriodRollup.activity_date, OrganizationPeriodRollup.mode,
                    pw.fn.SUM(OrganizationPeriodRollup.calculation_count),
                    exact_sum(OrganizationPeriodRollup.emissions_kg))
            .where((OrganizationPeriodRollup.organization == organization_id)
                   & (OrganizationPeriodRollup.environment == environment) & (OrganizationPeriodRollup.span == "day")
                   & (OrganizationPeriodRollup.activity_date >= first)
                   & (OrganizationPeriodRollup.activity_date <= last))
            .group_by(OrganizationPeriodRollup.activity_date, OrganizationPeriodRollup.mode)
            .tuples())
    return [ActivityDay(day, mode, int(count), _decimal(kg)) for day, mode, count, kg in rows]


def _within(rows, organization_id: int, environment: str, first: dt.date, last: dt.date):
    """The rows of activity_days in first..last: from those given (read once for a wider range), or read."""
    if rows is None:
        return activity_days(organization_id, environment, first, last)
    return [row for row in rows if first <= row.day <= last]


def emissions_by_activity(organization_id: int, environment: str, first: dt.date, last: dt.date,
                          rows: list | None = None) -> dict:
    """Count and kgCO2e of the calculations with an activity date in first..last, in total and by mode
    (hubs of shipments add their emissions, as in the analytics), from the day rollups."""
    by_mode: dict[str, dict] = {}
    count, total = 0, ZERO
    for _, mode, calculations, kg in _within(rows, organization_id, environment, first, last):
        numbers = by_mode.setdefault(mode, {"count": 0, "kg": ZERO})
        numbers["kg"] = EXACT_SUM.add(numbers["kg"], kg)
        total = EXACT_SUM.add(total, kg)
        if mode != HUB:
            numbers["count"] += calculations
            count += calculations
    return {"count": count, "kg": total,
            "by_mode": {mode: by_mode[mode] for mode in ("ROAD", "SEA", "AIR", "RAIL", HUB) if mode in by_mode}}


def months_by_activity(first: dt.date | None, last: dt.date | None, rows: list) -> list[dict]:
    """Calculations and kgCO2e per activity month in first..last (None: open) from activity_days rows:
    every month of a bounded period of up to two years (zeros too), else the months with data."""
    found: dict[str, list] = {}
    for day, mode, calculations, kg in rows:
        if (first is None or day >= first) and (last is None or day <= last):
            numbers = found.setdefault(limits.period_of(day), [0, ZERO])
            numbers[0] += 0 if mode == HUB else calculations
            numbers[1] = EXACT_SUM.add(numbers[1], kg)
    months = sorted(found)
    if first and last and (last.year - first.year) * 12 + last.month - first.month < 24:
        months, month = [], first.replace(day=1)
        while month is not None and month <= last:
            months.append(limits.period_of(month))
            month = periods.next_month(month)
    return [{"month": month, "count": found.get(month, [0])[0], "kg": found.get(month, [0, ZERO])[1]}
            for month in months]


def daily_by_activity(organization_id: int, environment: str, days: int = 30,
                      now: dt.datetime | None = None, rows: list | None = None) -> list[Day]:
    """Calculations and kgCO2e per activity day for the last `days` days (today included), zeros too."""
    today = (now or clock.now()).date()
    first = today - dt.timedelta(days=days - 1)
    found: dict[dt.date, list] = {}
    for day, mode, calculations, kg in _within(rows, organization_id, environment, first, today):
        numbers = found.setdefault(day, [0, ZERO])
        numbers[0] += 0 if mode == HUB else calculations
        numbers[1] = EXACT_SUM.add(numbers[1], kg)
    return [Day(day, *found.get(day, (0, ZERO))) for day in (first + dt.timedelta(days=n) for n in range(days))]


# --- the list ------------------------------------------------------------------------------------

@dataclass
class Filters:
    customer: str = ""
    mode: str = ""
    date_from: dt.date | None = None
    date_to: dt.date | None = None
    activity_from: dt.date | None = None
    activity_to: dt.date | None = None

    def query_string(self) -> dict:
        return {name: value for name, value in (
            ("customer", self.customer), ("mode", self.mode),
            ("from", self.date_from.isoformat() if self.date_from else ""),
            ("to", self.date_to.isoformat() if self.date_to else ""),
            ("activity_from", self.activity_from.isoformat() if self.activity_from else ""),
            ("activity_to", self.activity_to.isoformat() if self.activity_to else "")) if value}


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
    # One customer's rows come through calculation_customer_created (customer_id, created_at, id, ...):
    # the customer was looked up in the organization and environment, so its id stands for both (named
    # with them, the planner would walk the whole organization's calculation_created instead).
    if filters.customer:
        customer = Customer.get_or_none((Customer.organization == organization_id)
                                        & (Customer.environment == environment)
                                        & (Customer.reference == filters.customer))
        if customer is None:
            return None
        condition = Calculation.customer == customer.id
    else:
        condition = (Calculation.organization == organization_id) & (Calculation.environment == environment)
    if filters.mode:
        condition &= Calculation.mode == filters.mode
    if filters.date_from:
        condition &= Calculation.created_at >= dt.datetime.combine(filters.date_from, dt.time(),
                                                                   tzinfo=dt.timezone.utc)
    if filters.date_to and filters.date_to < dt.date.max:  # the last day there is bounds nothing
        condition &= Calculation.created_at < dt.datetime.combine(filters.date_to + dt.timedelta(days=1),
                                                                  dt.time(), tzinfo=dt.timezone.utc)
    if filters.activity_from:
        condition &= Calculation.activity_date >= filters.activity_from
    if filters.activity_to:
        condition &= Calculation.activity_date <= filters.activity_to
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
    """The rows after the cursor: a row value, which the index seeks to (an OR of two conditions
    would make it read the newer rows again on every page)."""
    if cursor is None:
        return query
    moment, calculation_id = cursor
    return query.where(pw.Tuple(Calculation.created_at, Calculation.id)
                       < pw.Tuple(Calculation.created_at.db_value(moment), calculation_id))


def page(organization_id: int, environment: str, filters: Filters, cursor=None, size: int | None = None):
    """One page, newest first, and the cursor of the next page (None on the last)."""
    size = size or PAGE_SIZE
    query = _filtered(organization_id, environment, filters)
    if query is None:
        return [], None
    rows = list(_after(query, cursor).limit(size + 1).objects())
    return rows[:size], (cursor_of(rows[size - 1]) if len(rows) > size else None)


def recent(organization_id: int, environment: str, filters: Filters, size: int) -> list:
    """The newest `size` calculations, and past them the rest of the last one's shipment: its legs share
    its created_at and external reference, and come in chain order (shipments.py makes their ids so)."""
    rows, _ = page(organization_id, environment, filters, size=size + MAX_LEGS)
    shown = rows[:size]
    for row in rows[size:]:
        last = shown[-1]
        if (row.created_at, row.external_reference) != (last.created_at, last.external_reference):
            break
        shown.append(row)
    return shown


MAX_LEGS = 10  # a shipment's elements are at most 10


CSV_COLUMNS = CALCULATION_COLUMNS  # the statement CSV's columns (exports/rows.py)


def csv_lines(organization_id: int, environment: str, filters: Filters):
    """The filtered list as CSV text, a batch at a time (keyset: memory stays flat at any size)."""
    return export_csv.batches(CALCULATION_COLUMNS, CALCULATION_NUMBERS, _csv_batches(organization_id, environment,
                                                                                      filters))


def _csv_batches(organization_id: int, environment: str, filters: Filters):
    """The filtered calculations as rows (exports/rows.py), CSV_BATCH at a time, newest first."""
    query = _filtered(organization_id, environment, filters)
    if query is None:
        return
    # The row is built from the stored body, as the statement's are, so the two files list the same columns.
    query = query.select(Calculation.id, Calculation.created_at, Calculation.body,
                         Factor.name.alias("factor_name"), Factor.source.alias("factor_source"))
    cursor = None
    while True:
        found = list(_after(query, cursor).limit(CSV_BATCH).objects())
        yield [CalculationRow.of_calculation(jsoncodec.loads(row.body), row.factor_name, row.factor_source)
               for row in found]
        if len(found) < CSV_BATCH:
            return
        cursor = (found[-1].created_at, found[-1].id)


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
    return {"counts": counts, "last_attempt": WebhookAttempt.last_of(organization_id, environment)}


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


# --- periods of activity dates (the customer page's picker) -------------------------------------

PERIOD_CHOICES = (("this-month", "This month"), ("last-month", "Last month"),
                  ("last-and-this-month", "Last and this month"), ("this-quarter", "This quarter"),
                  ("last-quarter", "Last quarter"), ("this-year", "This year"), ("last-year", "Last year"),
                  ("all", "All time"), ("custom", "Custom"))


@dataclass
class Period:
    choice: str
    start: dt.date | None
    end: dt.date | None

    @property
    def label(self) -> str:
        if self.start is None and self.end is None:
            return "all activity dates"
        start = self.start.isoformat() if self.start else "the start"
        return f"{start} to {self.end.isoformat() if self.end else 'today'}"

    def query(self) -> dict:
        """The page's query parameters for this period."""
        if self.choice != "custom":
            return {"period": self.choice}
        return {"period": "custom", **({"from": self.start.isoformat()} if self.start else {}),
                **({"to": self.end.isoformat()} if self.end else {})}


def _month_end(day: dt.date) -> dt.date:
    return (day.replace(day=28) + dt.timedelta(days=4)).replace(day=1) - dt.timedelta(days=1)


def period_dates(choice: str, today: dt.date) -> tuple[dt.date | None, dt.date | None]:
    """The first and last activity date (inclusive) of a named period around today."""
    if choice == "last-and-this-month":  # a month being closed beside the one under way
        return (today.replace(day=1) - dt.timedelta(days=1)).replace(day=1), _month_end(today)
    if choice == "this-month":
        return today.replace(day=1), _month_end(today)
    if choice == "last-month":
        last = today.replace(day=1) - dt.timedelta(days=1)
        return last.replace(day=1), last
    quarter_start = today.replace(month=3 * ((today.month - 1) // 3) + 1, day=1)
    if choice == "this-quarter":
        return quarter_start, _month_end(quarter_start.replace(month=quarter_start.month + 2))
    if choice == "last-quarter":
        end = quarter_start - dt.timedelta(days=1)
        return end.replace(month=end.month - 2, day=1), end
    if choice == "this-year":
        return today.replace(month=1, day=1), today.replace(month=12, day=31)
    if choice == "last-year":
        return dt.date(today.year - 1, 1, 1), dt.date(today.year - 1, 12, 31)
    return None, None


def period_of(choice: str, from_text: str, to_text: str, today: dt.date | None = None,
              default: str = "this-month") -> tuple[Period, list[str]]:
    """The period the page's query asks for (`default` when it asks for none) and what is wrong with it."""
    today = today or clock.today()
    if (from_text or to_text) and choice in ("", "custom"):
        choice = "custom"
    elif choice != "custom":  # a named period leaves the custom dates of the form unused
        from_text = to_text = ""
    if choice not in dict(PERIOD_CHOICES):
        return Period(default, *period_dates(default, today)), (
            [f"Unknown period “{choice[:40]}”: choose one of the list."] if choice else [])
    if choice != "custom":
        return Period(choice, *period_dates(choice, today)), []
    problems = []
    dates = []
    for name, text in (("from", from_text), ("to", to_text)):
        value = parse_date(text) if text else None
        if text and value is None:
            problems.append(f"The “{name}” date must be written YYYY-MM-DD.")
        dates.append(value)
    if dates[0] and dates[1] and dates[0] > dates[1]:
        problems.append("The “from” date is after the “to” date.")
    if problems:
        return Period(default, *period_dates(default, today)), problems
    return Period("custom", *dates), []


@dataclass
class Month:
    month: str  # YYYY-MM
    kg: Decimal
    by_mode: dict  # mode (and "HUB" for shipments' hubs) -> kgCO2e


def customer_period(organization_id: int, environment: str, reference: str, period: Period) -> dict | None:
    """The customer with its analytics over the period, exactly as the API answers them, or None."""
    text = periods.analytics_json(organization_id, environment, reference, period.start, period.end)
    return None if text is None else jsoncodec.loads(text)


def months_by_mode(organization_id: int, environment: str, reference: str, found: dict, period: Period) -> list[Month]:
    """Each month of the period with data, its emissions split by mode (hubs a part of their own), read
    from the period analytics of that month (clipped to the period), so the parts add up to by_month."""
    months = []
    for entry in found["analytics"]["by_month"]:
        first = dt.date.fromisoformat(entry["month"] + "-01")
        last = first.replace(day=calendar.monthrange(first.year, first.month)[1])  # also in December 9999
        start = max(first, period.start) if period.start else first
        end = min(last, period.end) if period.end else last
        text = periods.analytics_json(organization_id, environment, reference, start, end)
        month = jsoncodec.loads(text)["analytics"]
        parts = {mode: totals["emissions"]["value"] for mode, totals in month["by_mode"].items()}
        if "hubs" in month:
            parts["HUB"] = month["hubs"]["emissions"]["value"]
        months.append(Month(entry["month"], entry["emissions"]["value"], parts))
    return months


def statement_csv_lines(organization_id: int, environment: str, reference: str, period: Period):
    """The period's statement CSV (statements.py's columns and rows), through the one CSV writer."""
    return export_csv.calculations(statements.calculation_rows(organization_id, environment, reference,
                                                               period.start, period.end))


def statement_file_name(reference: str, environment: str, period: Period) -> str:
    """The download's file name: the customer (letters, digits, - and _ only) and the period."""
    safe = re.sub(r"[^A-Za-z0-9_-]+", "_", reference)[:60] or "customer"
    start = period.start.isoformat() if period.start else "start"
    span = f"{start}-to-{period.end.isoformat() if period.end else 'today'}"
    return f"statement-{safe}-{environment}-{span}.csv"
