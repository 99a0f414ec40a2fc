"""`emissions backup`: a consistent copy of a live SQLite database (docs/operations.md, "Backups")."""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from playhouse import db_url

from .db import db, is_sqlite


class BackupError(RuntimeError):
    """A backup that cannot be made; the message says why."""


def require_database(url: str) -> None:
    """Refuse a SQLite DATABASE_URL naming no file: opening it would create an empty database, and
    a mistyped URL in a nightly job would write empty backups that look successful."""
    if not url.startswith("sqlite"):
        return  # backup() says what to use instead
    path = db_url.parse(url).get("database") or ""
    if path != ":memory:" and not Path(path).is_file():
        raise BackupError(f"there is no database at {path}; check DATABASE_URL")


def backup(path: str) -> dict:
    """Copy the bound SQLite database to `path` with SQLite's online backup API; return what was copied.

    The copy is made in one step, inside one read transaction: it is the database as of one
    commit, writers carry on meanwhile (WAL), and a `cp` of the file, which misses what is still in
    the write-ahead log, is never needed. It is written beside `path` and renamed into place, so
    `path` is either the whole copy or absent.
    """
    if not is_sqlite():
        raise BackupError("backup copies SQLite databases; on PostgreSQL use pg_dump "
                          "(docs/operations.md, Backups)")
    target = Path(path)
    if target.exists():
        raise BackupError(f"{path} already exists; give a new file name")
    if not target.parent.is_dir():
        raise BackupError(f"the directory {target.parent} does not exist")
    partial = target.with_name(target.name + ".partial")
    source = sqlite3.connect(db.database, timeout=30)
    try:
        # The copy holds the instance secret, webhook secrets and password hashes: owner-only, and a
        # file of its own: never one that was there (another backup's, or a link planted to make
        # this one write elsewhere).
        try:
            os.close(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
        except FileExistsError:
            raise BackupError(f"{partial} exists: another backup to {path} is running, or one was "
                              "interrupted; remove it and run again") from None
        try:
            copy = sqlite3.connect(partial)
            try:
                source.backup(copy)  # pages=-1: everything in one step, one snapshot
                calculations = copy.execute("SELECT count(*) FROM calculation").fetchone()[0]
                copy.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, no -wal beside it
            finally:
                copy.close()
        except BaseException:  # a failure, Ctrl-C, a cron time-out's SIGTERM: no partial file is left
            partial.unlink(missing_ok=True)
            raise
    except sqlite3.Error as exc:
        raise BackupError(f"backup failed: {exc}") from None
    finally:
        source.close()
    os.replace(partial, target)
    return {"path": str(target), "bytes": target.stat().st_size, "calculations": calculations}
