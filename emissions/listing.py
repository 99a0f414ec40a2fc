"""GET /v1/calculations: a tenant's calculations, newest first, filtered, a page at a time.

Pages are cut by keyset (created_at, id), never by OFFSET, and every filter has an index that also
yields the order (migration 0008), so a page costs the same on the first day and after millions
of calculations. docs/api.md, "Listing calculations", is the manual.
"""
from __future__ import annotations

import datetime as dt

from . import store
from .errors import InvalidRequest
from .models import Calculation

DEFAULT_LIMIT = 20
MAX_LIMIT = 100

CURSOR = "SELECT created_at, id FROM calculation WHERE id = ? AND organization_id = ? AND environment = ?"
# The customer's id stands for the organization and the environment: it is looked up in them, and a
# customer lives in one of each (so the planner takes calculation_customer_created, not the tenant's index).
BY_CUSTOMER = ("customer_id = (SELECT id FROM customer WHERE organization_id = ? AND environment = ?"
               " AND reference = ?)")


def _midnight(day: dt.date) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.timezone.utc)


def page_statement(organization_id: int, environment: str, query: dict,
                   cursor: tuple | None = None) -> tuple[str, list]:
    """The SELECT of one page (limit + 1 bodies, to tell whether there are more) and its parameters."""
    if "customer_reference" in query:
        conditions, params = [BY_CUSTOMER], [organization_id, environment, query["customer_reference"]]
    else:
        conditions, params = ["organization_id = ?", "environment = ?"], [organization_id, environment]
    if "external_reference" in query:
        conditions.append("external_reference = ?")
        params.append(query["external_reference"])
    if "mode" in query:
        conditions.append("mode = ?")
        params.append(query["mode"])
    if "activity_from" in query:
        conditions.append("activity_date >= ?")
        params.append(Calculation.activity_date.db_value(query["activity_from"]))
    if "activity_to" in query:
        conditions.append("activity_date <= ?")
        params.append(Calculation.activity_date.db_value(query["activity_to"]))
    if "created_from" in query:
        conditions.append("created_at >= ?")
        params.append(Calculation.created_at.db_value(_midnight(query["created_from"])))
    if "created_to" in query:  # inclusive: the whole day, UTC
        conditions.append("created_at < ?")
        params.append(Calculation.created_at.db_value(_midnight(query["created_to"]) + dt.timedelta(days=1)))
    if cursor is not None:
        conditions.append("(created_at, id) < (?, ?)")  # a row value: the index seeks to it
        params.extend(cursor)
    text = ("SELECT body FROM calculation WHERE " + " AND ".join(conditions)
            + " ORDER BY created_at DESC, id DESC LIMIT ?")
    return text, [*params, query.get("limit", DEFAULT_LIMIT) + 1]


def _cursor(organization_id: int, environment: str, calculation_id: str) -> tuple:
    """(created_at, id) as stored, of the calculation a page starts after; tenant-safe 400 if none."""
    row = store.run(CURSOR, (calculation_id, organization_id, environment)).fetchone()
    if row is None:
        raise InvalidRequest("The query parameter starting_after names no calculation of this environment.",
                             details=[{"field": "starting_after", "message": "names no calculation"}])
    return tuple(row)


def page(organization_id: int, environment: str, query: dict) -> str:
    """One page as the JSON text the API answers; each calculation is its stored body, byte for byte."""
    cursor = None
    if "starting_after" in query:
        cursor = _cursor(organization_id, environment, query["starting_after"])
    text, params = page_statement(organization_id, environment, query, cursor)
    bodies = [row[0] for row in store.run(text, tuple(params)).fetchall()]
    limit = query.get("limit", DEFAULT_LIMIT)
    has_more = len(bodies) > limit
    return ('{"object":"list","data":[' + ",".join(bodies[:limit]) + '],"has_more":'
            + ("true" if has_more else "false") + "}")
