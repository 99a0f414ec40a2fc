"""The calculation's own statements, written by hand, and the Write unit of work that sends a write's.

The rest of the service speaks Peewee's query builder. These are the statements the API's requests
send: the builder would compile each again on every call, while here the text is made once, its
columns from the models (emissions/sql.py). The statements of the rollups a write adds to are in
emissions/rollups/, that of the usage counter it counts in is in emissions/limits.py.
tests/test_statement_count.py holds how many statements each request sends.
"""
from __future__ import annotations

import datetime as dt
from operator import attrgetter
from typing import Sequence

from . import limits
from . import rollups
from .db import db, is_postgres
from .models import VOID_COLUMNS, ApiKey, Calculation, Customer, Factor, WebhookEvent
from .sql import Insert, Joined, row_type, run, statement


def probe_write() -> str | None:
    """Whether the database takes a write, for /healthz: None, or what stops it ("read-only").

    On SQLite it rewrites the header's user_version with its own value (the file does not grow; a
    read-only file refuses it); PostgreSQL says whether it is read-only (a standby, or
    default_transaction_read_only). A full disk shows in the requests' own failures (outages.Health).
    Closes this thread's connection: the probe runs in a thread of its own.
    """
    try:
        if is_postgres():
            (read_only,) = run("SHOW transaction_read_only").fetchone()
            return "read-only" if read_only == "on" else None
        with db.atomic():  # a write transaction: it queues with the others on the writer lock (db.py)
            (version,) = run("PRAGMA user_version").fetchone()
            version = int(version)
            run(f"PRAGMA user_version = {version}")
        return None
    finally:
        db.close()


# --- calculations ----------------------------------------------------------------------------

Stored = row_type("Stored", Calculation, ("id", "fingerprint", "body"),
                  doc="The parts of a stored calculation (or shipment) a replay needs.")
CustomerRow = row_type("CustomerRow", Customer, ("id", "reference", "status"),
                       doc="The parts of the customer a calculation needs.")
# Every column of the factor: a lookup row is the active version itself (calculations.factor_of_row).
FactorRow = row_type("FactorRow", Factor, doc="A factor version's columns, as the database returns them.")

# Everything a calculation decides on, in one statement: the calculation the key already made, the
# customer, and the active factor version visible to the organization (global or its own). By hand:
# three LEFT JOINs off a one-row base answer "none" per part in one round trip, which the builder
# cannot start from.
LOOKED_UP = Joined(k=Stored, c=CustomerRow, f=FactorRow)
LOOKUP = (
    f"SELECT {LOOKED_UP.columns}"
    " FROM (SELECT 1 AS one) AS base"
    " LEFT JOIN calculation AS k"
    "  ON k.organization_id = ? AND k.environment = ? AND k.idempotency_key = ?"
    " LEFT JOIN customer AS c ON c.organization_id = ? AND c.environment = ? AND c.reference = ?"
    " LEFT JOIN factor AS f ON f.reference = ? AND f.status = 'active'"
    "  AND (f.organization_id IS NULL OR f.organization_id = ?)"
)


def lookup(organization_id: int, environment: str, idempotency_key: str, customer_reference: str,
           factor_reference: str) -> tuple[Stored | None, CustomerRow | None, FactorRow | None]:
    """(what the key made, the customer, the active factor's columns); a replay needs only the first."""
    row = LOOKED_UP.row(run(LOOKUP, (organization_id, environment, idempotency_key, organization_id, environment,
                                     customer_reference, factor_reference, organization_id)).fetchone())
    existing = LOOKED_UP.part(row, "k")
    if existing is not None:
        return existing, None, None
    return None, LOOKED_UP.part(row, "c"), LOOKED_UP.part(row, "f")


FIND_BY_KEY = (f"SELECT {', '.join(Stored._fields)} FROM calculation"
               " WHERE organization_id = ? AND environment = ? AND idempotency_key = ?")


def find_by_key(organization_id: int, environment: str, idempotency_key: str) -> Stored | None:
    """The calculation this organization and environment made with this Idempotency-Key, if any."""
    row = run(FIND_BY_KEY, (organization_id, environment, idempotency_key)).fetchone()
    return Stored._make(row) if row else None


Body = row_type("Body", Calculation, ("body",), doc="A calculation's stored body.")
GET_BODY = (f"SELECT {', '.join(Body._fields)} FROM calculation"
            " WHERE id = ? AND organization_id = ? AND environment = ?")


def calculation_body(organization_id: int, environment: str, calculation_id: str) -> str | None:
    """The stored body of a calculation in this organization and environment, if any."""
    row = run(GET_BODY, (calculation_id, organization_id, environment)).fetchone()
    return Body._make(row).body if row else None


# A calculation's row and the INSERT that writes it, both made from models.Calculation once. By hand:
# the builder would compile this INSERT again on every request.
CALCULATION = Insert(Calculation, "NewCalculation",
                     "A calculation's row, ready to be written: the columns of models.Calculation.",
                     optional=VOID_COLUMNS)
NewCalculation = CALCULATION.Row
INSERT_CALCULATION = CALCULATION.text
_ADDED = attrgetter(*rollups.Addition._fields)  # what a calculation adds to its rollups, by the columns' names


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
        self._days = rollups.OrganizationDays(organization_id, environment)
        self._after_days: list[tuple[str, Sequence, None]] = []
        self._events: list[tuple[str, Sequence, None]] = []

    def add(self, text: str, params: Sequence, refusal: type[Exception] | None = None) -> None:
        """A statement with ? placeholders. With `refusal`, it must change one row, or commit()
        raises refusal() and writes nothing."""
        self._statements.append((statement(text), params, refusal))

    def calculation(self, calculation: NewCalculation, test_capacity: int, period: str) -> None:
        """A calculation's row, one more use of its organization's capacity for `period` (commit()
        raises limits.CapacityUsedUp when it is used up), and its rollups."""
        self.add(INSERT_CALCULATION, CALCULATION.params(calculation))
        # Counted after the insert: a concurrent request with the same key fails on the unique
        # key above and becomes a replay, which capacity never blocks.
        self.add(*limits.consume(calculation.organization_id, calculation.environment, test_capacity, period),
                 refusal=limits.CapacityUsedUp)
        self.rollups(rollups.Addition._make(_ADDED(calculation)))

    def rollups(self, addition: rollups.Addition) -> None:
        """One calculation (or a shipment's hub, mode HUB) added to its customer's rollup row, its
        activity day's and month's rows (analytics by period) and its organization's day row."""
        self.add(*rollups.add_to_rollup(addition))
        self.add(*rollups.add_to_period_rollups(addition))
        self._days.add(addition)

    def take_away(self, addition: rollups.Addition) -> None:
        """A voided calculation (or hub) taken out of the rollups rollups() added it to."""
        for text, params in rollups.take_from_rollups(addition):
            self.add(text, params)
        self._days.take(addition)

    def after_days(self, text: str, params: Sequence) -> None:
        """A statement sent after the organization's day rows (a void's tidying of them)."""
        self._after_days.append((statement(text), params, None))

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
        statements = [*self._statements, *([(*days, None)] if days else ()), *self._after_days, *self._events]
        with db.atomic():
            for text, params, refusal in statements:
                if db.execute_sql(text, params).rowcount != 1 and refusal is not None:
                    raise refusal()


def write_calculation(calculation: NewCalculation, test_capacity: int, period: str, event) -> None:
    """Write a calculation in one transaction: its row, one more use of the organization's
    capacity for `period`, its customer's rollup and period rollups, its organization's day row,
    and its webhook event (a webhooks.events.NewEvent).

    Raises limits.CapacityUsedUp (nothing written) when the capacity is used up, and Peewee's
    IntegrityError when a calculation with the same idempotency key was committed first.
    """
    write = Write(calculation.organization_id, calculation.environment)
    write.calculation(calculation, test_capacity, period)
    write.event(event)
    write.commit()


# --- webhook events (the outbox) ------------------------------------------------------------------

# The event row, pending (due now) when the organization has an enabled endpoint for the
# environment, skipped otherwise: one INSERT ... SELECT, by hand for the module's reason, each column
# named by the model. A skipped event of a calculation stores no body: the calculation's row holds it
# (WebhookEvent.payload).
_EVENT_VALUES = {
    WebhookEvent.id: "?", WebhookEvent.organization: "?", WebhookEvent.environment: "?", WebhookEvent.type: "?",
    WebhookEvent.stored_payload: "CASE WHEN e.id IS NULL AND ? IS NOT NULL THEN '' ELSE ? END",
    WebhookEvent.calculation_id: "?", WebhookEvent.created_at: "?",
    WebhookEvent.delivery_status: "CASE WHEN e.id IS NULL THEN 'skipped' ELSE 'pending' END",
    WebhookEvent.attempt_count: "0", WebhookEvent.next_attempt_at: "CASE WHEN e.id IS NULL THEN NULL ELSE ? END",
}
RECORD_EVENT = (
    f"INSERT INTO {WebhookEvent._meta.table_name} ({', '.join(column.column_name for column in _EVENT_VALUES)})"
    f" SELECT {', '.join(_EVENT_VALUES.values())}"
    " FROM (SELECT 1 AS one) AS base"
    " LEFT JOIN webhook_endpoint AS e ON e.organization_id = ? AND e.environment = ? AND e.status = 'enabled'"
)


def insert_event(event) -> None:
    """Write a webhooks.events.NewEvent alone, in a transaction of its own (Write.event adds one to a write)."""
    write = Write(event.organization_id, event.environment)
    write.event(event)
    write.commit()


# --- when an API key was last used (auth.KeyStore.note_use: at most once a minute per key) -----

NOTE_KEY_USE = f"UPDATE {ApiKey._meta.table_name} SET {ApiKey.last_used_at.column_name} = ? WHERE id = ?"


def note_key_use(key_id: str, moment: dt.datetime) -> None:
    """Record that the key was used at `moment`: one statement of its own, outside any transaction."""
    run(NOTE_KEY_USE, (ApiKey.last_used_at.db_value(moment), key_id))
