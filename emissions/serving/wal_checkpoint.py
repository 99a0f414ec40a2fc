"""The WAL checkpointer: a serving process's write-ahead log copied back from a thread of its own."""
from __future__ import annotations

import logging
import sqlite3
import threading

import peewee as pw

from .. import outages
from ..db import SharedWriterDatabase
from .writer_lock import share_writer_lock, writers_held


class WalCheckpointer:
    """Checkpoints SQLite's write-ahead log from a thread of its own, for a serving process.

    By default the connection whose commit takes the log past 1000 pages copies the log into the
    database and syncs it, inside its request and while this process's writers queue behind it.
    Here the request connections never checkpoint (wal_autocheckpoint=0); a thread does it every
    `interval` seconds, off the request threads (SQLite copies the pages with the GIL released).

    A round is a PASSIVE checkpoint, which waits for no one: writers go on committing meanwhile,
    so under sustained writes it ends with new frames behind it, the log is never copied whole, and
    SQLite never starts it again: it would grow without end. So when the log has passed
    CATCH_UP_PAGES, a second PASSIVE runs with the writers held (writer_lock.writers_held):
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
            with writers_held(self.database):
                busy, log_pages, copied = connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return max(log_pages, 0)

    def _run(self) -> None:
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
