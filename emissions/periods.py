"""A customer's analytics for a period of activity dates, and by month, from customer_period_rollup.

Each calculation adds to the row of its activity day and to the row of its activity month (one
upsert of two rows, rollups.add_to_period_rollups, in the calculation's own transaction). A period
is read as the month rows of the whole months inside it and the day rows of the partial months at either end, so a
year's analytics reads at most 12 month rows and 62 day rows per mode and business context, however
many calculations the customer has (migration 0009; docs/api.md, "Customers and analytics").
"""
from __future__ import annotations

import datetime as dt
from functools import lru_cache

from . import analytics
from . import jsoncodec
from . import limits
from . import rollups
from . import sql
from .models import customer_view

EARLIEST, LATEST = dt.date(1, 1, 1), dt.date(9999, 12, 31)
NO_DAYS = (LATEST, EARLIEST)  # a range no date is in


def next_month(day: dt.date) -> dt.date | None:
    """The first day of the following month; None after December 9999."""
    if day.year == 9999 and day.month == 12:
        return None
    return dt.date(day.year + day.month // 12, day.month % 12 + 1, 1)


def _is_month_end(day: dt.date) -> bool:
    following = next_month(day)
    return day.day == 31 if following is None else following - dt.timedelta(days=1) == day


def ranges(start: dt.date, end: dt.date) -> tuple[tuple, tuple, tuple]:
    """(the first days of the first and last whole month, the days before them, the days after them);
    when no whole month is inside start..end, no months and all of its days."""
    first_whole = start if start.day == 1 else next_month(start)
    if _is_month_end(end):
        last_whole = end.replace(day=1)
    elif end.replace(day=1) > EARLIEST:
        last_whole = (end.replace(day=1) - dt.timedelta(days=1)).replace(day=1)
    else:
        last_whole = None
    if first_whole is None or last_whole is None or first_whole > last_whole:
        return NO_DAYS, (start, end), NO_DAYS
    after_whole = next_month(last_whole)
    before = (start, first_whole - dt.timedelta(days=1)) if start < first_whole else NO_DAYS
    after = (after_whole, end) if after_whole is not None and after_whole <= end else NO_DAYS
    return (first_whole, last_whole), before, after


def analytics_json(organization_id: int, environment: str, reference: str, start: dt.date | None = None,
                   end: dt.date | None = None) -> str | None:
    """The customer with its analytics over activity dates start..end (inclusive; None is open), as the
    JSON text the API answers, or None when there is no such customer. In one SELECT; on SQLite
    after a PRAGMA, and when the database has not changed since this connection last answered the
    same question, the PRAGMA alone (sql.unchanged_since).

    Without start and end, the lifetime analytics exactly as before, plus period and by_month.
    """
    asked = (organization_id, environment, reference, start, end)
    stamp = sql.unchanged_since()  # taken before the read: a commit in between only costs a read more
    if stamp is not None:
        kept_stamp, kept_text = _answered.get(asked, (None, None))
        if kept_stamp == stamp:
            return kept_text
    text = _read(*asked)
    if stamp is not None:
        if len(_answered) >= ANSWERS_KEPT:
            _answered.clear()
        _answered[asked] = (stamp, text)
    return text


# (organization_id, environment, reference, start, end) -> (sql.unchanged_since() before it was read, answer)
_answered: dict = {}
ANSWERS_KEPT = 1024


def _read(organization_id: int, environment: str, reference: str, start: dt.date | None,
          end: dt.date | None) -> str | None:
    """analytics_json() without the kept answers: one SELECT."""
    customer = (organization_id, environment, reference)
    if start is None and end is None:
        rows = rollups.lifetime(*customer)
    else:
        period = (start or EARLIEST, end or LATEST)
        rows = rollups.in_period(*customer, period, ranges(*period))
    return _analytics_text(environment, reference, rows, start, end)


@lru_cache(maxsize=1024)
def _analytics_text(environment: str, reference: str, rows: tuple, start: dt.date | None,
                    end: dt.date | None) -> str | None:
    """The answer made from the rows alone: the one made from the same rows is reused (so the rows are
    taken apart only when no answer is kept for them)."""
    if start is None and end is None:
        found = rollups.lifetime_parts(rows)
        if found is None:
            return None
        customer, lifetime_rows, periods = found
        view = analytics.lifetime_view(environment, reference, customer, lifetime_rows)
    else:
        found = rollups.period_parts(rows)
        if found is None:
            return None
        customer, edges, periods = found
        first, last = (None, None) if edges is None else (edges.first_activity_date, edges.last_activity_date)
        view = customer_view(reference, customer.name, customer.status, customer.country_code,
                             analytics.summarize(environment, periods, first, last))
    view["analytics"]["period"] = {"from": start.isoformat() if start else None, "to": end.isoformat() if end else None}
    view["analytics"]["by_month"] = by_month(environment, periods)
    return jsoncodec.dumps(view)


def by_month(environment: str, rows: list[rollups.PeriodRow]) -> list[dict]:
    """Per activity month with data, in month order: count, activity and emissions with their breakdown."""
    months: dict[str, list] = {}
    for row in rows:
        months.setdefault(limits.period_of(row.activity_date), []).append(row)
    answer = []
    for month in sorted(months):
        totals = analytics.summarize(environment, months[month])
        answer.append({"month": month, "calculation_count": totals["calculation_count"],
                       "activity": totals["activity"], "emissions": totals["emissions"]})
    return answer
