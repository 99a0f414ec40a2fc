"""A customer's analytics for a period of activity dates, and by month, from customer_period_rollup.

Each calculation adds to the row of its activity day and to the row of its activity month (one
upsert of two rows, store.add_to_period_rollups, in the calculation's own transaction). A period is read as the month
rows of the whole months inside it and the day rows of the partial months at either end, so a
year's analytics reads at most 12 month rows and 62 day rows per mode and business context, however
many calculations the customer has (migration 0009; docs/api.md, "Customers and analytics").
"""
from __future__ import annotations

import datetime as dt
from decimal import Decimal
from functools import lru_cache

from . import analytics
from . import jsoncodec
from . import store
from .models import CustomerPeriodRollup, CustomerRollup, customer_view

ZERO = Decimal(0)
EARLIEST, LATEST = dt.date(1, 1, 1), dt.date(9999, 12, 31)
NO_DAYS = (LATEST, EARLIEST)  # a range no date is in


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

# The customer, its lifetime rollup rows and every month row.
LIFETIME = store.FIND_WITH_ROLLUPS + " UNION ALL " + _PERIOD_ROWS.format(span="month", dates="")


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
    JSON text the API answers, or None when there is no such customer. In one SELECT; on SQLite
    after a PRAGMA, and when the database has not changed since this connection last answered the
    same question, the PRAGMA alone (store.unchanged_since).

    Without start and end, the lifetime analytics exactly as before, plus period and by_month.
    """
    asked = (organization_id, environment, reference, start, end)
    stamp = store.unchanged_since()  # taken before the read: a commit in between only costs a read more
    if stamp is not None:
        kept = _answered.get(asked)
        if kept is not None and kept[0] == stamp:
            return kept[1]
    text = _read(*asked)
    if stamp is not None:
        if len(_answered) >= ANSWERS_KEPT:
            _answered.clear()
        _answered[asked] = (stamp, text)
    return text


# (organization_id, environment, reference, start, end) -> (store.unchanged_since() before it was read, answer)
_answered: dict = {}
ANSWERS_KEPT = 1024


def _read(organization_id: int, environment: str, reference: str, start: dt.date | None,
          end: dt.date | None) -> str | None:
    """analytics_json() without the kept answers: one SELECT."""
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
    """The answer made from the rows alone: the one made from the same rows is reused (so the rows are
    named only when no answer is kept for them)."""
    rows = [store.CustomerWithRollup(*row) for row in rows]
    own = [row for row in rows if row.name is not None]
    if not own:
        return None
    periods = [_rollup_row(row) for row in rows if row.name is None]
    if start is None and end is None:
        view = analytics._analytics_view(environment, reference, own)
    else:
        customer = own[0]
        totals = analytics.summarize(environment, periods)
        date_of = CustomerRollup.first_activity_date.python_value
        first, last = date_of(customer.first_activity_date), date_of(customer.last_activity_date)
        totals["first_activity_date"] = first.isoformat() if first else None
        totals["last_activity_date"] = last.isoformat() if last else None
        view = customer_view(reference, customer.name, customer.status, customer.country_code, totals)
    view["analytics"]["period"] = {"from": start.isoformat() if start else None, "to": end.isoformat() if end else None}
    view["analytics"]["by_month"] = by_month(environment, periods)
    return jsoncodec.dumps(view)


def _rollup_row(row: store.CustomerWithRollup) -> analytics.RollupRow:
    """A period row (its date where first_activity_date is) as the rollup row summarize() takes."""
    decimal_of, date_of = CustomerRollup.activity_tkm.python_value, CustomerRollup.first_activity_date.python_value
    day = date_of(row.first_activity_date)
    return analytics.RollupRow(row.mode, row.business_context, row.calculation_count, decimal_of(row.activity_tkm),
                               decimal_of(row.emissions_kg), day, day, decimal_of(row.emissions_ttw_kg),
                               decimal_of(row.emissions_wtt_kg))


def by_month(environment: str, rows: list) -> list[dict]:
    """Per activity month with data, in month order: count, activity and emissions with their breakdown."""
    months: dict[str, list] = {}
    for row in rows:
        day = row.first_activity_date  # strftime("%Y") writes the year 999 as "999"
        months.setdefault(f"{day.year:04d}-{day.month:02d}", []).append(row)
    answer = []
    for month in sorted(months):
        totals = analytics.summarize(environment, months[month])
        answer.append({"month": month, "calculation_count": totals["calculation_count"],
                       "activity": totals["activity"], "emissions": totals["emissions"]})
    return answer
