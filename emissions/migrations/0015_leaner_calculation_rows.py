"""A calculation's row without what nothing reads, and a shorter fingerprint.

- calculation.request_id is dropped: it was written and never read (the access log keeps each
  request's id).
- The fingerprint of a calculation and of a shipment keeps the first 32 hexadecimal characters
  of the SHA-256 digest (128 bits), which is all that telling two bodies sent with the same
  Idempotency-Key apart needs; the stored ones are cut to match what calculations.fingerprint()
  now gives, so a replay of an earlier request still matches.

Plain SQL, the same on SQLite and PostgreSQL (never import models.py here). On SQLite (3.35 or
later: DROP COLUMN) the rows shrink in place: a file already holding many calculations gets the
space back for new pages, or at once with VACUUM.
"""
import sqlite3

import peewee as pw

STATEMENTS = (
    "ALTER TABLE calculation DROP COLUMN request_id",
    "UPDATE calculation SET fingerprint = substr(fingerprint, 1, 32) WHERE length(fingerprint) > 32",
    "UPDATE shipment SET fingerprint = substr(fingerprint, 1, 32) WHERE length(fingerprint) > 32",
)


def up(migrator, db):
    if isinstance(db, pw.SqliteDatabase) and sqlite3.sqlite_version_info < (3, 35):
        raise RuntimeError(f"migration 0015 needs SQLite 3.35 or later (DROP COLUMN); this Python has {sqlite3.sqlite_version}")
    for statement in STATEMENTS:
        db.execute_sql(statement)
