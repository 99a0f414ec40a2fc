"""PostgreSQL with bounded waits: a connect timeout, TCP keepalives, a statement timeout, and a
deadline the client keeps itself.

PostgreSQL's statement_timeout ends a statement the server has received; with the network to it
stalled the server never sees the statement (or its answer never comes back), and the kernel
retries for about 15 minutes. So each statement here is also watched from this process: past the
statement timeout its connection's socket is shut down, the driver raises, the request answers 503
(outages.py) and the thread's next request opens a new connection
(docs/operations.md, "Database timeouts").
"""
from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass

import peewee as pw
from playhouse import db_url


@dataclass(frozen=True)
class PostgresWaits:
    """How long a PostgreSQL connection may wait, in seconds (the DATABASE_* settings)."""

    connect_timeout: int = 5
    statement_timeout: float = 10.0  # 0: none (the operator CLI's long commands)
    keepalives_idle: int = 10
    keepalives_interval: int = 5
    keepalives_count: int = 3

    def connect_params(self, options: str = "") -> dict:
        """libpq connection parameters; `options` (the URL's own) come first."""
        if self.statement_timeout:
            options = f"{options} -c statement_timeout={int(self.statement_timeout * 1000)}".strip()
        params = {"connect_timeout": self.connect_timeout, "keepalives": 1, "keepalives_idle": self.keepalives_idle,
                  "keepalives_interval": self.keepalives_interval, "keepalives_count": self.keepalives_count}
        return {**params, "options": options} if options else params


class Deadlines:
    """One thread per process that shuts down the socket of a statement past its deadline."""

    TICK = 0.1

    def __init__(self):
        self._lock = threading.Lock()
        self._armed: dict[object, tuple[float, int]] = {}
        self._pid = 0

    def arm(self, descriptor: int, seconds: float) -> object:
        """Watch the connection on `descriptor` for `seconds`; returns the token disarm() takes."""
        token = object()
        with self._lock:
            if self._pid != os.getpid():  # first use in this process (a worker forks before serving)
                self._pid = os.getpid()
                self._armed = {}
                threading.Thread(target=self._run, name="postgres-deadlines", daemon=True).start()
            self._armed[token] = (time.monotonic() + seconds, descriptor)
        return token

    def disarm(self, token: object) -> None:
        with self._lock:
            self._armed.pop(token, None)

    def _run(self) -> None:
        while True:
            time.sleep(self.TICK)
            now = time.monotonic()
            with self._lock:  # held while cutting: an armed descriptor is still its connection's
                for token, (deadline, descriptor) in list(self._armed.items()):
                    if now >= deadline:
                        del self._armed[token]
                        cut(descriptor)


def cut(descriptor: int) -> None:
    """Shut the socket down (both ways): the driver's wait on it returns, and it raises."""
    try:
        with socket.socket(fileno=os.dup(descriptor)) as duplicate:
            duplicate.shutdown(socket.SHUT_RDWR)
    except OSError:  # closed meanwhile: nothing left to cut
        pass


DEADLINES = Deadlines()


class BoundedPostgresqlDatabase(pw.PostgresqlDatabase):
    """Peewee's PostgreSQL database whose every statement (and BEGIN, COMMIT, ROLLBACK) ends by
    the statement timeout, answered or not."""

    statement_seconds = PostgresWaits.statement_timeout

    def _bounded(self, run, *args, **kwargs):
        if not self.statement_seconds:
            return run(*args, **kwargs)
        if self.is_closed():
            self.connect()  # bounded by connect_timeout
        token = DEADLINES.arm(self._state.conn.fileno(), self.statement_seconds)
        try:
            return run(*args, **kwargs)
        finally:
            DEADLINES.disarm(token)

    def _execute_cursor(self, sql, params, **cursor_options):
        return self._bounded(super()._execute_cursor, sql, params, **cursor_options)

    def begin(self, *args, **kwargs):
        return self._bounded(super().begin, *args, **kwargs)

    def commit(self):
        if self.is_closed():  # Peewee's own error, without opening a connection
            return super().commit()
        return self._bounded(super().commit)

    def rollback(self):
        if self.is_closed():
            return super().rollback()
        return self._bounded(super().rollback)


def open_postgres(url: str, field_types: dict, waits: PostgresWaits | None = None) -> BoundedPostgresqlDatabase:
    """The database a postgresql:// URL names, with the waits; a parameter in the URL wins."""
    waits = waits or PostgresWaits()
    settings = db_url.parse(url)
    params = {**waits.connect_params(settings.pop("options", "")), **settings}
    database = BoundedPostgresqlDatabase(field_types=field_types, **params)
    database.statement_seconds = waits.statement_timeout
    return database
