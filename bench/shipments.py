"""3-element shipments per second beside single calculations, over HTTP on one keep-alive connection.

Seeds a fresh SQLite file (the DESNZ library, a HUB factor, a customer, a key), starts `emissions
serve` on it and POSTs, taking turns (ABBA order), a new calculation (ROAD, 12.5 t x 320 km) and a
new 3-element shipment (a ROAD leg, a SEA leg between two ports whose sea route the service works
out, a container terminal). Prints requests per second and p50/p99 of each, and the ratio of their
p50 (goal: a shipment at most 2x a calculation); writes the results as JSON to bench/results/.
The first shipment loads the sea network and the lane's route (kept per lane); it is in the warm-up.

Usage: .venv/bin/python bench/shipments.py [--requests 500] [--warmup 50]
"""
from __future__ import annotations

import argparse
import datetime as dt
import http.client
import json
import os
import platform
import sqlite3
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from analytics import start_server, summary, timed, write_result  # noqa: E402
from emissions import auth, factor_files, factors, migrations, models  # noqa: E402
from emissions import db as db_setup  # noqa: E402
from emissions.models import Customer, Organization  # noqa: E402

GOAL_RATIO = 2.0
CALCULATION = {
    "customer_reference": "bench-customer", "external_reference": "calc", "mode": "ROAD",
    "origin": {"code": "GBLON"}, "destination": {"code": "GBMNC"}, "cargo": {"value": 12.5, "unit": "tonne"},
    "distance": {"value": 320, "unit": "km"}, "activity_date": "2026-03-01",
    "factor_reference": "desnz-2025-road-hgv-diesel-average-laden",
}
SHIPMENT = {
    "customer_reference": "bench-customer", "external_reference": "ship", "activity_date": "2026-03-01",
    "cargo": {"value": 2, "unit": "TEU"},
    "elements": [
        {"type": "leg", "mode": "ROAD", "origin": {"label": "Factory"}, "destination": {"locode": "CNSHA"},
         "distance": {"value": 48.5, "unit": "km"}},
        {"type": "leg", "mode": "SEA", "origin": {"locode": "CNSHA"}, "destination": {"locode": "GBFXT"}},
        {"type": "hub", "hub_type": "container_terminal", "factor_reference": "bench-terminal"},
    ],
}


def seed(url: str) -> str:
    """The library, a HUB factor, a customer and an organization without a capacity limit; returns a key."""
    database = db_setup.bind(url)
    migrations.run(database)
    factor_files.load_library(actor="bench")
    factors.create("bench-terminal", "HUB", None, "Bench terminal", "bench", ttw_value="0.95", wtt_value="0.35",
                   valid_from=dt.date(2024, 1, 1), hub_type="container_terminal", actor="bench")
    org = Organization.create(slug="bench", name="Bench", test_capacity=10**9)
    Customer.create(organization=org, environment="test", reference="bench-customer", name="Bench customer")
    _, key = auth.create_key(org, "test", list(models.SCOPES), auth.instance_secret(os.environ.get("SECRET_KEY")),
                             name="bench")
    database.close()
    return key


def measure(host: str, port: int, key: str, requests: int, warmup: int) -> dict:
    """Latency in ms of new calculations and new shipments, taking turns on one keep-alive connection."""
    connection = http.client.HTTPConnection(host, port, timeout=60)
    bodies = {"calculation": ("/v1/emissions/logistics", json.dumps(CALCULATION)),
              "shipment": ("/v1/shipments", json.dumps(SHIPMENT))}
    samples: dict[str, list[float]] = {name: [] for name in bodies}
    names = list(bodies)
    for round_number in range(warmup + requests):
        for name in (names if round_number % 2 == 0 else names[::-1]):
            path, body = bodies[name]
            headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json",
                       "Idempotency-Key": f"{name}-{round_number}"}
            elapsed = timed(connection, "POST", path, headers, body, expected=201)
            if round_number >= warmup:
                samples[name].append(elapsed)
    connection.close()
    return {name: summary(values) for name, values in samples.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500, help="measured requests of each kind")
    parser.add_argument("--warmup", type=int, default=50, help="unmeasured requests of each kind first")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-shipments-") as directory:
        url = f"sqlite:///{Path(directory) / 'bench-shipments.sqlite3'}"
        key = seed(url)
        process, host, port = start_server(url, Path(directory) / "server.log")
        try:
            latencies = measure(host, port, key, args.requests, args.warmup)
        finally:
            process.terminate()
            process.wait(timeout=15)
    calculation, shipment = latencies["calculation"], latencies["shipment"]
    ratio = round(shipment["p50_ms"] / calculation["p50_ms"], 3)
    result = {
        "benchmark": "shipments",
        "at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "database": f"sqlite {sqlite3.sqlite_version}", "python": platform.python_version(),
        "machine": platform.machine(), "cpus": os.cpu_count(), "latency": latencies,
        "per_second": {name: round(1000 / values["mean_ms"], 1) for name, values in latencies.items()},
        "ratio_shipment_to_calculation_p50": ratio, "goal": f"p50 ratio <= {GOAL_RATIO}",
        "goal_met": ratio <= GOAL_RATIO,
    }
    print(f"POST over HTTP, one connection, sequential ({result['database']}, {args.requests} of each)")
    print(f"{'request':<14}{'per second':>12}{'mean':>9}{'p50':>9}{'p99':>9}  (ms)")
    for name, values in latencies.items():
        print(f"{name:<14}{result['per_second'][name]:>12}{values['mean_ms']:>9.3f}{values['p50_ms']:>9.3f}"
              f"{values['p99_ms']:>9.3f}")
    print(f"3-element shipment / calculation, p50: {ratio} (goal <= {GOAL_RATIO}: "
          f"{'met' if result['goal_met'] else 'NOT met'})")
    return write_result("shipments", result)


if __name__ == "__main__":
    sys.exit(main())
