"""The database connection: the proxy the models use, opening a DATABASE_URL with the settings this
service relies on, SQLite's pragmas and exact-decimal functions, and the WAL checkpointer."""
from __future__ import annotations

import decimal
import importlib.util
import logging
import os
import sqlite3
import threading
from decimal import Decimal

import peewee as pw
from playhouse import db_url

from . import affinity
from . import outages
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


class WalCheckpointer:
    """Checkpoints SQLite's write-ahead log from a thread of its own, for a serving process.

    By default the connection whose commit takes the log past 1000 pages copies the log into the
    database and syncs it, inside its request and while this process's writers queue behind it.
    Here the request connections never checkpoint (wal_autocheckpoint=0); a thread does it every
    `interval` seconds with a PASSIVE checkpoint (it never blocks or waits for anyone, and SQLite
    does the work with the GIL released, on another core: the thread leaves the serving process's
    CPU, see affinity.release_this_thread). A log copied whole is started again by the next writer,
    which cuts the file back to LIMIT_PAGES (journal_size_limit). Readers may keep a PASSIVE
    checkpoint from reaching the end of the log, which then keeps growing: past LIMIT_PAGES the thread
    runs a TRUNCATE checkpoint, which waits (at most TRUNCATE_WAIT_SECONDS) for them and empties the
    file; writers queue meanwhile, so it runs only then.

    `emissions serve --workers N` runs one in each worker (a busy checkpoint is skipped, not
    waited for); CLI processes run none and keep SQLite's own checkpoint at commit.
    """

    LIMIT_PAGES = 10_000  # about 40 MB of log
    TRUNCATE_WAIT_SECONDS = 2.0
    SQLITE_DEFAULT_PAGES = 1000

    def __init__(self, database: pw.SqliteDatabase, interval: float = 0.1):
        self.database = database
        self.interval = interval
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wal-checkpoint", daemon=True)

    def start(self) -> "WalCheckpointer":
        self.database.pragma("wal_autocheckpoint", 0, permanent=True)  # every request connection
        # A log copied whole is started again by the next writer, which then cuts the file back to this.
        self.database.pragma("journal_size_limit", self.LIMIT_PAGES * 4096, permanent=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread; the connections checkpoint at commit again, as SQLite does by default."""
        self._stopping.set()
        self._thread.join()
        if self.database.is_closed():  # for the connections opened from now on; none opened here at shutdown
            self.database._pragmas = [*(pragma for pragma in self.database._pragmas if pragma[0] != "wal_autocheckpoint"),
                                      ("wal_autocheckpoint", self.SQLITE_DEFAULT_PAGES)]
        else:
            self.database.pragma("wal_autocheckpoint", self.SQLITE_DEFAULT_PAGES, permanent=True)

    def connect(self) -> sqlite3.Connection:
        """The thread's own sqlite3 connection, outside Peewee's per-thread state: it never joins a transaction."""
        return sqlite3.connect(self.database.database, isolation_level=None, check_same_thread=False,
                               timeout=self.TRUNCATE_WAIT_SECONDS)

    def checkpoint(self, connection: sqlite3.Connection) -> int:
        """One round: PASSIVE, then TRUNCATE if the log is still past LIMIT_PAGES; the log's pages left."""
        busy, log_pages, copied = connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        # A log copied whole is started again by the next writer: only one that readers kept from
        # being copied, and that is past the limit, is worth making writers wait for.
        if log_pages > self.LIMIT_PAGES and copied < log_pages:
            busy, log_pages, copied = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return max(log_pages, 0)

    def _run(self) -> None:
        affinity.release_this_thread()  # SQLite copies the pages with the GIL released: off the serving CPU
        connection = self.connect()
        # On a full disk every round fails: the first is logged whole, then a count a minute.
        failures = outages.FailureLog(logging.getLogger("emissions.error"), "WAL checkpoint")
        try:
            while not self._stopping.wait(self.interval):
                try:
                    self.checkpoint(connection)
                    failures.succeeded()
                except sqlite3.Error as error:  # the next round tries again
                    failures.failed(error)
        finally:
            connection.close()


# The class open_database() makes for SQLite; `emissions serve --workers N` sets its own
# (workers.SharedWriterDatabase), whose writers queue with the other workers' on a file lock.
SQLITE_DATABASE = pw.SqliteDatabase


def open_database(url: str, waits: postgres.PostgresWaits | None = None) -> pw.Database:
    """A database for a DATABASE_URL, with the settings this service relies on (and, on PostgreSQL,
    the waits: postgres.py)."""
    if url.startswith("sqlite"):
        settings = db_url.parse(url)
        create_private(settings.get("database") or "")
        database = SQLITE_DATABASE(**{
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


class DecimalSum:
    """decimal_sum(x) in SQLite's SQL: the exact sum of decimals kept as text (SUM would add floats)."""

    def __init__(self):
        self.total = None

    def step(self, value: str | None) -> None:
        if value is not None:
            self.total = EXACT_SUM.add(self.total or Decimal(0), Decimal(value))

    def finalize(self) -> str | None:
        return None if self.total is None else str(self.total)
