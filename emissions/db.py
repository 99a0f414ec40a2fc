"""The database connection: the proxy the models use, opening a DATABASE_URL with the settings this
service relies on, SQLite's pragmas and exact-decimal functions, and the WAL checkpointer."""
from __future__ import annotations

import contextlib
import decimal
import fcntl
import importlib.util
import logging
import os
import sqlite3
import threading
import time
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


class SharedWriterDatabase(pw.SqliteDatabase):
    """SQLite whose write transactions, once share_writer_lock() named a lock file, first take an
    exclusive flock() of it.

    A process running the WalCheckpointer (every serving process, each worker of `serve --workers N`
    too) queues its write transactions on the file beside the database, and the checkpointer holds
    them off with the same lock for its short catch-up. Between processes, SQLite's busy handler
    makes a writer sleep and retry, a little longer each time, so a worker that met another's
    transaction idles on after it ended; the lock is taken again the moment it is free. A flock
    belongs to an open file, so each holder locks through a descriptor of its own, taken from the
    ones this database opened and given back after. The kernel drops the lock of a process that
    dies. Without a lock file (the CLI, tests) it is SQLite as it comes.
    """

    WRITE_LOCK_TYPES = ("IMMEDIATE", "EXCLUSIVE")
    SPIN_SECONDS = 0.001  # longer than a write transaction usually holds the lock
    POLL_SECONDS = 0.001
    WAIT_SECONDS = 10.0  # as long as SQLite's busy handler waits (busy_timeout)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lock_path: str | None = None
        self._holding = threading.local()  # the descriptor this thread holds the lock through
        self._free: list[int] = []  # descriptors open on the lock file that nobody holds it through

    def begin(self, lock_type=None):
        if (lock_type or self._lock_type or "").upper() not in self.WRITE_LOCK_TYPES or not self.lock_path:
            return super().begin(lock_type)
        self._hold()
        try:
            super().begin(lock_type)
        except BaseException:
            self._release()
            raise

    def commit(self):
        super().commit()  # when COMMIT fails the transaction is still open: rollback() releases
        self._release()

    def rollback(self):
        try:
            super().rollback()
        finally:
            self._release()

    @contextlib.contextmanager
    def writers_held(self):
        """No write transaction of a process sharing the lock begins while the block runs (a
        statement outside a transaction still may); nothing without a lock file."""
        if not self.lock_path:
            yield
            return
        self._hold()
        try:
            yield
        finally:
            self._release()

    def _hold(self) -> None:
        """Take the lock. While another holds it, try again: for SPIN_SECONDS giving up only the
        CPU and the GIL between tries (a writer asleep runs again only once its CPU is woken and
        scheduled, which on a virtual machine can take about as long as the other's whole
        transaction), then every POLL_SECONDS, until WAIT_SECONDS have passed: then, as SQLite's
        busy handler would, OperationalError "database is locked" (outages.py: a 503)."""
        if getattr(self._holding, "descriptor", None) is not None:
            raise RuntimeError("this thread already holds the writer lock")
        try:
            descriptor = self._free.pop()
        except IndexError:
            descriptor = _open_lock(self.lock_path)
        try:
            self._take(descriptor)
        except BaseException:
            self._free.append(descriptor)
            raise
        self._holding.descriptor = descriptor

    def _take(self, descriptor: int) -> None:
        started = time.monotonic()
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                waited = time.monotonic() - started
                if waited > self.WAIT_SECONDS:
                    locked = sqlite3.OperationalError(
                        f"database is locked (another writer held the writer lock for {self.WAIT_SECONDS:g} s)")
                    raise pw.OperationalError(locked) from locked  # as Peewee wraps SQLite's own
                if waited < self.SPIN_SECONDS:
                    os.sched_yield()
                else:
                    time.sleep(self.POLL_SECONDS)

    def _release(self) -> None:
        descriptor = getattr(self._holding, "descriptor", None)
        if descriptor is not None:
            self._holding.descriptor = None
            fcntl.flock(descriptor, fcntl.LOCK_UN)
            self._free.append(descriptor)


def _open_lock(lock_path: str) -> int:
    """A descriptor of the writer lock file (created private), not inherited by a child process."""
    return os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


def share_writer_lock(database: pw.Database) -> None:
    """Make this process's SQLite write transactions queue on `<database>-writers.lock`
    (WalCheckpointer.start does; nothing to do on PostgreSQL or in memory). A lock file that cannot
    be opened is logged, and the writers go on without it, as SQLite alone would have them."""
    path = database.database if isinstance(database, SharedWriterDatabase) else ""
    if not path or path == ":memory:" or path.startswith("file:") or database.lock_path:
        return
    lock_path = f"{path}-writers.lock"
    try:
        database._free.append(_open_lock(lock_path))
    except OSError as error:
        logging.getLogger("emissions.error").warning(
            "the writer lock %s cannot be opened (%s): writers wait in SQLite's busy handler instead, "
            "and the WAL checkpoint cannot hold them for its catch-up", lock_path, error.strerror or error)
        return
    database.lock_path = lock_path


class WalCheckpointer:
    """Checkpoints SQLite's write-ahead log from a thread of its own, for a serving process.

    By default the connection whose commit takes the log past 1000 pages copies the log into the
    database and syncs it, inside its request and while this process's writers queue behind it.
    Here the request connections never checkpoint (wal_autocheckpoint=0); a thread does it every
    `interval` seconds, off the serving CPU (SQLite copies the pages with the GIL released, see
    affinity.release_this_thread).

    A round is a PASSIVE checkpoint, which waits for no one: writers go on committing meanwhile,
    so under sustained writes it ends with new frames behind it, the log is never copied whole, and
    SQLite never starts it again: it would grow without end. So when the log has passed
    CATCH_UP_PAGES, a second PASSIVE runs with the writers held (SharedWriterDatabase.writers_held):
    it copies only what was committed during the first, and leaves the log copied whole. The next
    writer then starts the log again from its beginning and cuts the file back to LIMIT_PAGES
    (journal_size_limit). A reader still on an older snapshot keeps its frames from being copied;
    the log is started again in a later round, once it finished.

    `emissions serve --workers N` runs one in each worker (a busy checkpoint is skipped, not
    waited for); CLI processes run none and keep SQLite's own checkpoint at commit.
    """

    CATCH_UP_PAGES = 4000  # about 16 MB of log: a catch-up now and then, not at every round
    LIMIT_PAGES = 10_000  # about 40 MB of log file kept when the log starts again
    SQLITE_DEFAULT_PAGES = 1000

    def __init__(self, database: SharedWriterDatabase, interval: float = 0.05):
        self.database = database
        self.interval = interval
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wal-checkpoint", daemon=True)

    def start(self) -> "WalCheckpointer":
        share_writer_lock(self.database)  # what the catch-up holds the writers on
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
        return sqlite3.connect(self.database.database, isolation_level=None, check_same_thread=False)

    def checkpoint(self, connection: sqlite3.Connection) -> int:
        """One round: PASSIVE, then, past CATCH_UP_PAGES, PASSIVE again with the writers held; the
        log's pages (as the last PASSIVE began)."""
        busy, log_pages, copied = connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        if log_pages > self.CATCH_UP_PAGES:
            with self.database.writers_held():
                busy, log_pages, copied = connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
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
                except (sqlite3.Error, pw.PeeweeException, OSError) as error:  # the next round tries again
                    failures.failed(error)
        finally:
            connection.close()


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
