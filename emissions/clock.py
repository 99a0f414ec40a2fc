"""The service's one clock: every record, page and command reads the time here, and tests set it.

Reading the time in one place is what lets a test (or an operator's dry run) pin "today" without
touching the machine's clock: a page's default period, a statement's date and a record's
`created_at` then all agree.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_fixed: dt.datetime | None = None


def now() -> dt.datetime:
    """The current time in UTC, without microseconds below the millisecond (or the time a test set)."""
    fixed = _fixed
    if fixed is not None:
        return fixed
    current = dt.datetime.now(dt.timezone.utc)
    return current.replace(microsecond=current.microsecond // 1000 * 1000)


def today() -> dt.date:
    """Today's date in UTC, by the same clock."""
    return now().date()


def set_to(moment: dt.datetime | dt.date | str | None) -> None:
    """Pin the clock at a moment (a date is its midnight UTC); None lets it run with the machine again."""
    global _fixed
    with _lock:
        _fixed = None if moment is None else _moment(moment)


@contextlib.contextmanager
def fixed_at(moment: dt.datetime | dt.date | str) -> Iterator[dt.datetime]:
    """Within the block the clock reads `moment`; afterwards it reads what it read before."""
    before = _fixed
    set_to(moment)
    try:
        yield _fixed
    finally:
        set_to(before)


def _moment(moment: dt.datetime | dt.date | str) -> dt.datetime:
    if isinstance(moment, str):
        moment = dt.datetime.fromisoformat(moment.replace("Z", "+00:00")) if "T" in moment \
            else dt.date.fromisoformat(moment)
    if not isinstance(moment, dt.datetime):
        moment = dt.datetime(moment.year, moment.month, moment.day, tzinfo=dt.timezone.utc)
    if moment.tzinfo is None:
        raise ValueError("a fixed clock needs a timezone-aware time")
    return moment.astimezone(dt.timezone.utc)
