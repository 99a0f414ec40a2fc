"""A year's analytics (GET /v1/customers/{ref}/emissions?from=&to=) for a customer with 1,000 and with
100,000 calculations over two years of activity dates, side by side.

Seeds a fresh database like bench/analytics.py (whose helpers it uses), but spreads the activity dates
over 2025 and 2026 with every mode and business context on most days, builds the rollups, day and
month rows included, with `customer_analytics.rebuild()` (checked by `customer_analytics.verify()`), starts
`emissions serve` and reads the year 2026, and one quarter starting mid-month, for both customers
over HTTP, taking turns on one keep-alive connection. Prints p50/p95/p99 and the ratio large/small
(goal: at most 1.5) and writes the results as JSON to bench/results/.

Usage: .venv/bin/python bench/periods.py [--small 1000] [--large 100000] [--requests 2000]
       [--database-url postgresql://...]
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sqlite3
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

import analytics as bench  # bench/analytics.py: fresh_database, start_server, measure
from emissions import analytics as customer_analytics
from emissions import auth, calculations, customers, factors, jsoncodec, migrations, models
from emissions import db as db_setup
from emissions.models import Calculation, Customer, Organization

GOAL_RATIO = 1.5
DAYS = 730  # 2025-01-01 .. 2026-12-31
FIRST_DAY = dt.date(2025, 1, 1)
READS = {"year": "from=2026-01-01&to=2026-12-31", "quarter": "from=2026-04-15&to=2026-07-14"}


def insert_calculations(org, customer, factor_rows: dict, count: int, chunk: int = 1000) -> None:
    """Calculations as calculate() stores them, written in bulk, their days spread over two years."""
    now = models.utcnow()
    modes = list(bench.FACTORS)
    for start in range(0, count, chunk):
        rows = []
        for number in range(start, min(start + chunk, count)):
            mode, context = modes[number % 3], ("upstream", "downstream")[number // 3 % 2]
            cargo = Decimal(1 + number % 40) + Decimal(number % 997) / 1000
            distance = Decimal(50 + number % 900) + Decimal(number % 13) / 10
            activity, emissions = calculations.compute(cargo, distance, bench.FACTORS[mode])
            activity_date = FIRST_DAY + dt.timedelta(days=number * 7919 % DAYS)
            calculation_id = models.new_id()
            body = jsoncodec.dumps({
                "id": calculation_id, "external_reference": f"{customer.reference}-{number}",
                "status": "succeeded", "environment": "test", "customer": {"reference": customer.reference},
                "mode": mode, "activity_date": activity_date.isoformat(),
                "origin": {"code": "GBLON"}, "destination": {"code": "GBMNC"},
                "cargo": {"value": cargo, "unit": "tonne"}, "distance": {"value": distance, "unit": "km"},
                "activity": {"value": activity, "unit": "tkm"}, "emissions": {"value": emissions, "unit": "kgCO2e"},
                "methodology": {"standard": "ISO 14083:2023", "boundary": "WTW", "business_context": context,
                                "scope3_category": calculations.SCOPE3_CATEGORY[context]},
                "factor": factor_rows[mode].lineage(), "created_at": models.isoformat(now)})
            rows.append({
                "id": calculation_id, "organization": org.id, "environment": "test", "customer": customer.id,
                "external_reference": f"{customer.reference}-{number}",
                "idempotency_key": f"{customer.reference}-{number}", "fingerprint": "0" * 64, "mode": mode,
                "business_context": context, "activity_date": activity_date, "cargo_tonnes": cargo,
                "distance_km": distance, "activity_tkm": activity, "emissions_kg": emissions,
                "factor": factor_rows[mode].id, "factor_version": factor_rows[mode].version,
                "factor_value": bench.FACTORS[mode], "request_id": models.new_id(), "body": body,
                "created_at": now})
        with models.db.atomic():
            Calculation.insert_many(rows).execute()


def seed(url: str, sizes: dict[str, int]) -> tuple[str, dict]:
    database = db_setup.bind(url)
    migrations.run(database)
    org = Organization.create(slug="bench", name="Bench")
    factor_rows = {mode: factors.create(f"bench-{mode.lower()}", mode, value, f"Bench {mode}", "bench",
                                        valid_from=dt.date(2024, 1, 1))
                   for mode, value in bench.FACTORS.items()}
    _, key = auth.create_key(org, "test", list(models.SCOPES), auth.instance_secret(os.environ.get("SECRET_KEY")),
                             name="bench")
    timings = {}
    started = time.perf_counter()
    for reference, count in sizes.items():
        customer = Customer.create(organization=org, environment="test", reference=reference, name=reference)
        insert_calculations(org, customer, factor_rows, count)
    timings["seed_seconds"] = round(time.perf_counter() - started, 2)
    started = time.perf_counter()
    customer_analytics.rebuild()
    timings["rebuild_seconds"] = round(time.perf_counter() - started, 2)
    verified = customer_analytics.verify()
    if verified.drifted or verified.calculations != sum(sizes.values()):
        sys.exit("bench: the rollups do not match the seeded calculations")
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
    bench.RESULTS.mkdir(exist_ok=True)
    path = bench.RESULTS / f"periods-{dt.datetime.now():%Y%m%d-%H%M%S}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written to {path.relative_to(bench.ROOT)}")
    return 0 if result["goal_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
