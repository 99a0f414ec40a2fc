"""Analytics read latency for a customer with 1,000 and with 100,000 calculations, side by side.

Seeds a fresh database (SQLite file by default; --database-url postgresql://... uses a schema of its
own, dropped afterwards) with bulk-inserted calculations, builds their rollups with
`recount.rebuild()` (and checks them with `recount.verify()`), starts `emissions serve` on it
and reads GET /v1/customers/{ref}/emissions for both customers over HTTP, interleaved, on one
keep-alive connection. Prints p50/p95/p99 and the ratio large/small (goal: at most 1.5) and writes
the results as JSON to bench/results/. For contrast it also times recomputing each customer's
aggregates from its calculations, which is what a read would cost without the rollups.

Usage: .venv/bin/python bench/analytics.py [--small 1000] [--large 100000] [--requests 2000]
"""
from __future__ import annotations

import argparse
import datetime as dt
import http.client
import json
import os
import platform
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from emissions import auth  # noqa: E402
from emissions import calculations  # noqa: E402
from emissions.exports import json as views  # noqa: E402
from emissions.rollups import recount  # noqa: E402
from emissions import factors  # noqa: E402
from emissions import jsoncodec  # noqa: E402
from emissions import migrations  # noqa: E402
from emissions import models  # noqa: E402
from emissions.db import bind, open_database  # noqa: E402
from emissions.models import Calculation, Customer, Organization  # noqa: E402

RESULTS = HERE / "results"
GOAL_RATIO = 1.5
FACTORS = {"ROAD": Decimal("0.12522"), "SEA": Decimal("0.0161"), "AIR": Decimal("1.13")}


def fresh_database(url: str | None, directory: Path) -> tuple[str, callable]:
    """A database URL to seed, and how to clean it up afterwards."""
    if url is None:
        return f"sqlite:///{directory / 'bench-analytics.sqlite3'}", lambda: None
    if not url.startswith("postgres"):
        sys.exit("bench: --database-url must be a postgresql:// URL (SQLite is the default)")
    schema = f"bench_analytics_{os.getpid()}"
    admin = open_database(url)
    admin.connect()
    admin.execute_sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    admin.execute_sql(f"CREATE SCHEMA {schema}")
    admin.close()

    def drop():
        admin.connect(reuse_if_open=True)
        admin.execute_sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        admin.close()

    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}", drop


def seed(url: str, sizes: dict[str, int], activity_day=None) -> tuple[str, dict]:
    """Organization, factors, customers and bulk-inserted calculations (the number-th of each customer
    on activity_day(number)); returns a key and timings."""
    database = bind(url)
    migrations.run(database)
    org = Organization.create(slug="bench", name="Bench")
    factor_rows = {mode: factors.create(f"bench-{mode.lower()}", mode, value, f"Bench {mode}", "bench",
                                        valid_from=dt.date(2024, 1, 1), actor="bench")
                   for mode, value in FACTORS.items()}
    _, key = auth.create_key(org, "test", list(models.SCOPES), auth.instance_secret(os.environ.get("SECRET_KEY")),
                             name="bench")
    timings = {}
    started = time.perf_counter()
    for reference, count in sizes.items():
        customer = Customer.create(organization=org, environment="test", reference=reference, name=reference)
        insert_calculations(org, customer, factor_rows, count, activity_day=activity_day or spread_over_540_days)
    timings["seed_seconds"] = round(time.perf_counter() - started, 2)

    started = time.perf_counter()
    rebuilt = recount.rebuild()
    timings["rebuild_seconds"] = round(time.perf_counter() - started, 2)
    timings["rebuild_calculations_per_second"] = round(rebuilt.calculations / timings["rebuild_seconds"])
    started = time.perf_counter()
    verified = recount.verify()
    timings["verify_seconds"] = round(time.perf_counter() - started, 2)
    if verified.drifted or verified.calculations != sum(sizes.values()):
        sys.exit("bench: the rollups do not match the seeded calculations")

    for reference in sizes:  # what a read would cost if it summed the calculations instead
        customer = Customer.get(Customer.reference == reference)
        started = time.perf_counter()
        recount.expected_rollups(customer.id)
        timings[f"recompute_ms_{reference}"] = round((time.perf_counter() - started) * 1000, 1)
    database.close()
    return key, timings


def spread_over_540_days(number: int) -> dt.date:
    return dt.date(2025, 1, 1) + dt.timedelta(days=number % 540)


def insert_calculations(org, customer, factor_rows: dict, count: int, chunk: int = 1000,
                        activity_day=spread_over_540_days) -> None:
    """Calculations as calculate() stores them, written in bulk (the rollups come from rebuild); the
    number-th on activity_day(number)."""
    modes = list(FACTORS)
    now = models.utcnow()
    for start in range(0, count, chunk):
        rows = []
        for number in range(start, min(start + chunk, count)):
            mode = modes[number % 3]
            context = ("upstream", "downstream")[number // 3 % 2]
            cargo = Decimal(1 + number % 40) + Decimal(number % 997) / 1000
            distance = Decimal(50 + number % 900) + Decimal(number % 13) / 10
            activity, emissions = calculations.compute(cargo, distance, FACTORS[mode])
            activity_date = activity_day(number)
            calculation_id = models.new_id()
            body = jsoncodec.dumps({
                "id": calculation_id, "external_reference": f"{customer.reference}-{number}",
                "status": "succeeded", "environment": "test", "customer": {"reference": customer.reference},
                "mode": mode, "activity_date": activity_date.isoformat(),
                "origin": {"code": "GBLON"}, "destination": {"code": "GBMNC"},
                "cargo": {"value": cargo, "unit": "tonne"}, "distance": {"value": distance, "unit": "km"},
                "activity": {"value": activity, "unit": "tkm"}, "emissions": {"value": emissions, "unit": "kgCO2e"},
                "methodology": {"standard": "ISO 14083:2023", "boundary": "WTW", "business_context": context,
                                "scope3_category": views.SCOPE3_CATEGORY[context]},
                "factor": factor_rows[mode].lineage(), "created_at": models.isoformat(now),
            })
            rows.append({
                "id": calculation_id, "organization": org.id, "environment": "test", "customer": customer.id,
                "external_reference": f"{customer.reference}-{number}",
                "idempotency_key": f"{customer.reference}-{number}", "fingerprint": "0" * 32, "mode": mode,
                "business_context": context, "activity_date": activity_date, "cargo_tonnes": cargo,
                "distance_km": distance, "activity_tkm": activity, "emissions_kg": emissions,
                "factor": factor_rows[mode].id, "factor_version": factor_rows[mode].version,
                "factor_value": FACTORS[mode], "body": body, "created_at": now,
            })
        with models.db.atomic():
            Calculation.insert_many(rows).execute()


def start_server(url: str, log_path: Path) -> tuple[subprocess.Popen, str, int]:
    env = {**os.environ, "DATABASE_URL": url, "RATE_LIMIT_PER_SECOND": "0", "LOG_REQUESTS": "false"}
    process = subprocess.Popen([str(Path(sys.executable).parent / "emissions"), "serve", "--port", "0"],
                               env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=open(log_path, "wb"))
    line = process.stdout.readline().decode()
    match = re.search(r"Serving on http://([^:]+):(\d+)", line)
    if not match:
        process.kill()
        sys.exit(f"bench: emissions serve did not start: {line!r}; see {log_path}")
    return process, match.group(1), int(match.group(2))


def measure(host: str, port: int, key: str, paths: dict[str, str], requests: int, warmup: int) -> dict:
    """Latency in ms per path, taking turns (ABBA order) on one keep-alive connection."""
    connection = http.client.HTTPConnection(host, port, timeout=30)
    headers = {"Authorization": f"Bearer {key}"}
    samples: dict[str, list[float]] = {name: [] for name in paths}
    names = list(paths)
    for round_number in range(warmup + requests):
        order = names if round_number % 2 == 0 else names[::-1]
        for name in order:
            elapsed = timed(connection, "GET", paths[name], headers)
            if round_number >= warmup:
                samples[name].append(elapsed)
    connection.close()
    return {name: summary(values) for name, values in samples.items()}


def timed(connection, method: str, path: str, headers: dict, body: str | None = None, expected: int = 200) -> float:
    """One request on the keep-alive connection, in milliseconds; any other status than expected ends the bench."""
    started = time.perf_counter_ns()
    connection.request(method, path, body=body, headers=headers)
    response = connection.getresponse()
    answer = response.read()
    elapsed = (time.perf_counter_ns() - started) / 1e6
    if response.status != expected:
        sys.exit(f"bench: {method} {path} answered {response.status}: {answer[:300]!r}")
    return elapsed


def summary(values: list[float]) -> dict:
    ordered = sorted(values)

    def percentile(p: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))], 3)

    return {"requests": len(values), "mean_ms": round(statistics.fmean(values), 3), "p50_ms": percentile(50),
            "p95_ms": percentile(95), "p99_ms": percentile(99), "min_ms": round(ordered[0], 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=1000, help="calculations of the small customer")
    parser.add_argument("--large", type=int, default=100_000, help="calculations of the large customer")
    parser.add_argument("--requests", type=int, default=2000, help="measured reads per customer")
    parser.add_argument("--warmup", type=int, default=200, help="unmeasured reads per customer first")
    parser.add_argument("--database-url", help="a PostgreSQL server to use instead of a SQLite file")
    args = parser.parse_args()
    sizes = {"small-customer": args.small, "large-customer": args.large}

    with tempfile.TemporaryDirectory(prefix="bench-analytics-") as directory:
        url, cleanup = fresh_database(args.database_url, Path(directory))
        try:
            print(f"seeding {args.small:,} + {args.large:,} calculations ...", file=sys.stderr, flush=True)
            key, timings = seed(url, sizes)
            process, host, port = start_server(url, Path(directory) / "server.log")
            try:
                latencies = measure(host, port, key, {
                    "small-customer": "/v1/customers/small-customer/emissions",
                    "large-customer": "/v1/customers/large-customer/emissions",
                    "small-customer-no-analytics": "/v1/customers/small-customer",
                }, args.requests, args.warmup)
            finally:
                process.terminate()
                process.wait(timeout=15)
        finally:
            cleanup()

    small, large = latencies["small-customer"], latencies["large-customer"]
    ratios = {"p50": round(large["p50_ms"] / small["p50_ms"], 3),
              "mean": round(large["mean_ms"] / small["mean_ms"], 3),
              "p99": round(large["p99_ms"] / small["p99_ms"], 3)}
    result = {
        "benchmark": "analytics-read",
        "at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "database": "postgresql" if args.database_url else f"sqlite {sqlite3.sqlite_version}",
        "python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count(),
        "calculations": sizes, "latency": latencies, "ratio_large_to_small": ratios,
        "goal": f"p50 ratio <= {GOAL_RATIO}", "goal_met": ratios["p50"] <= GOAL_RATIO, **timings,
    }

    print(f"\nGET /v1/customers/{{ref}}/emissions over HTTP ({result['database']}, {args.requests} reads each)")
    print(f"{'customer':<30}{'calculations':>13}{'mean':>9}{'p50':>9}{'p95':>9}{'p99':>9}  (ms)")
    for name, values in latencies.items():
        count = sizes.get(name, sizes["small-customer"])
        print(f"{name:<30}{count:>13,}{values['mean_ms']:>9.3f}{values['p50_ms']:>9.3f}"
              f"{values['p95_ms']:>9.3f}{values['p99_ms']:>9.3f}")
    print(f"ratio large/small: p50 {ratios['p50']}, mean {ratios['mean']}, p99 {ratios['p99']} "
          f"(goal: p50 <= {GOAL_RATIO}: {'met' if result['goal_met'] else 'NOT met'})")
    print(f"seed {timings['seed_seconds']} s; rebuild {timings['rebuild_seconds']} s "
          f"({timings['rebuild_calculations_per_second']:,} calculations/s); verify {timings['verify_seconds']} s")
    print(f"recomputing from calculations instead of the rollups: {timings['recompute_ms_small-customer']} ms "
          f"(small) vs {timings['recompute_ms_large-customer']} ms (large)")

    return write_result("analytics", result)


def write_result(name: str, result: dict) -> int:
    """Write the result to bench/results/NAME-<time>.json, say where, and answer the exit status of its goal."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}-{dt.datetime.now():%Y%m%d-%H%M%S}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written to {path.relative_to(ROOT)}")
    return 0 if result["goal_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
