"""SQLite writers of one process queue on a FIFO lock before BEGIN IMMEDIATE; readers do not."""
from __future__ import annotations

import threading
import time

import pytest

from emissions import models
from emissions.models import FifoLock


def wait_until(condition, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.001)


def test_the_lock_goes_to_its_waiters_in_the_order_they_came():
    lock, order = FifoLock(), []
    assert lock.acquire(timeout=1)

    def waiter(name):
        assert lock.acquire(timeout=5)
        order.append(name)
        lock.release()

    threads = []
    for name in ("first", "second", "third"):
        threads.append(threading.Thread(target=waiter, args=(name,)))
        threads[-1].start()
        wait_until(lambda: len(lock._waiters) == len(threads))
    lock.release()
    for thread in threads:
        thread.join()
    assert order == ["first", "second", "third"]
    assert lock.acquire(timeout=0) and not lock._waiters


def test_a_wait_that_times_out_leaves_the_queue():
    lock = FifoLock()
    assert lock.acquire(timeout=1)
    assert lock.acquire(timeout=0.01) is False
    assert not lock._waiters
    lock.release()
    assert lock.acquire(timeout=0)


@pytest.fixture
def database(app):
    return models.db.obj


def test_a_failed_transaction_releases_the_writer_lock(database):
    with pytest.raises(ZeroDivisionError):
        with database.atomic():
            database.execute_sql("SELECT 1")
            1 / 0
    assert database._writer.acquire(timeout=0)
    database._writer.release()


def test_a_read_snapshot_does_not_queue_behind_writers(database):
    assert database._writer.acquire(timeout=1)  # as if another thread were writing
    try:
        with database.atomic(lock_type="DEFERRED"):
            assert database.execute_sql("SELECT count(*) FROM organization").fetchone() == (0,)
    finally:
        database._writer.release()


def test_concurrent_writers_of_one_process_all_commit(database, acme):
    def write(number):
        for index in range(20):
            with database.atomic():
                models.Customer.create(organization=acme.org, environment="test", reference=f"w{number}-{index}",
                                       name="Writer")
        database.close()

    threads = [threading.Thread(target=write, args=(number,)) for number in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert models.Customer.select().where(models.Customer.reference.startswith("w")).count() == 120
