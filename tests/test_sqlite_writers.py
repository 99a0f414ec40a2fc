"""SQLite writers: BEGIN IMMEDIATE, so concurrent writers queue at the start and all commit; readers do not queue."""
from __future__ import annotations

import sqlite3
import threading

import pytest

from emissions import models


@pytest.fixture
def database(app):
    return models.db.obj


def test_a_failed_transaction_leaves_the_database_to_the_next_writer(database, tmp_path):
    with pytest.raises(ZeroDivisionError):
        with database.atomic():
            models.InstanceSecret.create(name="rolled-back", value="v")
            1 / 0
    other = sqlite3.connect(database.database, timeout=0)  # fails at once if the lock were still held
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
    finally:
        other.close()
    assert not models.InstanceSecret.select().where(models.InstanceSecret.name == "rolled-back").exists()


def test_a_read_snapshot_does_not_wait_for_a_writer(database):
    writer = sqlite3.connect(database.database, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another process writing
    try:
        with database.atomic(lock_type="DEFERRED"):
            assert database.execute_sql("SELECT count(*) FROM organization").fetchone() == (0,)
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_concurrent_writers_of_one_process_all_commit(database, acme):
    failures: list = []

    def write(number):
        try:
            for index in range(20):
                with database.atomic():
                    models.Customer.create(organization=acme.org, environment="test",
                                           reference=f"w{number}-{index}", name="Writer")
        except Exception as exc:  # reported below
            failures.append(exc)
        finally:
            database.close()

    threads = [threading.Thread(target=write, args=(number,)) for number in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert models.Customer.select().where(models.Customer.reference.startswith("w")).count() == 120
