"""A customer's analytics for a period of activity dates, and by month, from customer_period_rollup.

Each calculation adds to the row of its activity day and to the row of its activity month (one
upsert of two rows, in its own transaction: store.write_calculation). A period is read as the month
rows of the whole months inside it and the day rows of the partial months at either end, so a
year's analytics reads at most 12 month rows and 62 day rows per mode and business context, however
many calculations the customer has (migration 0009; docs/api.md, "Customers and analytics").
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache

from . import customers
from . import jsoncodec
from . import store
from .models import EXACT_SUM, CustomerPeriodRollup, CustomerRollup, is_postgres

ZERO = Decimal(0)
EARLIEST, LATEST = dt.date(1, 1, 1), dt.date(9999, 12, 31)
NO_DAYS = (LATEST, EARLIEST)  # a range no date is in


# --- written with every calculation --------------------------------------------------------------

def _upsert(add: str) -> str:
    def total(column: str) -> str:
        return f"{column} = " + add.format(f"customer_period_rollup.{column}", f"EXCLUDED.{column}")

    return (
        "INSERT INTO customer_period_rollup (customer_id, environment, span, activity_date, mode, business_context,"
        " calculation_count, activity_tkm, emissions_kg, emissions_ttw_kg, emissions_wtt_kg)"
        " VALUES (?, ?, 'day', ?, ?, ?, 1, ?, ?, ?, ?), (?, ?, 'month', ?, ?, ?, 1, ?, ?, ?, ?)"
        " ON CONFLICT (customer_id, environment, span, activity_date, mode, business_context) DO UPDATE SET"
        " calculation_count = customer_period_rollup.calculation_count + 1,"
        f" {total('activity_tkm')}, {total('emissions_kg')}, {total('emissions_ttw_kg')}, {total('emissions_wtt_kg')}"
    )


UPSERT_POSTGRES = _upsert("{0} + {1}")
UPSERT_SQLITE = _upsert("decimal_add({0}, {1})")  # decimals are text on SQLite (models.decimal_add)


def add_to_period_rollups(customer_id: int, environment: str, mode: str, business_context: str,
                          activity: Decimal, emissions: Decimal, activity_date: dt.date,
                          breakdown: tuple[Decimal, Decimal] | None = None) -> tuple[str, tuple]:
    """The statement adding one calculation to its day and month rows, and its parameters (the same
    arguments as store.add_to_rollup)."""
    ttw, wtt = breakdown or (ZERO, ZERO)
    decimal = CustomerPeriodRollup.activity_tkm.db_value
    day = CustomerPeriodRollup.activity_date.db_value
    sums = (decimal(activity), decimal(emissions), decimal(ttw), decimal(wtt))
    return (UPSERT_POSTGRES if is_postgres() else UPSERT_SQLITE), (
        customer_id, environment, day(activity_date), mode, business_context, *sums,
        customer_id, environment, day(activity_date.replace(day=1)), mode, business_context, *sums)


# --- read -----------------------------------------------------------------------------------------

# Columns as store.FIND_WITH_ROLLUPS has them: the customer's rows carry its name (never null); the
# period rows have none and put their date where first_activity_date is.
_PERIOD_ROWS = (
    "SELECT c.id, NULL, NULL, NULL, p.mode, p.business_context, p.calculation_count, p.activity_tkm,"
    " p.emissions_kg, p.activity_date, NULL, p.emissions_ttw_kg, p.emissions_wtt_kg"
    " FROM customer AS c JOIN customer_period_rollup AS p ON p.customer_id = c.id AND p.environment = c.environment"
    " AND p.span = '{span}'{dates}"
    " WHERE c.organization_id = ? AND c.environment = ? AND c.reference = ?"
)
_IN_RANGE = " AND p.activity_date >= ? AND p.activity_date <= ?"

# The customer, its lifetime rollup rows (as store.FIND_WITH_ROLLUPS) and every month row.
LIFETIME = (
    "SELECT c.id, c.name, c.status, c.country_code, r.mode, r.business_context, r.calculation_count,"
    " r.activity_tkm, r.emissions_kg, r.first_activity_date, r.last_activity_date,"
    " r.emissions_ttw_kg, r.emissions_wtt_kg"
    " FROM customer AS c"
    " LEFT JOIN customer_rollup AS r ON r.customer_id = c.id AND r.environment = c.environment"
    " WHERE c.organization_id = ? AND c.environment = ? AND c.reference = ?"
    " UNION ALL " + _PERIOD_ROWS.format(span="month", dates="")
)


def _edge(aggregate: str) -> str:
    return (f"(SELECT {aggregate}(d.activity_date) FROM customer_period_rollup AS d"
            " WHERE d.customer_id = c.id AND d.environment = c.environment AND d.span = 'day'"
            " AND d.activity_date >= ? AND d.activity_date <= ?)")


# The customer with the first and last activity day in the period, then the month rows of the whole
# months inside the period and the day rows before and after them.
PERIOD = (
    f"SELECT c.id, c.name, c.status, c.country_code, NULL, NULL, NULL, NULL, NULL, {_edge('MIN')}, {_edge('MAX')},"
    " NULL, NULL FROM customer AS c WHERE c.organization_id = ? AND c.environment = ? AND c.reference = ?"
    " UNION ALL " + _PERIOD_ROWS.format(span="month", dates=_IN_RANGE)
    + " UNION ALL " + _PERIOD_ROWS.format(span="day", dates=_IN_RANGE)
    + " UNION ALL " + _PERIOD_ROWS.format(span="day", dates=_IN_RANGE)
)


def _next_month(day: dt.date) -> dt.date | None:
    if day.year == 9999 and day.month == 12:
        return None
    return dt.date(day.year + day.month // 12, day.month % 12 + 1, 1)


def _is_month_end(day: dt.date) -> bool:
    following = _next_month(day)
    return day.day == 31 if following is None else following - dt.timedelta(days=1) == day


def ranges(start: dt.date, end: dt.date) -> tuple[tuple, tuple, tuple]:
    """(the first days of the first and last whole month, the days before them, the days after them);
    when no whole month is inside start..end, no months and all of its days."""
    first_whole = start if start.day == 1 else _next_month(start)
    if _is_month_end(end):
        last_whole = end.replace(day=1)
    elif end.replace(day=1) > EARLIEST:
        last_whole = (end.replace(day=1) - dt.timedelta(days=1)).replace(day=1)
    else:
        last_whole = None
    if first_whole is None or last_whole is None or first_whole > last_whole:
        return NO_DAYS, (start, end), NO_DAYS
    after_whole = _next_month(last_whole)
    before = (start, first_whole - dt.timedelta(days=1)) if start < first_whole else NO_DAYS
    after = (after_whole, end) if after_whole is not None and after_whole <= end else NO_DAYS
    return (first_whole, last_whole), before, after


def analytics_json(organization_id: int, environment: str, reference: str, start: dt.date | None = None,
                   end: dt.date | None = None) -> str | None:
    """The customer with its analytics over activity dates start..end (inclusive; None is open), as the
    JSON text the API answers, or None when there is no such customer. In one statement.

    Without start and end, the lifetime analytics exactly as before, plus period and by_month.
    """
    customer = (organization_id, environment, reference)
    if start is None and end is None:
        rows = store.run(LIFETIME, customer * 2).fetchall()
    else:
        day = CustomerPeriodRollup.activity_date.db_value
        span = (day(start or EARLIEST), day(end or LATEST))
        months, before, after = ranges(start or EARLIEST, end or LATEST)
        params = (*span, *span, *customer)
        for dates in (months, before, after):
            params += (day(dates[0]), day(dates[1]), *customer)
        rows = store.run(PERIOD, params).fetchall()
    return _analytics_text(environment, reference, tuple(rows), start, end)


@lru_cache(maxsize=1024)
def _analytics_text(environment: str, reference: str, rows: tuple, start: dt.date | None,
                    end: dt.date | None) -> str | None:
    """The answer made from the rows alone: the one made from the same rows is reused."""
    own = [row for row in rows if row[1] is not None]
    if not own:
        return None
    periods = [_rollup_row(row) for row in rows if row[1] is None]
    if start is None and end is None:
        view = customers._analytics_view(environment, reference, own)
        analytics = view["analytics"]
    else:
        _, name, status, country_code = own[0][:4]
        analytics = customers.summarize(environment, periods)
        date_of = CustomerRollup.first_activity_date.python_value
        first, last = date_of(own[0][9]), date_of(own[0][10])
        analytics["first_activity_date"] = first.isoformat() if first else None
        analytics["last_activity_date"] = last.isoformat() if last else None
        view = customers.customer_view(reference, name, status, country_code, analytics)
    analytics["period"] = {"from": start.isoformat() if start else None, "to": end.isoformat() if end else None}
    analytics["by_month"] = by_month(environment, periods)
    return jsoncodec.dumps(view)


def _rollup_row(row: tuple) -> customers.RollupRow:
    decimal_of, date_of = CustomerRollup.activity_tkm.python_value, CustomerRollup.first_activity_date.python_value
    day = date_of(row[9])
    return customers.RollupRow(row[4], row[5], row[6], decimal_of(row[7]), decimal_of(row[8]), day, day,
                               decimal_of(row[11]), decimal_of(row[12]))


def by_month(environment: str, rows: list) -> list[dict]:
    """Per activity month with data, in month order: count, activity and emissions with their breakdown."""
    months: dict[str, list] = {}
    for row in rows:
        months.setdefault(row.first_activity_date.strftime("%Y-%m"), []).append(row)
    answer = []
    for month in sorted(months):
        totals = customers.summarize(environment, months[month])
        answer.append({"month": month, "calculation_count": totals["calculation_count"],
                       "activity": totals["activity"], "emissions": totals["emissions"]})
    return answer


# --- verify and rebuild (customers.verify and customers.rebuild call these) ------------------------

@dataclass
class PeriodTotals:
    """What one period rollup row holds, or should hold."""

    calculation_count: int = 0
    activity_tkm: Decimal = ZERO
    emissions_kg: Decimal = ZERO
    emissions_ttw_kg: Decimal = ZERO
    emissions_wtt_kg: Decimal = ZERO

    def add(self, activity: Decimal, emissions: Decimal, ttw: Decimal | None, wtt: Decimal | None) -> None:
        self.calculation_count += 1
        self.activity_tkm = EXACT_SUM.add(self.activity_tkm, activity)
        self.emissions_kg = EXACT_SUM.add(self.emissions_kg, emissions)
        if ttw is not None:
            self.emissions_ttw_kg = EXACT_SUM.add(self.emissions_ttw_kg, ttw)
            self.emissions_wtt_kg = EXACT_SUM.add(self.emissions_wtt_kg, wtt)

    def to_dict(self) -> dict:
        def text(value: Decimal) -> str:
            return format(value.normalize(EXACT_SUM), "f")

        return {"calculation_count": self.calculation_count, "activity_tkm": text(self.activity_tkm),
                "emissions_kg": text(self.emissions_kg), "emissions_ttw_kg": text(self.emissions_ttw_kg),
                "emissions_wtt_kg": text(self.emissions_wtt_kg)}


def is_period_key(key: tuple) -> bool:
    """True for a period rollup's key (environment, mode, business_context, span, activity_date)."""
    return len(key) == 5


def add_expected(expected: dict, environment: str, mode: str, business_context: str, day: dt.date,
                 activity: Decimal, emissions: Decimal, ttw: Decimal | None, wtt: Decimal | None) -> None:
    """Count one stored calculation into the day and month rows it belongs to."""
    for key in ((environment, mode, business_context, "day", day),
                (environment, mode, business_context, "month", day.replace(day=1))):
        totals = expected.get(key)
        if totals is None:
            totals = expected[key] = PeriodTotals()
        totals.add(activity, emissions, ttw, wtt)


def stored_rollups(customer_id: int) -> dict:
    """The customer's period rollup rows as they are stored: key -> PeriodTotals."""
    return {(row.environment, row.mode, row.business_context, row.span, row.activity_date):
            PeriodTotals(row.calculation_count, row.activity_tkm, row.emissions_kg, row.emissions_ttw_kg,
                         row.emissions_wtt_kg)
            for row in CustomerPeriodRollup.select().where(CustomerPeriodRollup.customer == customer_id)}


def replace_rollups(customer_id: int, expected: dict) -> None:
    """Replace the customer's period rollup rows by the period keys of `expected` (inside a transaction)."""
    CustomerPeriodRollup.delete().where(CustomerPeriodRollup.customer == customer_id).execute()
    rows = [{"customer": customer_id, "environment": environment, "span": span, "activity_date": day, "mode": mode,
             "business_context": context, "calculation_count": totals.calculation_count,
             "activity_tkm": totals.activity_tkm, "emissions_kg": totals.emissions_kg,
             "emissions_ttw_kg": totals.emissions_ttw_kg, "emissions_wtt_kg": totals.emissions_wtt_kg}
            for (environment, mode, context, span, day), totals in sorted(
                (key, value) for key, value in expected.items() if is_period_key(key))]
    for start in range(0, len(rows), 500):
        CustomerPeriodRollup.insert_many(rows[start:start + 500]).execute()
