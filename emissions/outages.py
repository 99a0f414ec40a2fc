"""When the database is unavailable: telling it from a programming error, logging it without a flood,
and remembering it for /healthz.

An unavailable database (unreachable, stalled past its statement timeout, read-only, full, locked
past its busy timeout) is the operator's to fix and the client's to retry: the API answers 503 with
Retry-After. Anything else that goes wrong stays a 500 with its traceback.
"""
from __future__ import annotations

import logging
import sqlite3
import threading
import time
from typing import Callable

import peewee as pw

try:  # the [postgres] extra
    import psycopg2
    import psycopg2.errors
    POSTGRES_UNAVAILABLE: tuple[type, ...] = (psycopg2.OperationalError, psycopg2.InterfaceError,
                                              psycopg2.errors.ReadOnlySqlTransaction)
except ImportError:
    POSTGRES_UNAVAILABLE = ()

RETRY_AFTER_SECONDS = 5
MESSAGE = "The service is temporarily unavailable; retry after a few seconds."

# What SQLite says when it cannot write or read its file, by what /healthz names as the cause.
SQLITE_CAUSES = (
    ("database or disk is full", "disk full"),
    ("readonly database", "read-only"),
    ("database is locked", "locked"),
    ("disk i/o error", "I/O error"),
    ("unable to open database file", "unreachable"),
)
WRITE_CAUSES = ("disk full", "read-only")  # reads may still succeed meanwhile


def cause_of(error: BaseException) -> str | None:
    """What makes the database unavailable, if that is what `error` says; None for anything else."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, sqlite3.DatabaseError):
            text = str(error).lower()
            for words, cause in SQLITE_CAUSES:
                if words in text:
                    return cause
        if POSTGRES_UNAVAILABLE and isinstance(error, POSTGRES_UNAVAILABLE):
            if isinstance(error, psycopg2.errors.ReadOnlySqlTransaction):
                return "read-only"
            if isinstance(error, psycopg2.errors.DiskFull):
                return "disk full"
            if isinstance(error, psycopg2.errors.QueryCanceled):
                return "not answering"
            return "unreachable"
        if isinstance(error, pw.InterfaceError):  # peewee's own: the connection is gone
            return "unreachable"
        # Peewee wraps the driver's error: the original is its first argument, or its context.
        inner = error.args[0] if error.args and isinstance(error.args[0], BaseException) else None
        error = inner or error.__cause__ or error.__context__
    return None


class FailureLog:
    """Logs a run of failures: the first with its traceback, then one line per interval with a
    count, then one line when it ends (shared by the API and the webhook delivery job's pattern)."""

    def __init__(self, logger: logging.Logger, what: str, interval: float = 60.0, clock=time.monotonic):
        self.logger = logger
        self.what = what
        self.interval = interval
        self.clock = clock
        self.failures = 0
        self._next_line = 0.0
        self._lock = threading.Lock()

    def failed(self, error: BaseException, fields: dict | None = None) -> None:
        """Count a failure; log it when it is the first or the interval has passed."""
        with self._lock:
            self.failures += 1
            now = self.clock()
            first = self.failures == 1
            due = first or now >= self._next_line
            if due:
                self._next_line = now + self.interval
            count = self.failures
        if first:
            self.logger.error(f"{self.what} failing", exc_info=(type(error), error, error.__traceback__),
                              extra={"fields": {"message": f"{self.what} failing", **(fields or {})}})
        elif due:
            self.logger.error(f"{self.what} still failing", extra={"fields": {
                "message": f"{self.what} still failing", **(fields or {}), "failures": count,
                "error": (str(error).splitlines() or [type(error).__name__])[0]}})

    def succeeded(self) -> None:
        """End a run of failures, with one line if there was one."""
        if not self.failures:  # read without the lock: the usual case costs nothing
            return
        with self._lock:
            count, self.failures = self.failures, 0
        if count:
            self.logger.warning(f"{self.what} succeeding again", extra={"fields": {
                "message": f"{self.what} succeeding again", "failures": count}})


class Health:
    """The last write failure this process met, for /healthz: a failure keeps it unhealthy until a
    write succeeds, or, with no failure for FRESH_SECONDS, its own probe does."""

    FRESH_SECONDS = 10.0

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.cause: str | None = None
        self.failed_at = 0.0

    def write_failed(self, cause: str) -> None:
        self.cause, self.failed_at = cause, self.clock()

    def write_succeeded(self) -> None:
        self.cause = None

    def failing(self) -> str | None:
        """The cause of a write failure that is recent enough to trust over a probe, or None."""
        cause = self.cause
        if cause is not None and self.clock() - self.failed_at < self.FRESH_SECONDS:
            return cause
        return None

    def probe_succeeded(self) -> None:
        """A probe passed: forget a failure no request has repeated lately."""
        if self.failing() is None:
            self.cause = None


class Prober:
    """Runs a database probe in a thread of its own and waits for it at most `timeout` seconds, so
    that /healthz answers in time even when the database (or the network to it) stalls. One probe
    runs at a time: while one is stuck, every check answers "not answering" at once.

    The probe returns None when the database can write, or the cause when it cannot; an error it
    raises is the cause cause_of() names ("unreachable" for any other).
    """

    def __init__(self, probe: Callable[[], str | None], timeout: float):
        self.probe = probe
        self.timeout = timeout
        self._lock = threading.Lock()
        self._running: threading.Event | None = None

    def check(self) -> tuple[str | None, BaseException | None]:
        """(None, None) when the probe passed, else the cause and the error (None when there was none)."""
        with self._lock:
            done = self._running
            if done is None:
                done = self._running = threading.Event()
                threading.Thread(target=self._run, args=(done,), name="healthz-probe", daemon=True).start()
        if not done.wait(self.timeout):
            return "not answering", None
        return done.outcome

    def _run(self, done: threading.Event) -> None:
        outcome: tuple[str | None, BaseException | None] = (None, None)
        try:
            outcome = (self.probe(), None)
        except Exception as exc:
            outcome = (cause_of(exc) or "unreachable", exc)
        finally:
            done.outcome = outcome
            with self._lock:
                self._running = None
            done.set()
