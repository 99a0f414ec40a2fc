"""Numbered schema migrations: each file NNNN_name.py has up(migrator, db), recorded when applied."""
from __future__ import annotations

import datetime as dt
import importlib.util
import os
import re
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import peewee as pw
from playhouse import db_url
from playhouse.migrate import SchemaMigrator

HERE = Path(__file__).parent
NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.py$")
# Any constant works; every instance that migrates a PostgreSQL database takes the same lock.
POSTGRES_LOCK_ID = 140832023


class MigrationHistory(pw.Model):
    name = pw.CharField(primary_key=True, max_length=100)
    applied_at = pw.DateTimeField()

    class Meta:
        table_name = "migration_history"


def database_name(url: str) -> str:
    """The database a DATABASE_URL names, as messages show it: a SQLite file's absolute path, any
    other URL without its password.

    A relative SQLite path is a file in the working directory, so a command run from elsewhere meets
    another (new) database; its absolute path makes that visible.
    """
    parts = urlsplit(url)
    if parts.scheme.startswith("sqlite"):
        path = db_url.parse(url).get("database") or ""
        return path if path in ("", ":memory:") or path.startswith("file:") else os.path.abspath(path)
    if parts.password is not None:
        host = parts.netloc.rsplit("@", 1)[1]
        parts = parts._replace(netloc=f"{parts.username}@{host}" if parts.username else host)
    # The driver takes a password from the query too (?password=, ?sslpassword=).
    query = [(name, value) for name, value in parse_qsl(parts.query, keep_blank_values=True)
             if name.lower() not in ("password", "sslpassword")]
    parts = parts._replace(query=urlencode(query, safe="/"))
    named = urlunsplit(parts)
    return named if parts.netloc else named.replace(":", "://", 1)  # postgresql:///db keeps its "//"


def available() -> list[Path]:
    """The migration files in order."""
    return sorted(path for path in HERE.iterdir() if NAME.match(path.name))


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"emissions.migrations.m{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pending(database: pw.Database) -> list[str]:
    """The names of the migrations not yet applied (every one on an empty database); it only reads."""
    names = [path.stem for path in available()]
    if isinstance(database, pw.PostgresqlDatabase):
        # to_regclass follows the search_path, as the service's own queries do.
        exists = database.execute_sql("SELECT to_regclass(%s) IS NOT NULL",
                                      (MigrationHistory._meta.table_name,)).fetchone()[0]
    else:
        exists = database.table_exists(MigrationHistory._meta.table_name)
    if not exists:
        return names
    with database.bind_ctx([MigrationHistory]):
        applied = {row.name for row in MigrationHistory.select(MigrationHistory.name)}
    return [name for name in names if name not in applied]


def run(database: pw.Database) -> list[str]:
    """Apply every migration not yet recorded, each in its own transaction; return their names."""
    postgres = isinstance(database, pw.PostgresqlDatabase)
    if postgres:
        # Several instances may start at once: the first migrates, the rest wait. The lock is taken
        # before the history table is created, since concurrent CREATE TABLE IF NOT EXISTS collide.
        database.execute_sql("SELECT pg_advisory_lock(%s)", (POSTGRES_LOCK_ID,))
    try:
        return _apply(database)
    finally:
        if postgres:
            database.execute_sql("SELECT pg_advisory_unlock(%s)", (POSTGRES_LOCK_ID,))


def _apply(database: pw.Database) -> list[str]:
    applied: list[str] = []
    with database.bind_ctx([MigrationHistory]):
        database.create_tables([MigrationHistory], safe=True)
        for path in available():
            with database.atomic():  # on SQLite, BEGIN IMMEDIATE: one migrating process at a time
                if MigrationHistory.get_or_none(MigrationHistory.name == path.stem):
                    continue
                _load(path).up(SchemaMigrator.from_database(database), database)
                MigrationHistory.create(name=path.stem, applied_at=dt.datetime.utcnow())
                applied.append(path.stem)
    return applied
