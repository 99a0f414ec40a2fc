"""Throughput (a token bucket per API key) and contract capacity (billable calculations a month)."""
from __future__ import annotations

import calendar
import datetime as dt
import math
import threading
import time

from .errors import LimitReached
from .models import Organization, UsageCounter, utcnow


class TokenBucket:
    """`rate` tokens a second up to `burst`; one request takes one token."""

    __slots__ = ("tokens", "updated")

    def __init__(self, burst: float, now: float):
        self.tokens = burst
        self.updated = now


class RateLimiter:
    """Per-key token buckets held in this process (docs/operations.md, "Limits")."""

    # Elapsed time and refills are float arithmetic ((0.3 + 2) - 0.3 is 1.9999999999999998);
    # without this slack a client that waited the whole Retry-After could be refused once more.
    EPSILON = 1e-9

    def __init__(self, rate: float, burst: int, clock=time.monotonic):
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self._buckets: dict[str, TokenBucket] = {}
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        """Off when either the rate or the burst is 0."""
        return self.rate > 0 and self.burst > 0

    def check(self, key_id: str) -> None:
        """Take a token for this key or raise RATE_LIMITED with a truthful Retry-After."""
        if not self.enabled:
            return
        with self._lock:
            now = self.clock()
            bucket = self._buckets.get(key_id)
            if bucket is None:
                bucket = self._buckets[key_id] = TokenBucket(self.burst, now)
            elapsed = max(0.0, now - bucket.updated)
            bucket.tokens = min(self.burst, bucket.tokens + elapsed * self.rate)
            bucket.updated = now
            if bucket.tokens >= 1 - self.EPSILON:
                bucket.tokens = max(0.0, bucket.tokens - 1)
                return
            # Whole seconds after which the bucket holds one token again; at least 1.
            wait = max(1, math.ceil((1 - bucket.tokens) / self.rate))
        raise LimitReached(f"Too many requests for this API key; retry after {wait} "
                           f"second{'' if wait == 1 else 's'}.", retry_after=wait)


def period_of(moment: dt.date) -> str:
    """The calendar month of a date or UTC moment, "2026-11": a billing period, or an activity month.
    Four digits for every year (strftime writes 999 as "999"), without parsing a format."""
    return f"{moment.year:04d}-{moment.month:02d}"


def current_period() -> str:
    return period_of(utcnow())


def seconds_to_next_month(moment: dt.datetime) -> int:
    """Whole seconds from `moment` until the first instant of the next UTC month."""
    days = calendar.monthrange(moment.year, moment.month)[1]
    start_next = (moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
                  + dt.timedelta(days=days))
    return max(1, math.ceil((start_next - moment).total_seconds()))


def capacity_for(organization: Organization, environment: str, test_default: int) -> int | None:
    """The organization's monthly capacity in an environment; None is unlimited."""
    if environment == "live":
        return organization.live_capacity
    return organization.test_capacity if organization.test_capacity is not None else test_default


def capacity_used_up(now: dt.datetime):
    """Raise USAGE_LIMIT_REACHED, retrying when the next month begins."""
    raise LimitReached("The organization's contract capacity for this month is used up.",
                       code="USAGE_LIMIT_REACHED", retry_after=seconds_to_next_month(now))


class CapacityUsedUp(Exception):
    """The organization's capacity for the month is used up: the calculation was not written."""


# The capacity (NULL is unlimited) is read inside the statement, and the counter row is created or
# incremented only while below it: no row changed means the capacity is used up. By hand, with the
# columns from the models: on_conflict(update=..., where=...) would say it, compiled on every calculation.
def _consume(capacity: str) -> str:
    table, count = UsageCounter._meta.table_name, f'"{UsageCounter.count.column_name}"'
    key = ", ".join(f'"{column.column_name}"' for column in (UsageCounter.organization, UsageCounter.environment,
                                                              UsageCounter.period))
    return (f"INSERT INTO {table} ({key}, {count}) SELECT ?, ?, ?, 1 WHERE COALESCE({capacity} > 0, TRUE)"
            f" ON CONFLICT ({key}) DO UPDATE SET {count} = {table}.{count} + 1"
            f" WHERE COALESCE({table}.{count} < {capacity}, TRUE)")


_ORGANIZATION = f"FROM {Organization._meta.table_name} WHERE id = ?"
CONSUME_LIVE = _consume(f"(SELECT {Organization.live_capacity.column_name} {_ORGANIZATION})")
CONSUME_TEST = _consume(f"(SELECT COALESCE({Organization.test_capacity.column_name}, ?) {_ORGANIZATION})")


def consume(organization_id: int, environment: str, test_capacity: int, period: str) -> tuple[str, tuple]:
    """The statement counting one billable calculation, and its parameters; it changes one row, or
    none when the capacity is used up. `test_capacity` is the sandbox default."""
    if environment == "live":
        text, capacity_params = CONSUME_LIVE, (organization_id,)
    else:
        text, capacity_params = CONSUME_TEST, (test_capacity, organization_id)
    return text, (organization_id, environment, period, *capacity_params, *capacity_params)


def usage(organization: Organization, period: str) -> dict[str, int]:
    """Billable calculations per environment in a period."""
    rows = UsageCounter.select().where((UsageCounter.organization == organization.id)
                                       & (UsageCounter.period == period))
    counts = {"test": 0, "live": 0}
    for row in rows:
        counts[row.environment] = row.count
    return counts
