"""`emissions analytics verify` and `rebuild`: the rollup rows recounted from the stored calculations
(and shipment hubs), compared with those stored, and replaced where they drifted (docs/cli.md)."""
from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Callable, Iterator

import peewee as pw

from ..db import db, exact_sum, is_postgres
from ..models import (ENVIRONMENTS, HUB, Calculation, Customer, CustomerPeriodRollup, CustomerRollup, Organization,
                      OrganizationPeriodRollup, ShipmentHub)
from ..sql import row_type, run, statement
from . import COUNT, EMISSIONS, SUMS, PeriodKey, RollupKey, Sums, Totals, sums_of

STREAM_BATCH = 5000

Progress = Callable[[int], None]


def _as_date(value) -> dt.date:
    return value if isinstance(value, dt.date) else dt.date.fromisoformat(value)


@dataclass
class Drift:
    """A customer whose stored rollup rows differ from the sums of its calculations."""

    customer: Customer
    organization: str
    expected: dict = field(default_factory=dict)  # RollupKey -> Totals, PeriodKey -> Sums
    stored: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"organization": self.organization, "environment": self.customer.environment,
                "customer": self.customer.reference, "rows": _differences(self.expected, self.stored)}


@dataclass
class OrganizationDrift:
    """An organization whose day rows (organization_period_rollup) differ from its customers' day rows
    added up; listed with the customers, its `customer` null."""

    organization: str
    environment: str
    expected: dict = field(default_factory=dict)  # PeriodKey -> Sums
    stored: dict = field(default_factory=dict)
    customer = None

    def to_dict(self) -> dict:
        return {"organization": self.organization, "environment": self.environment, "customer": None,
                "rows": _differences(self.expected, self.stored)}


def _differences(expected_rows: dict, stored_rows: dict) -> list[dict]:
    rows = []
    for key in sorted(set(expected_rows) | set(stored_rows)):
        expected, stored = expected_rows.get(key), stored_rows.get(key)
        if expected != stored:
            row = {"environment": key.environment, "mode": key.mode, "business_context": key.business_context}
            if isinstance(key, PeriodKey):
                row.update(span=key.span, activity_date=key.activity_date.isoformat())
            rows.append({**row, "expected": expected.to_dict() if expected else None,
                         "stored": stored.to_dict() if stored else None})
    return rows


@dataclass
class Check:
    """The outcome of a verify or rebuild run."""

    customers: int = 0
    calculations: int = 0
    drifted: list = field(default_factory=list)  # Drift, then OrganizationDrift


def _scope(query, model, organization_id: int | None, environment: str | None):
    if organization_id is not None:
        query = query.where(model.organization == organization_id)
    if environment is not None:
        query = query.where(model.environment == environment)
    return query


def count_calculations(organization_id: int | None = None, environment: str | None = None) -> int:
    """How many calculations a verify or rebuild of this scope will read (for a progress bar)."""
    return _scope(Calculation.select().where(Calculation.voided_at.is_null()), Calculation, organization_id,
                  environment).count()


def _customers(organization_id: int | None, environment: str | None) -> Iterator[tuple[Customer, str]]:
    """Customers in scope with their organization's slug, fetched in batches by id."""
    last_id = 0
    while True:
        query = (Customer.select(Customer, Organization.id, Organization.slug).join(Organization)
                 .where(Customer.id > last_id).order_by(Customer.id).limit(500))
        batch = list(_scope(query, Customer, organization_id, environment))
        if not batch:
            return
        for customer in batch:
            yield customer, customer.organization.slug
        last_id = batch[-1].id


def _stream(text: str, params: tuple) -> Iterator[list[tuple]]:
    """Rows of a query in batches, without holding the whole result in memory."""
    if is_postgres():
        # A server-side cursor; psycopg2 allows it under peewee's autocommit only WITH HOLD. It
        # is closed before the transaction ends, so nothing is ever materialised.
        cursor = db.connection().cursor(name="stream_" + uuid.uuid4().hex, withhold=True)
        cursor.itersize = STREAM_BATCH
        cursor.execute(statement(text), params)
    else:
        cursor = run(text, params)  # sqlite3 steps through rows as they are fetched
    try:
        while batch := cursor.fetchmany(STREAM_BATCH):
            yield batch
    finally:
        cursor.close()


CalculationTotals = row_type("CalculationTotals", Calculation,
                             ("environment", "mode", "business_context", "activity_date", *SUMS),
                             doc="What a stored calculation adds to its customer's rollups.")
# By hand: a rebuild streams every calculation of a customer through a cursor of its own.
# A voided calculation counts in no rollup (docs/api.md, "Corrections").
CALCULATION_TOTALS = (f"SELECT {', '.join(CalculationTotals._fields)} FROM calculation"
                      " WHERE customer_id = ? AND voided_at IS NULL")


def _add_expected_period(expected: dict, key: RollupKey, day: dt.date, values: list) -> None:
    """Count one stored calculation (its values in the order of SUMS) into the day and month rows it belongs to."""
    for period_key in (PeriodKey(*key, "day", day), PeriodKey(*key, "month", day.replace(day=1))):
        sums = expected.get(period_key)
        if sums is None:
            sums = expected[period_key] = Sums()
        sums.add(*values)


def expected_rollups(customer_id: int, progress: Progress | None = None) -> dict:
    """Rollup rows, and period rollup rows, recomputed from the customer's stored calculations:
    RollupKey -> Totals, PeriodKey -> Sums."""
    expected: dict = {}
    dates: dict = {}  # raw date value -> date (SQLite returns text; a customer has few distinct days)
    for batch in _stream(CALCULATION_TOTALS, (customer_id,)):
        for row in map(CalculationTotals._make, batch):
            key = RollupKey(row.environment, row.mode, row.business_context)
            totals = expected.get(key)
            if totals is None:
                totals = expected[key] = Totals()
            day = dates.get(row.activity_date)
            if day is None:
                day = dates[row.activity_date] = _as_date(row.activity_date)
            values = [None if value is None else Decimal(value) for value in (getattr(row, name) for name in SUMS)]
            totals.add(day, *values)
            _add_expected_period(expected, key, day, values)
        if progress:
            progress(len(batch))
    _add_hubs(customer_id, expected)
    return expected


def _add_hubs(customer_id: int, expected: dict) -> None:
    """Shipments: the customer's hub elements, as the HUB rollup rows (activity: tonnes handled)."""
    for hub in ShipmentHub.select().where((ShipmentHub.customer == customer_id) & ShipmentHub.voided_at.is_null()):
        key = RollupKey(hub.environment, HUB, hub.business_context)
        values = [hub.tonnes, *(getattr(hub, name) for name in EMISSIONS)]
        expected.setdefault(key, Totals()).add(hub.activity_date, *values)
        _add_expected_period(expected, key, hub.activity_date, values)


def stored_period_rollups(customer_id: int) -> dict:
    """The customer's period rollup rows as they are stored: PeriodKey -> Sums."""
    return {PeriodKey(row.environment, row.mode, row.business_context, row.span, row.activity_date): sums_of(row)
            for row in CustomerPeriodRollup.select().where(CustomerPeriodRollup.customer == customer_id)}


def stored_rollups(customer_id: int) -> dict:
    """The customer's rollup rows and period rollup rows as they are stored: RollupKey -> Totals, PeriodKey -> Sums."""
    return {**{RollupKey(row.environment, row.mode, row.business_context):
               sums_of(row, Totals, first_activity_date=row.first_activity_date,
                        last_activity_date=row.last_activity_date)
               for row in CustomerRollup.select().where(CustomerRollup.customer == customer_id)},
            **stored_period_rollups(customer_id)}


def _snapshot():
    """A read-only transaction that sees one consistent state of calculations and rollups."""
    if is_postgres():
        return db.atomic(isolation_level="REPEATABLE READ")
    return db.atomic(lock_type="DEFERRED")  # in WAL mode a read transaction is a snapshot


def _counted(expected: dict) -> int:
    """The calculations counted; hubs are written with their shipment's legs, so these count them too."""
    return sum(totals.calculation_count for key, totals in expected.items()
               if isinstance(key, RollupKey) and key.mode != HUB)


def _check(organization_id: int | None, environment: str | None, progress: Progress | None,
           repair: bool) -> Check:
    outcome = Check()
    # A drifted customer's day rows, as they should be less as they are, per organization and
    # environment: what verify adds to the stored customer rows to check the organization's against.
    corrections: dict[tuple, dict] = {}
    for customer, slug in _customers(organization_id, environment):
        with _snapshot():  # no lock while counting: calculations keep being written meanwhile
            stored = stored_rollups(customer.id)
            expected = expected_rollups(customer.id, progress)
            voided = _calculations_and_voids(customer.id)[1] if repair else 0
        outcome.customers += 1
        outcome.calculations += _counted(expected)
        if expected != stored:
            if repair:
                expected = _repair(customer.id, expected, voided)
            else:
                correction = corrections.setdefault((customer.organization.id, customer.environment), {})
                _shift(correction, expected, 1)
                _shift(correction, stored, -1)
            outcome.drifted.append(Drift(customer, slug, expected, stored))
    # After the customers (a rebuild has repaired theirs): the organizations' day rows against them.
    organizations = Organization.select(Organization.id, Organization.slug).order_by(Organization.id)
    if organization_id is not None:
        organizations = organizations.where(Organization.id == organization_id)
    for organization in organizations:
        for env in (environment,) if environment else ENVIRONMENTS:
            with _snapshot():
                stored = stored_organization_days(organization.id, env)
                expected = expected_organization_days(organization.id, env)
            _shift(expected, corrections.get((organization.id, env), {}), 1)
            expected = {key: sums for key, sums in expected.items() if sums.calculation_count}
            if expected != stored:
                if repair:
                    expected = _repair_organization_days(organization.id, env)
                outcome.drifted.append(OrganizationDrift(organization.slug, env, expected, stored))
    return outcome


def _shift(sums: dict, rows: dict, sign: int) -> None:
    """Add (sign 1) or take away (-1) the day rows of `rows` to or from `sums` (PeriodKey -> Sums)."""
    for key, row in rows.items():
        if isinstance(key, PeriodKey) and key.span == "day":
            sums.setdefault(key, Sums()).shifted(row, sign)


# --- the organizations' day rows: their customers' day rows added up ------------------------------

def expected_organization_days(organization_id: int, environment: str) -> dict:
    """The organization's day rows as its customers' day rows add up (the database sums them): PeriodKey -> Sums."""
    p = CustomerPeriodRollup
    rows = (p.select(p.activity_date, p.mode, p.business_context,
                     pw.fn.SUM(p.calculation_count).coerce(False).alias(COUNT),
                     *(exact_sum(getattr(p, name)).alias(name) for name in SUMS))
            .join(Customer, on=(p.customer == Customer.id))
            .where((Customer.organization == organization_id) & (p.environment == environment) & (p.span == "day"))
            .group_by(p.activity_date, p.mode, p.business_context).namedtuples())
    return {PeriodKey(environment, row.mode, row.business_context, "day", _as_date(row.activity_date)):
            Sums(**{COUNT: int(getattr(row, COUNT))}, **{name: Decimal(str(getattr(row, name))) for name in SUMS})
            for row in rows}


def stored_organization_days(organization_id: int, environment: str) -> dict:
    """The organization's day rows as they are stored: PeriodKey -> Sums."""
    o = OrganizationPeriodRollup
    return {PeriodKey(environment, row.mode, row.business_context, "day", row.activity_date): sums_of(row)
            for row in o.select().where((o.organization == organization_id) & (o.environment == environment)
                                        & (o.span == "day"))}


def _insert_rows(model: type[pw.Model], owner: dict, rows: dict) -> None:
    """Insert a row of `model` per key and sums of `rows`, owned by `owner` (its customer or organization)."""
    values = [{**owner, **key._asdict(), **dataclasses.asdict(sums)} for key, sums in sorted(rows.items())]
    for start in range(0, len(values), 500):
        model.insert_many(values[start:start + 500]).execute()


def _repair_organization_days(organization_id: int, environment: str) -> dict:
    """Replace the organization's day rows by its customers' day rows added up; return what was written.

    Under a lock that keeps the organization's writers out (on PostgreSQL FOR UPDATE on its row,
    which every write's first insert holds a KEY SHARE lock on; on SQLite the write lock), so that
    the sums and the rows replaced are of one moment."""
    with db.atomic():
        lock_organization(organization_id)
        expected = expected_organization_days(organization_id, environment)
        o = OrganizationPeriodRollup
        o.delete().where((o.organization == organization_id) & (o.environment == environment)
                         & (o.span == "day")).execute()
        _insert_rows(o, {"organization": organization_id}, expected)
    return expected


def _calculations_and_voids(customer_id: int) -> tuple[int, int]:
    """How many of the customer's calculations count, and how many are voided."""
    counted, voided = (Calculation.select(pw.fn.COUNT(Calculation.id).coerce(False),
                                          pw.fn.COUNT(Calculation.voided_at).coerce(False))
                       .where(Calculation.customer == customer_id).tuples().get())
    return int(counted) - int(voided), int(voided)


def _repair(customer_id: int, expected: dict, voided: int, attempts: int = 3) -> dict:
    """Write the recounted rows; return what was written.

    Calculations are only ever added or voided, so an unchanged count of calculations and of voided
    ones under the lock means the recount is still the truth: the lock is held for a count, not for
    a recount. When calculations arrived or were voided in between, count again; after a few tries,
    recount under the lock.
    """
    for _ in range(attempts):
        with db.atomic():
            lock_customer(customer_id)
            if _calculations_and_voids(customer_id) == (_counted(expected), voided):
                _replace_rollups(customer_id, expected)
                return expected
        with _snapshot():
            expected = expected_rollups(customer_id)
            voided = _calculations_and_voids(customer_id)[1]
    with db.atomic():
        lock_customer(customer_id)
        expected = expected_rollups(customer_id)
        _replace_rollups(customer_id, expected)
    return expected


def _replace_rollups(customer_id: int, expected: dict) -> None:
    """Replace the customer's rollup rows and period rollup rows by `expected` (inside a transaction)."""
    owner = {"customer": customer_id}
    CustomerRollup.delete().where(CustomerRollup.customer == customer_id).execute()
    CustomerPeriodRollup.delete().where(CustomerPeriodRollup.customer == customer_id).execute()
    _insert_rows(CustomerPeriodRollup, owner, {key: sums for key, sums in expected.items()
                                               if isinstance(key, PeriodKey)})
    _insert_rows(CustomerRollup, owner, {key: totals for key, totals in expected.items()
                                         if isinstance(key, RollupKey)})


LOCK_CUSTOMER = "SELECT id FROM customer WHERE id = ? FOR UPDATE"


def lock_customer(customer_id: int) -> None:
    """On PostgreSQL, keep new calculations of this customer out until the transaction ends: FOR
    UPDATE conflicts with the KEY SHARE lock every calculation's foreign key takes on its customer.
    On SQLite the IMMEDIATE transaction already holds the write lock."""
    if is_postgres():
        run(LOCK_CUSTOMER, (customer_id,))


LOCK_ORGANIZATION = "SELECT id FROM organization WHERE id = ? FOR UPDATE"


def lock_organization(organization_id: int) -> None:
    """On PostgreSQL, keep the organization's new calculations and shipments out until the transaction
    ends (as lock_customer does a customer's): each one's first insert takes a KEY SHARE lock on
    the organization's row. On SQLite the IMMEDIATE transaction already holds the write lock."""
    if is_postgres():
        run(LOCK_ORGANIZATION, (organization_id,))


def verify(organization_id: int | None = None, environment: str | None = None,
           progress: Progress | None = None) -> Check:
    """Recompute every customer's rollup rows in scope from its calculations; report the drift."""
    return _check(organization_id, environment, progress, repair=False)


def rebuild(organization_id: int | None = None, environment: str | None = None,
            progress: Progress | None = None) -> Check:
    """Like verify, and rewrite each drifted customer's rollup rows (one short transaction each)."""
    return _check(organization_id, environment, progress, repair=True)
