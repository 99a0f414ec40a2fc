"""The write-ahead log under a burst of writes: request connections never checkpoint, the
checkpointer's thread keeps the log bounded, also while writers go on committing."""
from __future__ import annotations

import fcntl
import logging
import os
import sqlite3
import threading
import time

import pytest

from emissions.db import open_database
from emissions.serving.wal_checkpoint import WalCheckpointer


class SmallLimit(WalCheckpointer):
    LIMIT_PAGES = 200


def burst(database, rows: int = 3000) -> None:
    """Writes as requests make them: many small transactions, each a few pages."""
    for start in range(0, rows, 10):
        with database.atomic():
            database.execute_sql("INSERT INTO filler (body) VALUES " + ", ".join(["(?)"] * 10),
                                 [os.urandom(1500).hex() for _ in range(10)])


def wal_pages(path) -> int:
    wal = f"{path}-wal"
    return os.path.getsize(wal) // 4096 if os.path.exists(wal) else 0


def test_request_connections_never_checkpoint_and_the_thread_bounds_the_log(tmp_path):
    path = tmp_path / "wal.sqlite3"
    database = open_database(f"sqlite:///{path}")
    database.execute_sql("CREATE TABLE filler (id INTEGER PRIMARY KEY, body TEXT)")
    checkpointer = SmallLimit(database, interval=3600)  # its thread waits: rounds are run by hand below
    checkpointer.start()
    try:
        # Every connection the service opens, in any thread, has SQLite's checkpoint at commit off.
        seen = []
        thread = threading.Thread(target=lambda: seen.append(database.execute_sql("PRAGMA wal_autocheckpoint").fetchone()[0]))
        thread.start()
        thread.join()
        assert seen == [0]
        assert database.execute_sql("PRAGMA wal_autocheckpoint").fetchone()[0] == 0

        burst(database)
        # SQLite's own checkpoint would have run at 1000 pages in the committing request; none ran.
        assert wal_pages(path) > 2000

        connection = checkpointer.connect()
        try:
            checkpointer.checkpoint(connection)  # the whole log copied: no TRUNCATE holds the writers
            burst(database, 1)  # the next writer starts the log again and cuts the file to the limit
            assert wal_pages(path) <= SmallLimit.LIMIT_PAGES
            burst(database, 300)
            checkpointer.checkpoint(connection)
            burst(database, 1)
            assert wal_pages(path) <= SmallLimit.LIMIT_PAGES
        finally:
            connection.close()
        assert database.execute_sql("SELECT COUNT(*) FROM filler").fetchone()[0] == 3320
    finally:
        checkpointer.stop()
    # Stopped, it leaves the connections checkpointing at commit: the log cannot grow unwatched.
    assert database.execute_sql("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000
    database.close()


class CommitsDuringThePass:
    """The checkpointer's connection, with a writer committing while its first PASSIVE runs (as
    requests do under sustained writes); it notes whether the writers were held at each pass."""

    def __init__(self, connection, database, probe: int):
        self.connection, self.database, self.probe = connection, database, probe
        self.writers_held: list[bool] = []

    def execute(self, sql):
        try:
            fcntl.flock(self.probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(self.probe, fcntl.LOCK_UN)
            self.writers_held.append(False)
        except BlockingIOError:
            self.writers_held.append(True)
        if len(self.writers_held) > 1:
            return self.connection.execute(sql)
        writer = sqlite3.connect(self.database.database, isolation_level=None)
        writer.execute("PRAGMA wal_autocheckpoint=0")  # as the service's connections
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("INSERT INTO filler (body) VALUES ('committed while the pass ran')")
        cursor = self.connection.execute(sql)
        writer.execute("COMMIT")  # behind the pass: the log is not copied whole, nor started again
        writer.close()
        burst(self.database, 300)  # the writes that go on meanwhile
        return cursor


def log_pages(connection) -> int:
    return connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]


@pytest.mark.parametrize("catch_up", [True, False], ids=["caught up", "without the catch-up"])
def test_commits_during_a_checkpoint_are_caught_up_with_the_writers_held_and_the_log_starts_again(tmp_path, catch_up):
    path = tmp_path / "steady.sqlite3"
    database = open_database(f"sqlite:///{path}")
    database.execute_sql("CREATE TABLE filler (id INTEGER PRIMARY KEY, body TEXT)")
    checkpointer = SmallLimit(database, interval=3600)
    checkpointer.CATCH_UP_PAGES = 100 if catch_up else 10**9
    assert database.writer_lock is None
    checkpointer.start()  # as serve starts it: its process's writers now queue on the lock file
    assert database.writer_lock.path == f"{path}-writers.lock"
    probe = os.open(database.writer_lock.path, os.O_RDWR | os.O_CREAT)
    connection = checkpointer.connect()
    try:
        burst(database, 1000)
        watched = CommitsDuringThePass(connection, database, probe)
        checkpointer.checkpoint(watched)
        burst(database, 1)  # the next writer
        if catch_up:
            assert watched.writers_held == [False, True]  # the second pass, and only it, held them
            assert log_pages(connection) < 20  # started again: only the last commit's pages
            assert wal_pages(path) <= SmallLimit.LIMIT_PAGES
        else:  # what a PASSIVE alone leaves under sustained writes: the log goes on growing
            assert watched.writers_held == [False]
            assert log_pages(connection) > 1000
        assert database.execute_sql("SELECT COUNT(*) FROM filler").fetchone()[0] == 1311
    finally:
        connection.close()
        os.close(probe)
        checkpointer.stop()
        database.close()


def test_a_database_without_the_checkpointer_keeps_sqlites_own_checkpoint(tmp_path):
    """A CLI process runs no checkpointer thread: its commits checkpoint as SQLite does by default."""
    database = open_database(f"sqlite:///{tmp_path / 'cli.sqlite3'}")
    assert database.execute_sql("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000
    database.close()


def test_stopped_after_its_connections_closed_it_opens_none_and_later_ones_checkpoint_at_commit(tmp_path):
    database = open_database(f"sqlite:///{tmp_path / 'shutdown.sqlite3'}")
    database.connect()
    checkpointer = WalCheckpointer(database, interval=3600).start()
    database.close()  # as serve closes its connections before stopping the thread
    checkpointer.stop()
    assert database.is_closed()
    assert database.execute_sql("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000
    database.close()


def test_a_failing_round_is_logged_and_the_thread_goes_on(tmp_path):
    """A round that fails, on a full disk or when the writer lock cannot be taken (OSError), is
    logged and the next round runs: the thread never dies and leaves the log unwatched."""
    database = open_database(f"sqlite:///{tmp_path / 'failing.sqlite3'}")
    rounds = []

    class Failing(WalCheckpointer):
        def checkpoint(self, connection):
            rounds.append(1)
            raise OSError(24, "Too many open files") if len(rounds) % 2 else sqlite3.OperationalError("disk is full")

    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger("emissions.error")
    logger.addHandler(handler)
    checkpointer = Failing(database, interval=0.01).start()
    try:
        deadline = time.monotonic() + 30
        while len(rounds) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(rounds) >= 4 and checkpointer._thread.is_alive()
    finally:
        checkpointer.stop()
        logger.removeHandler(handler)
        database.close()
    first = records[0]
    assert first.getMessage() == "WAL checkpoint failing" and isinstance(first.exc_info[1], OSError)
