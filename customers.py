"""Customers and their analytics, kept as rollup rows updated with every calculation."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

from models import Customer, CustomerRollup, is_postgres, db

STATUSES = ("active", "suspended", "archived")
ZERO = Decimal(0)


def find(organization_id: int, environment: str, reference: str) -> Customer | None:
    """The customer with this reference in the organization and environment, if any."""
    return Customer.get_or_none((Customer.organization == organization_id)
                                & (Customer.environment == environment)
                                & (Customer.reference == reference))


def add_to_rollup(customer_id: int, environment: str, mode: str, business_context: str,
                  activity: Decimal, emissions: Decimal, activity_date: dt.date) -> None:
    """Add one calculation to its rollup row; call inside the calculation's transaction."""
    if is_postgres():
        # NUMERIC arithmetic in one atomic upsert: concurrent writers cannot lose an update.
        db.execute_sql(
            "INSERT INTO customer_rollup (customer_id, environment, mode, business_context,"
            " calculation_count, activity_tkm, emissions_kg, first_activity_date, last_activity_date)"
            " VALUES (%s, %s, %s, %s, 1, %s, %s, %s, %s)"
            " ON CONFLICT (customer_id, environment, mode, business_context) DO UPDATE SET"
            " calculation_count = customer_rollup.calculation_count + 1,"
            " activity_tkm = customer_rollup.activity_tkm + EXCLUDED.activity_tkm,"
            " emissions_kg = customer_rollup.emissions_kg + EXCLUDED.emissions_kg,"
            " first_activity_date = LEAST(customer_rollup.first_activity_date, EXCLUDED.first_activity_date),"
            " last_activity_date = GREATEST(customer_rollup.last_activity_date, EXCLUDED.last_activity_date)",
            (customer_id, environment, mode, business_context, activity, emissions, activity_date, activity_date),
        )
        return
    # SQLite keeps decimals as text, so the sum is made here; the IMMEDIATE transaction holds the
    # database's write lock, so no other writer can interleave between this read and the write.
    row = CustomerRollup.get_or_none(
        (CustomerRollup.customer == customer_id) & (CustomerRollup.environment == environment)
        & (CustomerRollup.mode == mode) & (CustomerRollup.business_context == business_context))
    if row is None:
        CustomerRollup.create(customer=customer_id, environment=environment, mode=mode,
                              business_context=business_context, calculation_count=1,
                              activity_tkm=activity, emissions_kg=emissions,
                              first_activity_date=activity_date, last_activity_date=activity_date)
        return
    (CustomerRollup.update(
        calculation_count=CustomerRollup.calculation_count + 1,
        activity_tkm=row.activity_tkm + activity,
        emissions_kg=row.emissions_kg + emissions,
        first_activity_date=min(row.first_activity_date, activity_date),
        last_activity_date=max(row.last_activity_date, activity_date),
    ).where(CustomerRollup.id == row.id).execute())


def _aggregate(count: int, activity: Decimal, emissions: Decimal) -> dict:
    return {"calculation_count": count,
            "activity": {"value": activity, "unit": "tkm"},
            "emissions": {"value": emissions, "unit": "kgCO2e"}}


def analytics(customer: Customer) -> dict:
    """The decided analytics shape, summed from the customer's rollup rows in its environment."""
    rows = list(CustomerRollup.select().where((CustomerRollup.customer == customer.id)
                                              & (CustomerRollup.environment == customer.environment)))
    return summarize(customer.environment, rows)


def summarize(environment: str, rows) -> dict:
    """Totals, per-mode and per-context aggregates from rollup-like rows."""
    by_mode: dict[str, list] = {}
    by_context: dict[str, list] = {}
    total = [0, ZERO, ZERO]
    first = last = None
    for row in rows:
        for bucket in (by_mode.setdefault(row.mode, [0, ZERO, ZERO]),
                       by_context.setdefault(row.business_context, [0, ZERO, ZERO]), total):
            bucket[0] += row.calculation_count
            bucket[1] += row.activity_tkm
            bucket[2] += row.emissions_kg
        first = row.first_activity_date if first is None else min(first, row.first_activity_date)
        last = row.last_activity_date if last is None else max(last, row.last_activity_date)
    return {
        "environment": environment,
        "calculation_count": total[0],
        "activity": {"value": total[1], "unit": "tkm"},
        "emissions": {"value": total[2], "unit": "kgCO2e"},
        "by_mode": {mode: _aggregate(*by_mode[mode]) for mode in ("ROAD", "SEA", "AIR") if mode in by_mode},
        "by_business_context": {context: _aggregate(*by_context[context])
                                for context in ("upstream", "downstream") if context in by_context},
        "first_activity_date": first.isoformat() if first else None,
        "last_activity_date": last.isoformat() if last else None,
    }
