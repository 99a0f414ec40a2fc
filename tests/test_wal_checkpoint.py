"""The write-ahead log under a burst of writes: request connections never checkpoint, the
checkpointer's thread keeps the log bounded (issue 24, a steady tail)."""
from __future__ import annotations

import os
import threading

from emissions.db import WalCheckpointer, open_database


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
