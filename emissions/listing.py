"""GET /v1/calculations and GET /v1/shipments: a tenant's rows, newest first, filtered, a page at a time;
GET /v1/factors: the active factors a tenant may use, by reference, a page at a time.

Pages are cut by keyset (created_at, id), never by OFFSET, and every filter has an index that also
yields the order (migrations 0008 and 0013), so a page costs the same on the first day and after
millions of rows. docs/api.md, "Listing calculations", is the manual; the shipments' list follows it.
"""
from __future__ import annotations

import datetime as dt
from typing import NamedTuple

from . import factors
from . import jsoncodec
from . import store
from .errors import InvalidRequest
from .models import Calculation, Factor

DEFAULT_LIMIT = 20
MAX_LIMIT = 100
CALCULATION = "calculation"
SHIPMENT = "shipment"
TABLES = (CALCULATION, SHIPMENT)  # the tables a list reads; the only names put into its statements

# The customer's id stands for the organization and the environment: it is looked up in them, and a
# customer lives in one of each (so the planner takes the customer's index, not the tenant's).
BY_CUSTOMER = ("customer_id = (SELECT id FROM customer WHERE organization_id = ? AND environment = ?"
               " AND reference = ?)")


class Position(NamedTuple):
    """Where a page starts: the (created_at, id) of the row before it, as stored."""

    created_at: str | dt.datetime  # text on SQLite, a timestamp on PostgreSQL
    id: str


POSITION = "SELECT {} FROM {{}} WHERE id = ? AND organization_id = ? AND environment = ?".format(
    ", ".join(Position._fields))


def _day_after(day: dt.date) -> dt.datetime:
    """The first moment after the day (the last day a date can name ends at the last moment Python has)."""
    return dt.datetime.max if day == dt.date.max else _midnight(day) + dt.timedelta(days=1)


def _midnight(day: dt.date) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.timezone.utc)


def page_statement(organization_id: int, environment: str, query: dict, cursor: tuple | None = None,
                   table: str = CALCULATION) -> tuple[str, list]:
    """The SELECT of one page (limit + 1 bodies, to tell whether there are more) and its parameters."""
    assert table in TABLES, table
    if "customer_reference" in query:
        conditions, params = [BY_CUSTOMER], [organization_id, environment, query["customer_reference"]]
    else:
        conditions, params = ["organization_id = ?", "environment = ?"], [organization_id, environment]
    # Both tables store these columns alike (a DateField and a TimestampField).
    for name, condition, value in (
            ("external_reference", "external_reference = ?", lambda given: given),
            ("mode", "mode = ?", lambda given: given),
            ("activity_from", "activity_date >= ?", Calculation.activity_date.db_value),
            ("activity_to", "activity_date <= ?", Calculation.activity_date.db_value),
            ("created_from", "created_at >= ?", lambda day: Calculation.created_at.db_value(_midnight(day))),
            # inclusive: the whole day, UTC
            ("created_to", "created_at < ?", lambda day: Calculation.created_at.db_value(_day_after(day)))):
        if name in query:
            conditions.append(condition)
            params.append(value(query[name]))
    if cursor is not None:
        conditions.append("(created_at, id) < (?, ?)")  # a row value: the index seeks to it
        params.extend(cursor)
    text = (f"SELECT body FROM {table} WHERE " + " AND ".join(conditions)
            + " ORDER BY created_at DESC, id DESC LIMIT ?")
    return text, [*params, query.get("limit", DEFAULT_LIMIT) + 1]


def _position(table: str, organization_id: int, environment: str, row_id: str) -> Position:
    """Where the page after this row starts; the same tenant-safe 400 for an unknown and another tenant's id."""
    row = store.run(POSITION.format(table), (row_id, organization_id, environment)).fetchone()
    if row is None:
        raise InvalidRequest(f"The query parameter starting_after names no {table} of this environment.",
                             details=[{"field": "starting_after", "message": f"names no {table}"}])
    return Position(*row)


def page(organization_id: int, environment: str, query: dict, table: str = CALCULATION) -> str:
    """One page as the JSON text the API answers; each item is its stored body, byte for byte."""
    assert table in TABLES, table
    cursor = None
    if "starting_after" in query:
        cursor = _position(table, organization_id, environment, query["starting_after"])
    text, params = page_statement(organization_id, environment, query, cursor, table)
    bodies = [body for (body,) in store.run(text, tuple(params)).fetchall()]
    limit = query.get("limit", DEFAULT_LIMIT)
    has_more = len(bodies) > limit
    return ('{"object":"list","data":[' + ",".join(bodies[:limit]) + '],"has_more":'
            + ("true" if has_more else "false") + "}")


def factor_page(organization_id: int, query: dict) -> str:
    """One page of the active factors the organization may use (its own and the shared library's),
    in order of reference, as the JSON text the API answers.

    A reference has at most one active version and belongs to one owner, so it orders the list and
    marks a page's end. starting_after is compared, never looked up: a reference retired meanwhile
    still starts the page after it, and the answer says nothing about another organization's factors.
    """
    conditions = [Factor.status == "active",
                  Factor.organization.is_null() | (Factor.organization == organization_id)]
    for name, column in (("mode", Factor.mode), ("hub_type", Factor.hub_type), ("reference", Factor.reference)):
        if name in query:
            conditions.append(column == query[name])
    if "starting_after" in query:
        conditions.append(Factor.reference > query["starting_after"])
    limit = query.get("limit", DEFAULT_LIMIT)
    rows = list(Factor.select().where(*conditions).order_by(Factor.reference).limit(limit + 1))
    return jsoncodec.dumps({"object": "list", "data": [factors.listed(row) for row in rows[:limit]],
                            "has_more": len(rows) > limit})
