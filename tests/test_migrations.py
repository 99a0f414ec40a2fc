"""Migrations: applied once, recorded, and safe when several instances start at the same moment."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import migrations
import models
from conftest import POSTGRES_URL

EMISSIONS = Path(sys.executable).with_name("emissions")
EVERY_MIGRATION = [path.stem for path in migrations.available()]


def migrate_at_once(database_url: str, processes: int = 4) -> list[subprocess.CompletedProcess]:
    """Start `emissions migrate` several times at the same moment against one empty database."""
    environment = {**os.environ, "DATABASE_URL": database_url}
    running = [subprocess.Popen([str(EMISSIONS), "migrate", "--json"], env=environment, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(processes)]
    return [subprocess.CompletedProcess(p.args, p.wait(timeout=60), *p.communicate()) for p in running]


def assert_migrated_exactly_once(results) -> None:
    assert [r.returncode for r in results] == [0] * len(results), [r.stderr for r in results]
    applied = [json.loads(r.stdout)["applied"] for r in results]
    assert sorted(applied, key=len)[-1] == EVERY_MIGRATION  # one process applied them all...
    assert sum(len(names) for names in applied) == len(EVERY_MIGRATION)  # ...and nobody applied one twice


def test_instances_migrating_a_new_sqlite_file_at_once_apply_each_migration_once(tmp_path):
    assert_migrated_exactly_once(migrate_at_once(f"sqlite:///{tmp_path / 'new.sqlite3'}"))


def test_instances_migrating_a_new_postgres_schema_at_once_apply_each_migration_once():
    if not POSTGRES_URL:
        pytest.skip("PostgreSQL tests need TEST_DATABASE_URL (set by .ci/run)")
    schema = f"migrate_race_{os.getpid()}"
    admin = models.open_database(POSTGRES_URL)
    admin.execute_sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    admin.execute_sql(f"CREATE SCHEMA {schema}")
    try:
        separator = "&" if "?" in POSTGRES_URL else "?"
        assert_migrated_exactly_once(migrate_at_once(f"{POSTGRES_URL}{separator}options=-csearch_path%3D{schema}"))
    finally:
        admin.execute_sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        admin.close()
