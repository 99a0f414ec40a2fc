"""What a request body must also keep that its schema cannot say: an activity date within the
accepted range (relative to today, by the service's clock) and a cargo within 10,000,000 tonnes
once TEU are counted in tonnes. The API checks these right after the schema, with the same 422."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

from . import clock
from .shipments import TONNES_PER_TEU, cargo_tonnes

FIRST_ACTIVITY_DATE = dt.date(2000, 1, 1)
MAX_CARGO_TONNES = Decimal(10_000_000)


def last_activity_date() -> dt.date:
    """One year after today (28 February for a 29 February)."""
    today = clock.today()
    try:
        return today.replace(year=today.year + 1)
    except ValueError:
        return today.replace(year=today.year + 1, day=28)


def activity_date_problem(text: str) -> str | None:
    """Why a schema-valid activity_date is refused, or None."""
    day = dt.date.fromisoformat(text)
    last = last_activity_date()
    if not FIRST_ACTIVITY_DATE <= day <= last:
        return f"must be from {FIRST_ACTIVITY_DATE.isoformat()} to {last.isoformat()} (one year after today)"
    return None


def details(body: dict) -> list[dict]:
    """{field, message} for every bound a schema-valid LogisticsRequest or ShipmentRequest breaks."""
    found = []
    problem = activity_date_problem(body["activity_date"])
    if problem:
        found.append({"field": "activity_date", "message": problem})
    cargo = body["cargo"]
    if cargo["unit"] == "TEU":
        if cargo_tonnes({**cargo, "tonnes_per_teu": cargo.get("tonnes_per_teu", TONNES_PER_TEU)}) > MAX_CARGO_TONNES:
            found.append({"field": "cargo", "message": "must be at most 10,000,000 tonnes "
                                                       "(TEU count × tonnes_per_teu)"})
    return found
