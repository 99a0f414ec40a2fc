"""The outbox and storage at two sizes side by side: SQLite databases of 10,000 and N calculations
(default 2,000,000), written the way the service writes them (POST /v1/emissions/logistics through
the app in this process, 1,000 customers, activity dates over two years), a sample checked by
replaying it through the API (same key, same bytes back).

Measured on each (in this process, the app called through WSGI without a socket):
- fresh POST rate with none due, and with 100,000 events due for a receiver that is down while a
  delivery worker (another process, `Deliverer.run_forever`) keeps claiming them;
- one claim's time (32 deliveries) with 100 due and with 100,000 due;
- the idle check (a claim that finds nothing) with 100,000 pending and no enabled endpoint;
- `webhook deliveries` (newest 20, and --org), `redeliver --since` (the last minute) and `prune`
  with nothing to delete (the daily job of `serve`);
- fresh POST p50/p99 under sustained writes (the WAL checkpointer runs throughout, as in `serve`);
- bytes per calculation: the file's used pages (dbstat) over the calculations, by table.

Usage: .venv/bin/python bench/scale.py [--small 10000] [--large 2000000] [--posts 2000]
Not part of the test suite: minutes at --large 200000, most of an hour at the default.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import multiprocessing
import os
import platform
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

from webtest import TestApp

from emissions import auth, factors, models, store
from emissions.app import create_app
from emissions.config import Config
from emissions.db import WalCheckpointer, db
from emissions.webhooks import delivery as webhook_delivery
from emissions.webhooks import endpoints as webhook_endpoints
from emissions.webhooks import events as webhook_events

CUSTOMERS = 1000
DAYS = 730
FIRST_DAY = dt.date(2025, 1, 1)
DUE = 100_000
DOWN_URL = "http://127.0.0.1:9/hook"  # the discard port: connection refused, a receiver that is down
MODES = {"ROAD": "0.12522", "SEA": "0.01600", "AIR": "0.60200"}


def body(number: int) -> dict:
    mode = list(MODES)[number % 3]
    return {"customer_reference": f"customer-{number % CUSTOMERS}", "external_reference": f"shipment-{number}",
            "mode": mode, "origin": {"code": "GBLON", "country": "GB"}, "destination": {"label": "Manchester"},
            "cargo": {"value": 1 + number % 40, "unit": "tonne"}, "distance": {"value": 50 + number % 900, "unit": "km"},
            "activity_date": (FIRST_DAY + dt.timedelta(days=number * 7919 % DAYS)).isoformat(),
            "factor_reference": f"bench-{mode.lower()}"}


def headers(key: str, idempotency_key: str) -> dict:
    return {"Authorization": f"Bearer {key}", "Idempotency-Key": idempotency_key}


def build(path: Path, count: int) -> tuple[TestApp, str, dict, WalCheckpointer]:
    """The database of `count` calculations, written by POSTs; returns the app, the key, timings and
    the WAL checkpointer, running as in `serve` (the caller stops it)."""
    config = Config(database_url=f"sqlite:///{path}", test_capacity=10**9, rate_limit_per_second=10.0**9,
                    rate_limit_burst=10**9)
    client = TestApp(create_app(config))
    org = models.Organization.create(slug="bench", name="Bench", created_at=models.utcnow())
    for mode, value in MODES.items():
        factors.create(f"bench-{mode.lower()}", mode, value, f"Bench {mode}", "bench",
                       valid_from=dt.date(2024, 1, 1), actor="bench")
    for number in range(CUSTOMERS):
        models.Customer.create(organization=org, environment="test", reference=f"customer-{number}",
                               name=f"Customer {number}")
    _, key = auth.create_key(org, "test", list(models.SCOPES), auth.instance_secret(os.environ.get("SECRET_KEY")),
                             name="bench")
    checkpointer = WalCheckpointer(db.obj).start()
    started = time.perf_counter()
    for number in range(count):
        client.post_json("/v1/emissions/logistics", body(number), headers=headers(key, f"build-{number}"), status=201)
    seconds = time.perf_counter() - started
    # A sample replayed through the API: the same key answers the stored calculation, byte for byte.
    for number in random.Random(1).sample(range(count), min(count, 200)):
        replay = client.post_json("/v1/emissions/logistics", body(number), headers=headers(key, f"build-{number}"),
                                  status=200)
        stored = client.get(f"/v1/calculations/{replay.json['id']}", headers=headers(key, "get"))
        assert replay.body == stored.body, number
    return client, key, {"build_posts_per_second": round(count / seconds)}, checkpointer


def bytes_per_calculation(path: Path, count: int) -> dict:
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    rows = connection.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall()
    connection.close()
    by_name = dict(rows)
    tables = {"calculation": 0, "webhook_event": 0}
    for name, size in by_name.items():
        for table in tables:
            if name == table or name.startswith(f"{table}_") or name == f"sqlite_autoindex_{table}_1":
                tables[table] += size
    return {"bytes_per_calculation": round(sum(by_name.values()) / count),
            "calculation_bytes": round(tables["calculation"] / count),
            "webhook_event_bytes": round(tables["webhook_event"] / count)}


def post_rate(client: TestApp, key: str, tag: str, posts: int) -> tuple[float, list[float]]:
    latencies = []
    started = time.perf_counter()
    for number in range(posts):
        begun = time.perf_counter()
        client.post_json("/v1/emissions/logistics", body(number), headers=headers(key, f"{tag}-{number}"), status=201)
        latencies.append(time.perf_counter() - begun)
    return posts / (time.perf_counter() - started), latencies


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def timed(action, repeat: int = 5) -> float:
    """The median time of `action()` in milliseconds."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    return round(sorted(times)[len(times) // 2], 2)


def deliver_forever(database_url: str) -> None:
    """A delivery worker in its own process, as `serve` runs one."""
    # Loopback allowed, so that each attempt really connects to the receiver that is down.
    config = Config(database_url=database_url, webhook_poll_seconds=0.05, webhook_allow_private_test=True)
    db_binding = __import__("emissions.db", fromlist=["bind"])
    db_binding.bind(database_url)
    webhook_delivery.Deliverer(config).run_forever(0.05)


def queue_due(organization_id: int, count: int) -> None:
    """`count` events due now for the organization's endpoint, written by the service's own statement."""
    for start in range(0, count, 1000):
        with db.atomic():
            for _ in range(start, min(start + 1000, count)):
                store.insert_event(webhook_events.new_event(organization_id, "test", "calculation.failed", '{"n":1}'))


def measure(path: Path, client: TestApp, key: str, count: int, posts: int) -> dict:
    result = bytes_per_calculation(path, count)
    config = Config(database_url=f"sqlite:///{path}")
    worker = webhook_delivery.Deliverer(config)
    org = models.Organization.get(models.Organization.slug == "bench")
    result["fresh_posts_per_second_none_due"] = round(post_rate(client, key, "none-due", posts)[0])

    down = models.Organization.create(slug="down", name="Down", created_at=models.utcnow())
    webhook_endpoints.set_endpoint(down.id, "test", DOWN_URL, actor="bench", allow_private_test=True)
    queue_due(down.id, 100)
    result["claim_ms_100_due"] = timed(lambda: worker._due_ids(models.utcnow(), 32))
    queue_due(down.id, DUE - 100)
    result["claim_ms_100000_due"] = timed(lambda: worker._due_ids(models.utcnow(), 32))
    result["claim_and_lease_ms_100000_due"] = timed(lambda: worker.claim(32))  # each leases 32 more

    delivering = multiprocessing.get_context("spawn").Process(target=deliver_forever, args=(config.database_url,))
    delivering.start()
    time.sleep(1.0)
    result["fresh_posts_per_second_100000_due"] = round(post_rate(client, key, "due", posts)[0])
    delivering.terminate()
    delivering.join()

    models.WebhookEndpoint.update(status="disabled").where(models.WebhookEndpoint.organization == down.id).execute()
    result["idle_check_ms_100000_pending_no_endpoint"] = timed(lambda: worker.claim(32))

    result["webhook_deliveries_ms"] = timed(lambda: webhook_events.recent_deliveries(None, None, 20))
    result["webhook_deliveries_org_ms"] = timed(lambda: webhook_events.recent_deliveries(org.id, None, 20))
    since = models.utcnow() - dt.timedelta(minutes=1)
    result["redeliver_since_ms"] = timed(lambda: webhook_events.redeliver_since(since, ("failed", "skipped")), 3)
    result["prune_nothing_to_delete_ms"] = timed(lambda: webhook_events.prune(dt.timedelta(days=30)), 3)

    _, latencies = post_rate(client, key, "tail", posts)
    result["fresh_post_p50_ms"] = round(percentile(latencies, 0.50) * 1000, 2)
    result["fresh_post_p99_ms"] = round(percentile(latencies, 0.99) * 1000, 2)
    worker.close()
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=2_000_000)
    parser.add_argument("--posts", type=int, default=2000)
    parser.add_argument("--directory", type=Path, default=None, help="where to keep the databases (default: a temporary one)")
    args = parser.parse_args()
    directory = args.directory or Path(tempfile.mkdtemp(prefix="bench-scale-"))
    results = {}
    for name, count in (("small", args.small), ("large", args.large)):
        path = directory / f"scale-{count}.sqlite3"
        client, key, timings, checkpointer = build(path, count)
        results[name] = {"calculations": count, **timings, **measure(path, client, key, count, args.posts)}
        checkpointer.stop()
        db.close()
        print(json.dumps({name: results[name]}), flush=True)
    report = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              "machine": {"python": platform.python_version(), "sqlite": sqlite3.sqlite_version,
                          "cpus": os.cpu_count(), "platform": platform.platform()},
              "results": results}
    print(json.dumps(report, indent=2))
    print("\n| measure | " + " | ".join(f"{results[n]['calculations']:,}" for n in results) + " | large/small |")
    print("|---|---|---|---|")
    for measure_name in results["small"]:
        small, large = results["small"][measure_name], results["large"][measure_name]
        ratio = f"{large / small:.2f}" if isinstance(small, (int, float)) and small else ""
        print(f"| {measure_name} | {small} | {large} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
