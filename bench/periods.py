"""A year's analytics (GET /v1/customers/{ref}/emissions?from=&to=) for a customer with 1,000 and with
100,000 calculations over two years of activity dates, side by side.

Seeds a fresh database like bench/analytics.py (whose helpers it uses), but spreads the activity dates
over 2025 and 2026 with every mode and business context on most days, builds the rollups, day and
month rows included, with `recount.rebuild()` (checked by `recount.verify()`), starts
`emissions serve` and reads the year 2026, and one quarter starting mid-month, for both customers
over HTTP, taking turns on one keep-alive connection. Prints p50/p95/p99 and the ratio large/small
(goal: at most 1.5) and writes the results as JSON to bench/results/.

Usage: .venv/bin/python bench/periods.py [--small 1000] [--large 100000] [--requests 2000]
       [--database-url postgresql://...]
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sqlite3
import sys
import tempfile
from pathlib import Path

import analytics as bench  # bench/analytics.py: fresh_database, start_server, measure
from emissions import models
from emissions import db as db_setup
from emissions.models import Customer

GOAL_RATIO = 1.5
DAYS = 730  # 2025-01-01 .. 2026-12-31
FIRST_DAY = dt.date(2025, 1, 1)
READS = {"year": "from=2026-01-01&to=2026-12-31", "quarter": "from=2026-04-15&to=2026-07-14"}


def two_years(number: int) -> dt.date:
    """The number-th calculation's activity date: every mode and business context on most days."""
    return FIRST_DAY + dt.timedelta(days=number * 7919 % DAYS)


def seed(url: str, sizes: dict[str, int]) -> tuple[str, dict]:
    """bench/analytics.py's seed, its days spread over two years; with the period rows it built."""
    key, timings = bench.seed(url, sizes, activity_day=two_years)
    database = db_setup.bind(url)
    timings["period_rows"] = {reference: models.CustomerPeriodRollup.select().join(Customer).where(
        Customer.reference == reference).count() for reference in sizes}
    database.close()
    return key, timings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=1000)
    parser.add_argument("--large", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--database-url", help="a PostgreSQL server to use instead of a SQLite file")
    args = parser.parse_args()
    sizes = {"small-customer": args.small, "large-customer": args.large}
    with tempfile.TemporaryDirectory(prefix="bench-periods-") as directory:
        url, cleanup = bench.fresh_database(args.database_url, Path(directory))
        try:
            print(f"seeding {args.small:,} + {args.large:,} calculations ...", file=sys.stderr, flush=True)
            key, timings = seed(url, sizes)
            process, host, port = bench.start_server(url, Path(directory) / "server.log")
            try:
                latencies = bench.measure(host, port, key, {
                    f"{reference} {name}": f"/v1/customers/{reference}/emissions?{query}"
                    for name, query in READS.items() for reference in sizes}, args.requests, args.warmup)
            finally:
                process.terminate()
                process.wait(timeout=15)
        finally:
            cleanup()

    ratios = {name: round(latencies[f"large-customer {name}"]["p50_ms"] / latencies[f"small-customer {name}"]["p50_ms"], 3)
              for name in READS}
    result = {
        "benchmark": "period-analytics-read",
        "at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "database": "postgresql" if args.database_url else f"sqlite {sqlite3.sqlite_version}",
        "python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count(),
        "calculations": sizes, "reads": READS, "latency": latencies, "ratio_large_to_small_p50": ratios,
        "goal": f"p50 ratio <= {GOAL_RATIO}", "goal_met": all(ratio <= GOAL_RATIO for ratio in ratios.values()),
        **timings,
    }
    print(f"\nGET /v1/customers/{{ref}}/emissions?from=&to= over HTTP ({result['database']}, {args.requests} reads each)")
    print(f"{'read':<30}{'mean':>9}{'p50':>9}{'p95':>9}{'p99':>9}  (ms)")
    for name, values in latencies.items():
        print(f"{name:<30}{values['mean_ms']:>9.3f}{values['p50_ms']:>9.3f}{values['p95_ms']:>9.3f}{values['p99_ms']:>9.3f}")
    print(f"ratio large/small p50: {ratios} (goal <= {GOAL_RATIO}: {'met' if result['goal_met'] else 'NOT met'})")
    print(f"seed {timings['seed_seconds']} s; rebuild {timings['rebuild_seconds']} s; period rows {timings['period_rows']}")
    return bench.write_result("periods", result)


if __name__ == "__main__":
    sys.exit(main())
