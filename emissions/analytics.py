"""Customer analytics: the rollup rows updated with every calculation, read and summarised for the
API, and the operator's verify and rebuild of those rows from the stored calculations."""
from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Callable, Iterator, NamedTuple

import peewee as pw

from . import store
from .db import EXACT_SUM, db, exact_sum, is_postgres
from .models import (ENVIRONMENTS, HUB, Calculation, Customer, CustomerPeriodRollup, CustomerRollup, Organization,
                     OrganizationPeriodRollup, ShipmentHub, customer_view)

ZERO = Decimal(0)
EXACT = EXACT_SUM  # every sum is made in this context, the one SQLite's decimal_add uses
STREAM_BATCH = 5000

Progress = Callable[[int], None]


# --- the analytics, read from the rollup -------------------------------------------------------

def _aggregate(count: int, activity: Decimal, emissions: Decimal, ttw: Decimal = ZERO, wtt: Decimal = ZERO) -> dict:
    return {"calculation_count": count,
            "activity": {"value": activity, "unit": "tkm"},
            "emissions": _emissions(emissions, ttw, wtt)}


def _emissions(emissions: Decimal, ttw: Decimal, wtt: Decimal) -> dict:
    """Emissions with their parts: ttw and wtt over the calculations that have them, and the
    emissions of those that do not (unattributed), so that the three add up to value exactly."""
    unattributed = EXACT.subtract(EXACT.subtract(emissions, ttw), wtt)
    return {"value": emissions, "unit": "kgCO2e",
            "breakdown": {"ttw": ttw, "wtt": wtt, "unattributed": unattributed}}


class RollupRow(NamedTuple):
    mode: str
    business_context: str
    calculation_count: int
    activity_tkm: Decimal
    emissions_kg: Decimal
    first_activity_date: dt.date
    last_activity_date: dt.date
    emissions_ttw_kg: Decimal = ZERO
    emissions_wtt_kg: Decimal = ZERO


def find_with_analytics(organization_id: int, environment: str, reference: str) -> dict | None:
    """The customer with this reference and its analytics, as the API shows it, or None, in one statement."""
    rows = store.customer_with_rollups(organization_id, environment, reference)
    return _analytics_view(environment, reference, rows) if rows else None


def _analytics_view(environment: str, reference: str, rows: list[store.CustomerWithRollup]) -> dict:
    first = rows[0]
    decimal_of, date_of = CustomerRollup.activity_tkm.python_value, CustomerRollup.first_activity_date.python_value
    rollups = [RollupRow(row.mode, row.business_context, row.calculation_count, decimal_of(row.activity_tkm),
                         decimal_of(row.emissions_kg), date_of(row.first_activity_date),
                         date_of(row.last_activity_date), decimal_of(row.emissions_ttw_kg),
                         decimal_of(row.emissions_wtt_kg))
               for row in rows if row.mode is not None]
    return customer_view(reference, first.name, first.status, first.country_code, summarize(environment, rollups))


def summarize(environment: str, rows) -> dict:
    """Totals, per-mode and per-context aggregates from rollup-like rows."""
    by_mode: dict[str, list] = {}
    by_context: dict[str, list] = {}
    total = [0, ZERO, ZERO, ZERO, ZERO]
    first = last = None
    for row in rows:
        for bucket in (by_mode.setdefault(row.mode, [0, ZERO, ZERO, ZERO, ZERO]),
                       by_context.setdefault(row.business_context, [0, ZERO, ZERO, ZERO, ZERO]), total):
            if row.mode == HUB and bucket is not by_mode[HUB]:  # shipments: hubs add only their emissions
                bucket[2:] = [EXACT.add(bucket[2], row.emissions_kg), EXACT.add(bucket[3], row.emissions_ttw_kg),
                              EXACT.add(bucket[4], row.emissions_wtt_kg)]
                continue
            bucket[0] += row.calculation_count
            bucket[1] = EXACT.add(bucket[1], row.activity_tkm)
            bucket[2] = EXACT.add(bucket[2], row.emissions_kg)
            bucket[3] = EXACT.add(bucket[3], row.emissions_ttw_kg)
            bucket[4] = EXACT.add(bucket[4], row.emissions_wtt_kg)
        first = row.first_activity_date if first is None else min(first, row.first_activity_date)
        last = row.last_activity_date if last is None else max(last, row.last_activity_date)
    return {
        "environment": environment,
        "calculation_count": total[0],
        "activity": {"value": total[1], "unit": "tkm"},
        "emissions": _emissions(*total[2:]),
        "by_mode": {mode: _aggregate(*by_mode[mode]) for mode in ("ROAD", "SEA", "AIR", "RAIL") if mode in by_mode},
        "by_business_context": {context: _aggregate(*by_context[context])
                                for context in ("upstream", "downstream") if context in by_context},
        "first_activity_date": first.isoformat() if first else None,
        "last_activity_date": last.isoformat() if last else None,
        **_hubs(by_mode.get(HUB)),
    }


def _hubs(bucket: list | None) -> dict:
    """Shipments: the `hubs` block (present when the customer's shipments have hubs); activity in tonnes handled."""
    if bucket is None:
        return {}
    return {"hubs": {"count": bucket[0], "activity": {"value": bucket[1], "unit": "tonne"},
                     "emissions": _emissions(*bucket[2:])}}


# --- period rollup rows in verify and rebuild ------------------------------------------------------

@dataclass
class PeriodTotals:
    """What one period rollup row holds, or should hold."""

    calculation_count: int = 0
    activity_tkm: Decimal = ZERO
    emissions_kg: Decimal = ZERO
    emissions_ttw_kg: Decimal = ZERO  # over the calculations that have parts
    emissions_wtt_kg: Decimal = ZERO

    def add(self, activity: Decimal, emissions: Decimal, ttw: Decimal | None, wtt: Decimal | None) -> None:
        self.calculation_count += 1
        self.activity_tkm = EXACT.add(self.activity_tkm, activity)
        self.emissions_kg = EXACT.add(self.emissions_kg, emissions)
        if ttw is not None:
            self.emissions_ttw_kg = EXACT.add(self.emissions_ttw_kg, ttw)
            self.emissions_wtt_kg = EXACT.add(self.emissions_wtt_kg, wtt)

    def to_dict(self) -> dict:
        def text(value: Decimal) -> str:
            return format(value.normalize(EXACT), "f")

        return {"calculation_count": self.calculation_count, "activity_tkm": text(self.activity_tkm),
                "emissions_kg": text(self.emissions_kg), "emissions_ttw_kg": text(self.emissions_ttw_kg),
                "emissions_wtt_kg": text(self.emissions_wtt_kg)}


def is_period_key(key: tuple) -> bool:
    """True for a period rollup's key (environment, mode, business_context, span, activity_date)."""
    return len(key) == 5


def add_expected_period(expected: dict, environment: str, mode: str, business_context: str, day: dt.date,
                 activity: Decimal, emissions: Decimal, ttw: Decimal | None, wtt: Decimal | None) -> None:
    """Count one stored calculation into the day and month rows it belongs to."""
    for key in ((environment, mode, business_context, "day", day),
                (environment, mode, business_context, "month", day.replace(day=1))):
        totals = expected.get(key)
        if totals is None:
            totals = expected[key] = PeriodTotals()
        totals.add(activity, emissions, ttw, wtt)


def stored_period_rollups(customer_id: int) -> dict:
    """The customer's period rollup rows as they are stored: key -> PeriodTotals."""
    return {(row.environment, row.mode, row.business_context, row.span, row.activity_date):
            PeriodTotals(row.calculation_count, row.activity_tkm, row.emissions_kg, row.emissions_ttw_kg,
                         row.emissions_wtt_kg)
            for row in CustomerPeriodRollup.select().where(CustomerPeriodRollup.customer == customer_id)}


def replace_period_rollups(customer_id: int, expected: dict) -> None:
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


# --- verify and rebuild ------------------------------------------------------------------------

RollupKey = tuple  # (environment, mode, business_context); a period row's adds (span, activity_date)


@dataclass
class Totals(PeriodTotals):
    """What one rollup row holds, or should hold: a period row's sums and the activity dates' span."""

    first_activity_date: dt.date | None = None
    last_activity_date: dt.date | None = None

    def add(self, activity: Decimal, emissions: Decimal, activity_date: dt.date,
            ttw: Decimal | None = None, wtt: Decimal | None = None) -> None:
        super().add(activity, emissions, ttw, wtt)
        if self.first_activity_date is None or activity_date < self.first_activity_date:
            self.first_activity_date = activity_date
        if self.last_activity_date is None or activity_date > self.last_activity_date:
            self.last_activity_date = activity_date

    def to_dict(self) -> dict:
        return {**super().to_dict(), "first_activity_date": _iso(self.first_activity_date),
                "last_activity_date": _iso(self.last_activity_date)}


def _iso(value) -> str | None:
    return None if value is None else value.isoformat()


def _as_date(value) -> dt.date:
    return value if isinstance(value, dt.date) else dt.date.fromisoformat(value)


@dataclass
class Drift:
    """A customer whose stored rollup rows differ from the sums of its calculations."""

    customer: Customer
    organization: str
    expected: dict = field(default_factory=dict)  # RollupKey -> Totals
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
    expected: dict = field(default_factory=dict)  # a period key -> PeriodTotals
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
            row = {"environment": key[0], "mode": key[1], "business_context": key[2]}
            if is_period_key(key):
                row.update(span=key[3], activity_date=key[4].isoformat())
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
    return _scope(Calculation.select(), Calculation, organization_id, environment).count()


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
        cursor.execute(store.statement(text), params)
    else:
        cursor = store.run(text, params)  # sqlite3 steps through rows as they are fetched
    try:
        while batch := cursor.fetchmany(STREAM_BATCH):
            yield batch
    finally:
        cursor.close()


def expected_rollups(customer_id: int, progress: Progress | None = None) -> dict:
    """Rollup rows, and period rollup rows, recomputed from the customer's stored calculations:
    RollupKey -> Totals (PeriodTotals for a period row)."""
    expected: dict = {}
    dates: dict = {}  # raw date value -> date (SQLite returns text; a customer has few distinct days)
    for batch in _stream(store.CALCULATION_TOTALS, (customer_id,)):
        for environment, mode, context, activity, emissions, activity_date, ttw, wtt in batch:
            totals = expected.get((environment, mode, context))
            if totals is None:
                totals = expected[(environment, mode, context)] = Totals()
            day = dates.get(activity_date)
            if day is None:
                day = dates[activity_date] = _as_date(activity_date)
            activity, emissions = Decimal(activity), Decimal(emissions)
            ttw, wtt = None if ttw is None else Decimal(ttw), None if wtt is None else Decimal(wtt)
            totals.add(activity, emissions, day, ttw, wtt)
            add_expected_period(expected, environment, mode, context, day, activity, emissions, ttw, wtt)
        if progress:
            progress(len(batch))
    _add_hubs(customer_id, expected)
    return expected


def _add_hubs(customer_id: int, expected: dict) -> None:
    """Shipments: the customer's hub elements, as the HUB rollup rows (activity: tonnes handled)."""
    for hub in ShipmentHub.select().where(ShipmentHub.customer == customer_id):
        totals = expected.setdefault((hub.environment, HUB, hub.business_context), Totals())
        totals.add(hub.tonnes, hub.emissions_kg, hub.activity_date, hub.emissions_ttw_kg, hub.emissions_wtt_kg)
        add_expected_period(expected, hub.environment, HUB, hub.business_context, hub.activity_date, hub.tonnes,
                             hub.emissions_kg, hub.emissions_ttw_kg, hub.emissions_wtt_kg)


def stored_rollups(customer_id: int) -> dict:
    """The customer's rollup rows and period rollup rows as they are stored: RollupKey -> Totals."""
    return {**{(row.environment, row.mode, row.business_context):
               Totals(row.calculation_count, row.activity_tkm, row.emissions_kg, row.emissions_ttw_kg,
                      row.emissions_wtt_kg, row.first_activity_date, row.last_activity_date)
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
               if not is_period_key(key) and key[1] != HUB)


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
        outcome.customers += 1
        outcome.calculations += _counted(expected)
        if expected != stored:
            if repair:
                expected = _repair(customer.id, expected)
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
            expected = {key: totals for key, totals in expected.items() if totals.calculation_count}
            if expected != stored:
                if repair:
                    expected = _repair_organization_days(organization.id, env)
                outcome.drifted.append(OrganizationDrift(organization.slug, env, expected, stored))
    return outcome


def _shift(totals: dict, rows: dict, sign: int) -> None:
    """Add (sign 1) or take away (-1) the day rows of `rows` to or from `totals` (period key -> PeriodTotals)."""
    for key, row in rows.items():
        if not (is_period_key(key) and key[3] == "day"):
            continue
        found = totals.setdefault(key, PeriodTotals())
        found.calculation_count += sign * row.calculation_count
        for name in ("activity_tkm", "emissions_kg", "emissions_ttw_kg", "emissions_wtt_kg"):
            setattr(found, name, EXACT.add(getattr(found, name), EXACT.multiply(sign, getattr(row, name))))


# --- the organizations' day rows: their customers' day rows added up ------------------------------

def expected_organization_days(organization_id: int, environment: str) -> dict:
    """The organization's day rows as its customers' day rows add up (the database sums them):
    period key -> PeriodTotals."""
    p = CustomerPeriodRollup
    rows = (p.select(p.activity_date, p.mode, p.business_context, pw.fn.SUM(p.calculation_count).coerce(False),
                     *(exact_sum(column) for column in (p.activity_tkm, p.emissions_kg,
                                                        p.emissions_ttw_kg, p.emissions_wtt_kg)))
            .join(Customer, on=(p.customer == Customer.id))
            .where((Customer.organization == organization_id) & (p.environment == environment) & (p.span == "day"))
            .group_by(p.activity_date, p.mode, p.business_context).tuples())
    return {(environment, mode, context, "day", _as_date(day)):
            PeriodTotals(int(count), *(Decimal(str(value)) for value in sums))
            for day, mode, context, count, *sums in rows}


def stored_organization_days(organization_id: int, environment: str) -> dict:
    """The organization's day rows as they are stored: period key -> PeriodTotals."""
    o = OrganizationPeriodRollup
    return {(environment, row.mode, row.business_context, "day", row.activity_date):
            PeriodTotals(row.calculation_count, row.activity_tkm, row.emissions_kg, row.emissions_ttw_kg,
                         row.emissions_wtt_kg)
            for row in o.select().where((o.organization == organization_id) & (o.environment == environment)
                                        & (o.span == "day"))}


def _repair_organization_days(organization_id: int, environment: str) -> dict:
    """Replace the organization's day rows by its customers' day rows added up; return what was written.

    Under a lock that keeps the organization's writers out (on PostgreSQL FOR UPDATE on its row,
    which every write's first insert holds a KEY SHARE lock on; on SQLite the write lock), so that
    the sums and the rows replaced are of one moment."""
    with db.atomic():
        store.lock_organization(organization_id)
        expected = expected_organization_days(organization_id, environment)
        o = OrganizationPeriodRollup
        o.delete().where((o.organization == organization_id) & (o.environment == environment)
                         & (o.span == "day")).execute()
        rows = [{"organization": organization_id, "environment": environment, "span": "day", "activity_date": day,
                 "mode": mode, "business_context": context, "calculation_count": totals.calculation_count,
                 "activity_tkm": totals.activity_tkm, "emissions_kg": totals.emissions_kg,
                 "emissions_ttw_kg": totals.emissions_ttw_kg, "emissions_wtt_kg": totals.emissions_wtt_kg}
                for (_, mode, context, _, day), totals in sorted(expected.items())]
        for start in range(0, len(rows), 500):
            o.insert_many(rows[start:start + 500]).execute()
    return expected


def _repair(customer_id: int, expected: dict, attempts: int = 3) -> dict:
    """Write the recounted rows; return what was written.

    Calculations are only ever added, so an unchanged count under the lock means the recount is
    still the truth: the lock is held for a count, not for a recount. When calculations arrived
    in between, count again; after a few tries, recount under the lock.
    """
    for _ in range(attempts):
        with db.atomic():
            store.lock_customer(customer_id)
            if Calculation.select().where(Calculation.customer == customer_id).count() == _counted(expected):
                _replace_rollups(customer_id, expected)
                return expected
        with _snapshot():
            expected = expected_rollups(customer_id)
    with db.atomic():
        store.lock_customer(customer_id)
        expected = expected_rollups(customer_id)
        _replace_rollups(customer_id, expected)
    return expected


def _replace_rollups(customer_id: int, expected: dict) -> None:
    CustomerRollup.delete().where(CustomerRollup.customer == customer_id).execute()
    replace_period_rollups(customer_id, expected)
    for (environment, mode, context), totals in sorted(
            (key, totals) for key, totals in expected.items() if not is_period_key(key)):
        CustomerRollup.create(customer=customer_id, environment=environment, mode=mode,
                              business_context=context, calculation_count=totals.calculation_count,
                              activity_tkm=totals.activity_tkm, emissions_kg=totals.emissions_kg,
                              first_activity_date=totals.first_activity_date,
                              last_activity_date=totals.last_activity_date,
                              emissions_ttw_kg=totals.emissions_ttw_kg, emissions_wtt_kg=totals.emissions_wtt_kg)


def verify(organization_id: int | None = None, environment: str | None = None,
           progress: Progress | None = None) -> Check:
    """Recompute every customer's rollup rows in scope from its calculations; report the drift."""
    return _check(organization_id, environment, progress, repair=False)


def rebuild(organization_id: int | None = None, environment: str | None = None,
            progress: Progress | None = None) -> Check:
    """Like verify, and rewrite each drifted customer's rollup rows (one short transaction each)."""
    return _check(organization_id, environment, progress, repair=True)
