"""The SQLite writer lock the workers share (serving/writer_lock.py): one writer at a time across
processes, threads of one process sharing its descriptor, and a bounded wait."""
from __future__ import annotations

import os
import threading

import peewee as pw
import pytest

from emissions.db import open_database
from emissions.serving.writer_lock import share_writer_lock



@pytest.fixture
def database(tmp_path):
    """A SQLite database whose writers queue on its lock file, as WalCheckpointer.start makes each
    serving process's (share_writer_lock)."""
    database = open_database(f"sqlite:///{tmp_path / 'db.sqlite3'}")
    share_writer_lock(database)
    yield database
    database.close()


def test_the_workers_writers_hold_the_file_lock_one_at_a_time(database, tmp_path):
    import fcntl

    assert database.writer_lock.path == str(tmp_path / "db.sqlite3-writers.lock")
    probe = os.open(database.writer_lock.path, os.O_RDWR | os.O_CREAT)  # as another worker's
    held = []

    def try_lock():
        try:
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(probe, fcntl.LOCK_UN)
            held.append(False)
        except BlockingIOError:
            held.append(True)

    with database.atomic():
        database.execute_sql("CREATE TABLE t (x)")
        try_lock()
    try_lock()
    with pytest.raises(ZeroDivisionError), database.atomic():
        try_lock()
        1 / 0
    try_lock()
    reader = threading.Thread(target=lambda: database.execute_sql("SELECT count(*) FROM t").fetchone())
    reader.start()
    reader.join()
    with database.writer_lock.held():  # the checkpointer's catch-up
        try_lock()
    try_lock()
    assert held == [True, False, True, False, True, False]
    os.close(probe)


@pytest.mark.parametrize("spin", [0.0, 60.0], ids=["polling", "spinning"])
def test_a_writer_waits_for_the_lock_another_process_holds_then_writes(database, monkeypatch, spin):
    import fcntl

    monkeypatch.setattr(database.writer_lock, "SPIN_SECONDS", spin)
    database.execute_sql("CREATE TABLE t (x)")
    other = os.open(database.writer_lock.path, os.O_RDWR | os.O_CREAT)  # another worker's
    fcntl.flock(other, fcntl.LOCK_EX)
    began = threading.Event()

    def write():
        began.set()
        with database.atomic():
            database.execute_sql("INSERT INTO t VALUES (1)")

    writer = threading.Thread(target=write)
    writer.start()
    began.wait()
    writer.join(0.3)
    assert writer.is_alive()  # it waits while the other holds the lock
    assert database.execute_sql("SELECT count(*) FROM t").fetchone()[0] == 0
    fcntl.flock(other, fcntl.LOCK_UN)
    writer.join(10)
    assert not writer.is_alive()
    assert database.execute_sql("SELECT count(*) FROM t").fetchone()[0] == 1
    os.close(other)


def test_writer_threads_share_the_lock_files_descriptors(database):
    """A thread that writes once (a /healthz probe runs in a new thread each time) leaves no
    descriptor behind: holders take one of the database's and give it back."""
    database.execute_sql("CREATE TABLE t (x)")

    def write():
        with database.atomic():
            database.execute_sql("INSERT INTO t VALUES (1)")
        database.close()

    def open_descriptors() -> int:
        return len(os.listdir("/proc/self/fd"))

    before = open_descriptors()
    for _ in range(50):
        thread = threading.Thread(target=write)
        thread.start()
        thread.join()
    assert open_descriptors() <= before + 1
    assert database.execute_sql("SELECT count(*) FROM t").fetchone()[0] == 50


def test_a_writer_that_waits_too_long_for_the_lock_gets_database_is_locked(database, monkeypatch):
    import fcntl

    from emissions import outages

    monkeypatch.setattr(database.writer_lock, "WAIT_SECONDS", 0.2)
    database.execute_sql("CREATE TABLE t (x)")
    stuck = os.open(database.writer_lock.path, os.O_RDWR)  # another process's writer, stuck in its transaction
    fcntl.flock(stuck, fcntl.LOCK_EX)
    try:
        with pytest.raises(pw.OperationalError) as refused:
            with database.atomic():
                database.execute_sql("INSERT INTO t VALUES (1)")
        assert outages.cause_of(refused.value) == "locked"  # a 503 with Retry-After, as SQLite's own
    finally:
        os.close(stuck)
    with database.atomic():  # the lock is free again, and this thread holds nothing
        database.execute_sql("INSERT INTO t VALUES (2)")
    assert database.execute_sql("SELECT x FROM t").fetchall() == [(2,)]


def test_a_lock_file_that_cannot_be_opened_leaves_sqlite_as_it_comes(tmp_path):
    path = tmp_path / "db.sqlite3"
    (tmp_path / "db.sqlite3-writers.lock").mkdir()  # not a file one can open for writing
    database = open_database(f"sqlite:///{path}")
    share_writer_lock(database)
    assert database.writer_lock is None
    with database.atomic():
        database.execute_sql("CREATE TABLE t (x)")
    database.close()


def test_a_thread_holding_the_lock_cannot_take_it_again(database):
    with database.atomic():
        database.execute_sql("CREATE TABLE t (x)")
        with pytest.raises(RuntimeError, match="already holds the writer lock"):
            with database.writer_lock.held():
                pass
        database.execute_sql("INSERT INTO t VALUES (1)")
    assert database.execute_sql("SELECT count(*) FROM t").fetchone()[0] == 1
