"""The database connection: the proxy the models use, opening a DATABASE_URL with the settings this
service relies on, SQLite's pragmas and exact-decimal functions. What only a serving process adds
(the writer lock, the WAL checkpointer) is emissions/serving's."""
from __future__ import annotations

import decimal
import importlib.util
import os
from decimal import Decimal

import peewee as pw
from playhouse import db_url

from . import postgres

db = pw.DatabaseProxy()

# Exact decimals: NUMERIC on PostgreSQL; TEXT on SQLite, whose NUMERIC affinity would turn
# "0.1" into a binary float.
SQLITE_FIELD_TYPES = {"EXACTDECIMAL": "TEXT"}
POSTGRES_FIELD_TYPES = {"EXACTDECIMAL": "NUMERIC"}

# WAL lets readers run beside the one writer; synchronous=NORMAL in WAL mode keeps the database
# consistent on power loss but may lose the last transactions (docs/operations.md, "Durability (SQLite)").
SQLITE_PRAGMAS = (
    ("journal_mode", "wal"),
    ("synchronous", "normal"),
    ("foreign_keys", 1),
    ("busy_timeout", 10_000),
    ("cache_size", -16_000),
)


class SharedWriterDatabase(pw.SqliteDatabase):
    """SQLite whose write transactions first take `writer_lock`, once a serving process gave it one
    (emissions/serving/writer_lock.py); without one (the CLI, tests) it is SQLite as it comes."""

    WRITE_LOCK_TYPES = ("IMMEDIATE", "EXCLUSIVE")
    writer_lock = None  # anything with hold() and release(): serving.writer_lock.WriterLock

    def begin(self, lock_type=None):
        lock = self.writer_lock
        if lock is None or (lock_type or self._lock_type or "").upper() not in self.WRITE_LOCK_TYPES:
            return super().begin(lock_type)
        lock.hold()
        try:
            super().begin(lock_type)
        except BaseException:
            lock.release()
            raise

    def commit(self):
        super().commit()  # when COMMIT fails the transaction is still open: rollback() releases
        if self.writer_lock is not None:
            self.writer_lock.release()

    def rollback(self):
        try:
            super().rollback()
        finally:
            if self.writer_lock is not None:
                self.writer_lock.release()


def open_database(url: str, waits: postgres.PostgresWaits | None = None) -> pw.Database:
    """A database for a DATABASE_URL, with the settings this service relies on (and, on PostgreSQL,
    the waits: postgres.py)."""
    if url.startswith("sqlite"):
        settings = db_url.parse(url)
        create_private(settings.get("database") or "")
        database = SharedWriterDatabase(**{
            "timeout": 10,
            **settings,
            "pragmas": SQLITE_PRAGMAS,
            "field_types": SQLITE_FIELD_TYPES,
            "lock_type": "IMMEDIATE",  # writers queue at BEGIN instead of failing on lock upgrade
        })
        database.register_function(decimal_add, "decimal_add", 2)
        database.register_aggregate(DecimalSum, "decimal_sum", 1)
    elif url.startswith(("postgres", "postgresql")):
        if importlib.util.find_spec("psycopg2") is None:  # the driver is the [postgres] extra
            raise ValueError("DATABASE_URL names a PostgreSQL database but its driver is not installed: "
                             "pip install 'emissions-service[postgres]'")
        database = postgres.open_postgres(url, POSTGRES_FIELD_TYPES, waits)
    else:
        raise ValueError("DATABASE_URL must start with sqlite:// or postgresql://")
    return database


def create_private(path: str) -> None:
    """Create a new SQLite file readable by its owner only: it holds webhook secrets, key and
    password hashes. SQLite gives its -wal and -shm files the database file's mode. A file that
    exists keeps its own."""
    if path in ("", ":memory:") or path.startswith("file:"):
        return
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError:  # it exists; or its directory does not, which SQLite says in its own words on opening
        pass


def bind(url: str, waits: postgres.PostgresWaits | None = None) -> pw.Database:
    """Point the proxy at the database named by url and return it."""
    database = open_database(url, waits)
    db.initialize(database)
    return database


def is_postgres() -> bool:
    return isinstance(db.obj, pw.PostgresqlDatabase)


def is_sqlite() -> bool:
    return isinstance(db.obj, pw.SqliteDatabase)


# Sums of exact decimals: 100 digits hold any total the bounded inputs can reach, and a sum that
# would need rounding raises instead of drifting.
EXACT_SUM = decimal.Context(prec=100, traps=[decimal.Inexact, decimal.InvalidOperation, decimal.Overflow])


def decimal_add(left: str | None, right: str | None) -> str | None:
    """decimal_add(a, b) in SQLite's SQL: the exact sum of two decimals kept as text."""
    if left is None or right is None:
        return None
    return str(EXACT_SUM.add(Decimal(left), Decimal(right)))


def exact_sum(column):
    """SUM of an exact-decimal column, not converted back by the column's type: NUMERIC's own sum on
    PostgreSQL, decimal_sum over the text decimals on SQLite."""
    return (pw.fn.SUM(column) if is_postgres() else pw.fn.decimal_sum(column)).coerce(False)


class DecimalSum:
    """decimal_sum(x) in SQLite's SQL: the exact sum of decimals kept as text (SUM would add floats)."""

    def __init__(self):
        self.total = None

    def step(self, value: str | None) -> None:
        if value is not None:
            self.total = EXACT_SUM.add(self.total or Decimal(0), Decimal(value))

    def finalize(self) -> str | None:
        return None if self.total is None else str(self.total)
