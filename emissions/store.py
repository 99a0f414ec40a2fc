"""Every SQL statement of the service written by hand, and the functions that run them.

The rest of the service speaks Peewee's query builder. These are the statements the API's
requests send: the builder would compile each again on every call, while here the text is made
once (their column lists from the models' and the row types' own fields). Each is written with
`?` placeholders and run through statement(), which gives PostgreSQL its `%s`.
tests/test_statement_count.py holds how many each request sends.
"""
from __future__ import annotations

import datetime as dt
from collections import namedtuple
from decimal import Decimal
from functools import lru_cache
from typing import NamedTuple, Sequence

import peewee as pw

from .db import EXACT_SUM, db, is_postgres
from .models import ApiKey, Calculation, CustomerPeriodRollup, CustomerRollup, OrganizationPeriodRollup, WebhookEvent


@lru_cache(maxsize=None)
def _postgres(text: str) -> str:
    if "%" in text or any("?" in literal for literal in text.split("'")[1::2]):
        # The rewrite is textual: a % or a ? inside a quoted literal would be taken for syntax.
        raise ValueError("a hand-written statement must hold no % and no ? inside a literal")
    return text.replace("?", "%s")


def statement(text: str) -> str:
    """A statement with ? placeholders, in the bound database's style (%s for psycopg2)."""
    return _postgres(text) if is_postgres() else text


def run(text: str, params: tuple = ()):
    """Run one statement; return its cursor."""
    return db.execute_sql(statement(text), params)


def unchanged_since() -> tuple | None:
    """On SQLite, a stamp that differs from the one taken before whenever the database may have changed
    in between: the connection, its PRAGMA data_version (moved by any other connection's commit, in
    this process or another) and its total_changes (moved by its own writes). None on PostgreSQL,
    which has no such counter. An answer made after a stamp is still right while the stamp is the same."""
    if is_postgres():
        return None
    connection = db.connection()
    return connection, run("PRAGMA data_version").fetchone()[0], connection.total_changes


def ping() -> None:
    """One round trip to the database."""
    run("SELECT 1").fetchone()


def probe_write() -> str | None:
    """Whether the database takes a write, for /healthz: None, or what stops it ("read-only").

    On SQLite it rewrites the header's user_version with its own value (the file does not grow; a
    read-only file refuses it); PostgreSQL says whether it is read-only (a standby, or
    default_transaction_read_only). A full disk shows in the requests' own failures (outages.Health).
    Closes this thread's connection: the probe runs in a thread of its own.
    """
    try:
        if is_postgres():
            return "read-only" if run("SHOW transaction_read_only").fetchone()[0] == "on" else None
        with db.atomic():  # a write transaction: it queues with the others on the writer lock (db.py)
            version = int(run("PRAGMA user_version").fetchone()[0])
            run(f"PRAGMA user_version = {version}")
        return None
    finally:
        db.close()


# --- calculations ----------------------------------------------------------------------------

class Stored(NamedTuple):
    """The parts of a stored calculation a replay needs."""

    id: str
    fingerprint: str
    body: str


class CustomerRow(NamedTuple):
    """The parts of the customer a calculation needs."""

    id: int
    reference: str
    status: str


class FactorRow(NamedTuple):
    """The columns of the active factor version a calculation needs, as the database returns them."""

    id: int
    reference: str
    version: int
    mode: str
    value: object
    name: str
    source: str
    region: str | None
    valid_from: object
    valid_to: object
    ttw_value: object
    radiative_forcing: object
    hub_type: str | None  # a HUB factor's hub type (shipments)


def columns(alias: str, row: type) -> str:
    """A named row's fields as the column list of a statement, each behind the table's alias."""
    return ", ".join(f"{alias}.{name}" for name in row._fields)


# Everything a calculation decides on, in one statement: the calculation the key already made, the
# customer, and the active factor version visible to the organization (global or its own). By hand:
# three LEFT JOINs off a one-row base answer "none" per part in one round trip, which the builder
# cannot start from.
LOOKUP = (
    f"SELECT {columns('k', Stored)}, {columns('c', CustomerRow)}, {columns('f', FactorRow)}"
    " FROM (SELECT 1 AS one) AS base"
    " LEFT JOIN calculation AS k"
    "  ON k.organization_id = ? AND k.environment = ? AND k.idempotency_key = ?"
    " LEFT JOIN customer AS c ON c.organization_id = ? AND c.environment = ? AND c.reference = ?"
    " LEFT JOIN factor AS f ON f.reference = ? AND f.status = 'active'"
    "  AND (f.organization_id IS NULL OR f.organization_id = ?)"
)


_CUSTOMER_AT = len(Stored._fields)
_FACTOR_AT = _CUSTOMER_AT + len(CustomerRow._fields)


def lookup(organization_id: int, environment: str, idempotency_key: str, customer_reference: str,
           factor_reference: str) -> tuple[Stored | None, CustomerRow | None, FactorRow | None]:
    """(what the key made, the customer, the active factor's columns); a replay needs only the first."""
    row = run(LOOKUP, (organization_id, environment, idempotency_key, organization_id, environment,
                       customer_reference, factor_reference, organization_id)).fetchone()
    if row[0] is not None:
        return Stored._make(row[:_CUSTOMER_AT]), None, None
    customer = CustomerRow._make(row[_CUSTOMER_AT:_FACTOR_AT]) if row[_CUSTOMER_AT] is not None else None
    return None, customer, (FactorRow._make(row[_FACTOR_AT:]) if row[_FACTOR_AT] is not None else None)


FIND_BY_KEY = (f"SELECT {', '.join(Stored._fields)} FROM calculation"
               " WHERE organization_id = ? AND environment = ? AND idempotency_key = ?")


def find_by_key(organization_id: int, environment: str, idempotency_key: str) -> Stored | None:
    """The calculation this organization and environment made with this Idempotency-Key, if any."""
    row = run(FIND_BY_KEY, (organization_id, environment, idempotency_key)).fetchone()
    return Stored(*row) if row else None


GET_BODY = "SELECT body FROM calculation WHERE id = ? AND organization_id = ? AND environment = ?"


def calculation_body(organization_id: int, environment: str, calculation_id: str) -> str | None:
    """The stored body of a calculation in this organization and environment, if any."""
    row = run(GET_BODY, (calculation_id, organization_id, environment)).fetchone()
    return row[0] if row else None


# A calculation's row, one item per column of models.Calculation in its order, and the INSERT that
# writes it: both derived from the model once, so that a new column is described in models.py alone.
_CALCULATION_FIELDS = tuple(Calculation._meta.sorted_fields)
NewCalculation = namedtuple("NewCalculation", [field.column_name for field in _CALCULATION_FIELDS])
NewCalculation.__doc__ = "A calculation's row, ready to be written: the columns of models.Calculation."
# Text and integer columns go as they are (their db_value only coerces the types they already have);
# dates, timestamps and decimals through their field's db_value.
_CONVERTED = tuple((index, field.db_value) for index, field in enumerate(_CALCULATION_FIELDS)
                   if not isinstance(field, (pw.CharField, pw.TextField, pw.IntegerField, pw.ForeignKeyField)))
# By hand, with the columns from the model: the builder would compile this INSERT again on every request.
INSERT_CALCULATION = (f"INSERT INTO calculation ({', '.join(NewCalculation._fields)})"
                      f" VALUES ({', '.join('?' for _ in NewCalculation._fields)})")


class CapacityUsedUp(Exception):
    """The organization's capacity for the month is used up: the calculation was not written."""


class Write:
    """One write transaction: its statements gathered in order, then sent by commit().

    Everything a statement needs (a row's conversions, each upsert's parameters, the organization's
    day rows) is worked out while they are gathered, before the transaction opens. So it lasts only
    as long as the database takes to run them: on SQLite that is how long the writer lock every
    serving process queues on is held (db.SharedWriterDatabase); on PostgreSQL, how long the rows
    stay locked. A calculation and a shipment (its legs, hubs and rollups), each with its event, are
    each one Write; so is a failed outcome's lone event. Inside an outer db.atomic() the Write is a
    savepoint of it, and nothing is committed or let go before the outer block ends.
    """

    def __init__(self, organization_id: int, environment: str):
        self._statements: list[tuple[str, Sequence, type[Exception] | None]] = []
        self._days = OrganizationDays(organization_id, environment)
        self._events: list[tuple[str, Sequence, None]] = []

    def add(self, text: str, params: Sequence, refusal: type[Exception] | None = None) -> None:
        """A statement with ? placeholders. With `refusal`, it must change one row, or commit()
        raises refusal() and writes nothing."""
        self._statements.append((statement(text), params, refusal))

    def calculation(self, calculation: NewCalculation, test_capacity: int, period: str) -> None:
        """A calculation's row, one more use of its organization's capacity for `period` (commit()
        raises CapacityUsedUp when it is used up), and its rollups."""
        c = calculation
        row = list(c)
        for index, to_database in _CONVERTED:
            row[index] = to_database(row[index])
        self.add(INSERT_CALCULATION, row)
        # Counted after the insert: a concurrent request with the same key fails on the unique
        # key above and becomes a replay, which capacity never blocks.
        self.add(*consume(c.organization_id, c.environment, test_capacity, period), refusal=CapacityUsedUp)
        parts = None if c.emissions_ttw_kg is None else (c.emissions_ttw_kg, c.emissions_wtt_kg)
        self.rollups(c.customer_id, c.environment, c.mode, c.business_context, c.activity_tkm, c.emissions_kg,
                     c.activity_date, parts)

    def rollups(self, customer_id: int, environment: str, mode: str, business_context: str, activity: Decimal,
                emissions: Decimal, activity_date: dt.date, breakdown: tuple[Decimal, Decimal] | None) -> None:
        """One calculation (or a shipment's hub, mode HUB) added to its customer's rollup row, its
        activity day's and month's rows (analytics by period) and its organization's day row."""
        self.add(*add_to_rollup(customer_id, environment, mode, business_context, activity, emissions, activity_date,
                                breakdown))
        self.add(*add_to_period_rollups(customer_id, environment, mode, business_context, activity, emissions,
                                        activity_date, breakdown))
        self._days.add(mode, business_context, activity, emissions, activity_date, breakdown)

    def event(self, event) -> None:
        """A webhooks.events.NewEvent, pending when an endpoint is enabled; sent last."""
        stored_at = WebhookEvent.created_at.db_value(event.created_at)
        self._events.append((statement(RECORD_EVENT), (
            event.id, event.organization_id, event.environment, event.type, event.calculation_id, event.payload,
            event.calculation_id, stored_at, stored_at, event.organization_id, event.environment), None))

    def commit(self) -> None:
        """Send the statements in one transaction: the statements in the order added, then the
        organization's day rows, then the events. All or nothing."""
        days = self._days.statement()
        statements = [*self._statements, *([(*days, None)] if days else ()), *self._events]
        with db.atomic():
            for text, params, refusal in statements:
                if db.execute_sql(text, params).rowcount != 1 and refusal is not None:
                    raise refusal()


def write_calculation(calculation: NewCalculation, test_capacity: int, period: str, event) -> None:
    """Write a calculation in one transaction: its row, one more use of the organization's
    capacity for `period`, its customer's rollup and period rollups, its organization's day row,
    and its webhook event (a webhooks.events.NewEvent).

    Raises CapacityUsedUp (nothing written) when the capacity is used up, and Peewee's
    IntegrityError when a calculation with the same idempotency key was committed first.
    """
    write = Write(calculation.organization_id, calculation.environment)
    write.calculation(calculation, test_capacity, period)
    write.event(event)
    write.commit()


# --- usage: one statement per billable calculation -----------------------------------------------

# The capacity (NULL is unlimited) is read inside the statement, and the counter row is created or
# incremented only while below it: no row changed means the capacity is used up. By hand for the
# module's reason: on_conflict(update=..., where=...) would say it, compiled on every calculation.
_CONSUME = (
    'INSERT INTO usage_counter (organization_id, environment, "period", "count")'
    " SELECT ?, ?, ?, 1 WHERE COALESCE({capacity} > 0, TRUE)"
    ' ON CONFLICT (organization_id, environment, "period") DO UPDATE SET "count" = usage_counter."count" + 1'
    ' WHERE COALESCE(usage_counter."count" < {capacity}, TRUE)'
)
CONSUME_LIVE = _CONSUME.format(capacity="(SELECT live_capacity FROM organization WHERE id = ?)")
CONSUME_TEST = _CONSUME.format(capacity="(SELECT COALESCE(test_capacity, ?) FROM organization WHERE id = ?)")


def consume(organization_id: int, environment: str, test_capacity: int, period: str) -> tuple[str, tuple]:
    """The statement counting one billable calculation, and its parameters; it changes one row, or
    none when the capacity is used up. `test_capacity` is the sandbox default."""
    if environment == "live":
        text, capacity_params = CONSUME_LIVE, (organization_id,)
    else:
        text, capacity_params = CONSUME_TEST, (test_capacity, organization_id)
    return text, (organization_id, environment, period, *capacity_params, *capacity_params)


# --- customer rollups ------------------------------------------------------------------------------

def _added(table: str, add: str, count: str = "1") -> str:
    """The SET clause of a rollup upsert: `count` more calculations, each sum plus the new row's (`add`
    spells the addition: `+`, or decimal_add for SQLite's decimal text)."""
    sums = ("activity_tkm", "emissions_kg", "emissions_ttw_kg", "emissions_wtt_kg")
    return ", ".join([f"calculation_count = {table}.calculation_count + {count}",
                      *(f"{column} = " + add.format(f"{table}.{column}", f"EXCLUDED.{column}") for column in sums)])


def _rollup(add: str, least: str, greatest: str) -> str:
    return (
        "INSERT INTO customer_rollup (customer_id, environment, mode, business_context,"
        " calculation_count, activity_tkm, emissions_kg, first_activity_date, last_activity_date,"
        " emissions_ttw_kg, emissions_wtt_kg)"
        " VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (customer_id, environment, mode, business_context) DO UPDATE SET"
        f" {_added('customer_rollup', add)},"
        f" first_activity_date = {least}(customer_rollup.first_activity_date, EXCLUDED.first_activity_date),"
        f" last_activity_date = {greatest}(customer_rollup.last_activity_date, EXCLUDED.last_activity_date)"
    )


# By hand for the module's reason; one atomic upsert, so concurrent writers cannot lose an update.
ROLLUP_POSTGRES = _rollup("{0} + {1}", "LEAST", "GREATEST")
# SQLite's two-argument MIN and MAX are scalar; its dates are ISO text, so text order is date order;
# decimals are text summed by db.decimal_add (exact, in the same context).
ROLLUP_SQLITE = _rollup("decimal_add({0}, {1})", "MIN", "MAX")


def add_to_rollup(customer_id: int, environment: str, mode: str, business_context: str, activity: Decimal,
                  emissions: Decimal, activity_date: dt.date,
                  breakdown: tuple[Decimal, Decimal] | None = None) -> tuple[str, tuple]:
    """The statement adding one calculation to its rollup row (one atomic upsert, so concurrent
    writers cannot lose an update), and its parameters. `breakdown` is the emissions' (ttw, wtt),
    when they have them; the rollup's TTW and WTT sums count only those."""
    ttw, wtt = breakdown or (Decimal(0), Decimal(0))
    return (ROLLUP_POSTGRES if is_postgres() else ROLLUP_SQLITE), (
        customer_id, environment, mode, business_context, CustomerRollup.activity_tkm.db_value(activity),
        CustomerRollup.emissions_kg.db_value(emissions), activity_date, activity_date,
        CustomerRollup.emissions_ttw_kg.db_value(ttw), CustomerRollup.emissions_wtt_kg.db_value(wtt))


class CustomerWithRollup(NamedTuple):
    """The customer's columns and one of its rollup rows (all None when it has no calculations yet)."""

    id: int
    name: str
    status: str
    country_code: str | None
    mode: str | None
    business_context: str | None
    calculation_count: int | None
    activity_tkm: object
    emissions_kg: object
    first_activity_date: object
    last_activity_date: object
    emissions_ttw_kg: object
    emissions_wtt_kg: object


_CUSTOMER_COLUMNS = ("id", "name", "status", "country_code")
# The customer and its rollup rows, one row per rollup row: by hand, as the API's one read of a
# customer runs it on every GET and the builder would compile it again each time.
FIND_WITH_ROLLUPS = (
    "SELECT " + ", ".join(f"c.{name}" if name in _CUSTOMER_COLUMNS else f"r.{name}"
                          for name in CustomerWithRollup._fields) +
    " FROM customer AS c"
    " LEFT JOIN customer_rollup AS r ON r.customer_id = c.id AND r.environment = c.environment"
    " WHERE c.organization_id = ? AND c.environment = ? AND c.reference = ?"
)


def customer_with_rollups(organization_id: int, environment: str, reference: str) -> list[CustomerWithRollup]:
    """The customer's columns with each of its rollup rows; empty when no such customer."""
    return [CustomerWithRollup._make(row)
            for row in run(FIND_WITH_ROLLUPS, (organization_id, environment, reference)).fetchall()]


CALCULATION_TOTALS = ("SELECT environment, mode, business_context, activity_tkm, emissions_kg, activity_date,"
                      " emissions_ttw_kg, emissions_wtt_kg FROM calculation WHERE customer_id = ?")

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


# --- customer period rollups (a day row and a month row per calculation) --------------------------------------------------------------

def _upsert(add: str) -> str:
    return (
        "INSERT INTO customer_period_rollup (customer_id, environment, span, activity_date, mode, business_context,"
        " calculation_count, activity_tkm, emissions_kg, emissions_ttw_kg, emissions_wtt_kg)"
        " VALUES (?, ?, 'day', ?, ?, ?, 1, ?, ?, ?, ?), (?, ?, 'month', ?, ?, ?, 1, ?, ?, ?, ?)"
        " ON CONFLICT (customer_id, environment, span, activity_date, mode, business_context) DO UPDATE SET"
        f" {_added('customer_period_rollup', add)}"
    )


UPSERT_POSTGRES = _upsert("{0} + {1}")
UPSERT_SQLITE = _upsert("decimal_add({0}, {1})")  # decimals are text on SQLite (db.decimal_add)


def add_to_period_rollups(customer_id: int, environment: str, mode: str, business_context: str,
                          activity: Decimal, emissions: Decimal, activity_date: dt.date,
                          breakdown: tuple[Decimal, Decimal] | None = None) -> tuple[str, tuple]:
    """The statement adding one calculation to its day and month rows, and its parameters (the same
    arguments as store.add_to_rollup)."""
    ttw, wtt = breakdown or (Decimal(0), Decimal(0))
    decimal = CustomerPeriodRollup.activity_tkm.db_value
    day = CustomerPeriodRollup.activity_date.db_value
    sums = (decimal(activity), decimal(emissions), decimal(ttw), decimal(wtt))
    return (UPSERT_POSTGRES if is_postgres() else UPSERT_SQLITE), (
        customer_id, environment, day(activity_date), mode, business_context, *sums,
        customer_id, environment, day(activity_date.replace(day=1)), mode, business_context, *sums)


# --- the organization's day rows (the workspace overview reads them) -----------------------------------

@lru_cache(maxsize=None)
def _organization_days(rows: int, postgres: bool) -> str:
    add = "{0} + {1}" if postgres else "decimal_add({0}, {1})"  # decimals are text on SQLite (db.decimal_add)
    return (
        "INSERT INTO organization_period_rollup (organization_id, environment, span, activity_date, mode,"
        " business_context, calculation_count, activity_tkm, emissions_kg, emissions_ttw_kg, emissions_wtt_kg)"
        " VALUES " + ", ".join(["(?, ?, 'day', ?, ?, ?, ?, ?, ?, ?, ?)"] * rows) +
        " ON CONFLICT (organization_id, environment, span, activity_date, mode, business_context) DO UPDATE SET"
        f" {_added('organization_period_rollup', add, 'EXCLUDED.calculation_count')}"
    )


class OrganizationDays:
    """What one write adds to its organization's day rows (organization_period_rollup), gathered as
    Write.rollups counts each calculation and hub, and written in one upsert (statement()) after the
    write's other rows and before its events, a row per (day, mode, business context) in key order.

    On PostgreSQL the rows are locked after everything else the write locks (its usage counter row
    first of all, which already queues the organization's writers of the month), and in one order:
    a transaction holding one never waits but for another of them, taken in that same order, so
    two writes cannot deadlock on them, whatever order a shipment's legs and hubs come in."""

    def __init__(self, organization_id: int, environment: str):
        self.organization_id = organization_id
        self.environment = environment
        self.rows: dict[tuple, list] = {}

    def add(self, mode: str, business_context: str, activity: Decimal, emissions: Decimal, activity_date: dt.date,
            breakdown: tuple[Decimal, Decimal] | None) -> None:
        ttw, wtt = breakdown or (Decimal(0), Decimal(0))
        row = self.rows.get((activity_date, mode, business_context))
        if row is None:
            self.rows[(activity_date, mode, business_context)] = [1, activity, emissions, ttw, wtt]
            return
        row[0] += 1
        for index, value in enumerate((activity, emissions, ttw, wtt), 1):
            row[index] = EXACT_SUM.add(row[index], value)

    def statement(self) -> tuple[str, list] | None:
        """The one statement adding the gathered rows, and its parameters (None when nothing was counted)."""
        if not self.rows:
            return None
        decimal = OrganizationPeriodRollup.activity_tkm.db_value
        day = OrganizationPeriodRollup.activity_date.db_value
        params = []
        for (activity_date, mode, context), (count, *sums) in sorted(self.rows.items()):
            params += [self.organization_id, self.environment, day(activity_date), mode, context, count,
                       *(decimal(value) for value in sums)]
        return statement(_organization_days(len(self.rows), is_postgres())), params


# --- webhook events (the outbox) ------------------------------------------------------------------

# The event row, pending (due now) when the organization has an enabled endpoint for the
# environment, skipped otherwise: one INSERT ... SELECT, by hand for the module's reason. A skipped
# event of a calculation stores no body: the calculation's row holds it (WebhookEvent.payload).
RECORD_EVENT = (
    "INSERT INTO webhook_event (id, organization_id, environment, type, payload, calculation_id, created_at,"
    " delivery_status, attempt_count, next_attempt_at)"
    " SELECT ?, ?, ?, ?, CASE WHEN e.id IS NULL AND ? IS NOT NULL THEN '' ELSE ? END, ?, ?,"
    " CASE WHEN e.id IS NULL THEN 'skipped' ELSE 'pending' END, 0,"
    " CASE WHEN e.id IS NULL THEN NULL ELSE ? END"
    " FROM (SELECT 1 AS one) AS base"
    " LEFT JOIN webhook_endpoint AS e ON e.organization_id = ? AND e.environment = ? AND e.status = 'enabled'"
)


def insert_event(event) -> None:
    """Write a webhooks.events.NewEvent alone, in a transaction of its own (Write.event adds one to a write)."""
    write = Write(event.organization_id, event.environment)
    write.event(event)
    write.commit()



# --- when an API key was last used (auth.KeyStore.note_use: at most once a minute per key) -----

NOTE_KEY_USE = "UPDATE api_key SET last_used_at = ? WHERE id = ?"


def note_key_use(key_id: str, moment: dt.datetime) -> None:
    """Record that the key was used at `moment`: one statement of its own, outside any transaction."""
    run(NOTE_KEY_USE, (ApiKey.last_used_at.db_value(moment), key_id))
