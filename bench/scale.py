"""Flat at scale: two databases of 10,000 and N calculations (default 2,000,000) side by side, each
row of issue 24 measured on both with its large/small ratio and its bound.

The databases are written the way the service writes them: 1,000 customers, activity dates over
two years; the first calculations (--via-api) as POST /v1/emissions/logistics through the app in
this process, the rest through the route's own write path (the body parsed and validated as the
route does, then calculations.calculate, which writes the row, usage, rollups, period rollups and
the webhook event), a thousand to a transaction. A sample of both parts is replayed through the
API (same key, the same bytes back, equal to GET) and analytics.verify finds no drift.

On SQLite each built file is kept in --directory (scale-N.sqlite3) and reused when it holds its N
calculations; every run measures a copy of it, so a measure-only rerun skips the build.

Measured on each (in this process through WSGI unless said):
- fresh POST rate with none due (and its CPU time per POST), and with 100,000 events due for a receiver that is down while a
  delivery worker (another process) keeps claiming them; one claim with 100 and 100,000 due; the
  idle check with 100,000 pending and no enabled endpoint;
- `webhook deliveries` (newest 20, and --org), `redeliver --since` and `prune` with nothing to
  delete (the daily job of `serve`);
- fresh POST p50/p99 under sustained writes after a warm-up, the WAL checkpointer running as in `serve`;
- GET by random id (ids not yet asked, so the cache does not answer), customer analytics;
- the workspace pages of a signed-in user: overview, calculations list (page 1 and a filtered
  page), one calculation's page, webhooks page, a customer's page for a period, the CSV export's
  first byte;
- with `emissions serve` in a subprocess on the file: start-up (until /healthz answers, in wall-clock
  time and in the server's own CPU time), and an
  API GET sent while another connection's overview is being rendered;
- bytes per calculation (SQLite): the file's used pages (dbstat) over the calculations, by table.

With --postgres URL the same build and the pages and claim rows run on PostgreSQL instead (a schema
per size in that database, rebuilt each run; use sizes that fit minutes, e.g. 10,000 and 200,000).

Usage: .venv/bin/python bench/scale.py [--small 10000] [--large 2000000] [--directory DIR]
       .venv/bin/python bench/scale.py --postgres postgresql://... --small 10000 --large 200000
Not part of the test suite.
"""
from __future__ import annotations

import argparse
import datetime as dt
import http.client
import json
import multiprocessing
import os
import platform
import random
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import peewee as pw
from webtest import TestApp

from emissions import accounts, analytics, auth, calculations, factors, migrations, models, store
from emissions import app as api
from emissions.app import create_app
from emissions.config import Config
from emissions.db import bind, db, is_sqlite, open_database
from emissions.serving.wal_checkpoint import WalCheckpointer
from emissions.webhooks import delivery as webhook_delivery
from emissions.webhooks import endpoints as webhook_endpoints
from emissions.webhooks import events as webhook_events
from emissions.workspace import session
import run  # beside this file: the benchmarks' shared helpers

CUSTOMERS = 1000
DAYS = 730
FIRST_DAY = dt.date(2025, 1, 1)
DUE = 100_000
BATCH = 1000
DOWN_URL = "http://127.0.0.1:9/hook"  # the discard port: connection refused, a receiver that is down
MODES = {"ROAD": "0.12522", "SEA": "0.01600", "AIR": "0.60200"}
EMAIL, PASSWORD = "bench@bench.example", "bench password 1"
REMOTE = {"REMOTE_ADDR": "192.0.2.1"}


def body(number: int) -> dict:
    mode = list(MODES)[number % 3]
    return {"customer_reference": f"customer-{number % CUSTOMERS}", "external_reference": f"shipment-{number}",
            "mode": mode, "origin": {"code": "GBLON", "country": "GB"}, "destination": {"label": "Manchester"},
            "cargo": {"value": 1 + number % 40, "unit": "tonne"}, "distance": {"value": 50 + number % 900, "unit": "km"},
            "activity_date": (FIRST_DAY + dt.timedelta(days=number * 7919 % DAYS)).isoformat(),
            "factor_reference": f"bench-{mode.lower()}"}


def headers(key: str, idempotency_key: str) -> dict:
    return {"Authorization": f"Bearer {key}", "Idempotency-Key": idempotency_key}


def bench_config(database_url: str) -> Config:
    return Config(database_url=database_url, test_capacity=10**9, rate_limit_per_second=10.0**9,
                  rate_limit_burst=10**9)


def built_count(database_url: str) -> int:
    """How many calculations the build wrote into this database; 0 when it holds none, or when it
    was written before a migration of this checkout (the service would now write its rows otherwise)."""
    database = open_database(database_url)
    try:
        if migrations.pending(database):
            return 0
        return database.execute_sql("SELECT COUNT(*) FROM calculation WHERE idempotency_key LIKE 'build-%'"
                                    ).fetchone()[0]
    except (pw.DatabaseError, pw.OperationalError):
        return 0
    finally:
        database.close()


def seed() -> tuple[models.Organization, models.ApiKey, str]:
    org = models.Organization.create(slug="bench", name="Bench", created_at=models.utcnow())
    for mode, value in MODES.items():
        factors.create(f"bench-{mode.lower()}", mode, value, f"Bench {mode}", "bench",
                       valid_from=dt.date(2024, 1, 1), actor="bench")
    for number in range(CUSTOMERS):
        models.Customer.create(organization=org, environment="test", reference=f"customer-{number}",
                               name=f"Customer {number}")
    key_row, key = auth.create_key(org, "test", list(models.SCOPES), auth.instance_secret(os.environ.get("SECRET_KEY")),
                                   name="bench")
    accounts.create_user(org, EMAIL, PASSWORD, actor="bench")
    return org, key_row, key


_prepared: list = []
_principal: auth.Principal | None = None
_test_capacity = 0


def _capture(calculation, test_capacity, period, event) -> None:
    """store.write_calculation in a preparing process: keep its arguments for the writing one."""
    _prepared.append((calculation, test_capacity, period, event))


def _start_preparing(database_url: str, principal: auth.Principal, test_capacity: int) -> None:
    global _principal, _test_capacity
    bind(database_url)
    store.write_calculation = _capture
    _principal, _test_capacity = principal, test_capacity


def _prepare(numbers: range) -> list:
    """The route's work for each number without HTTP: the raw body parsed and validated as the route
    does, then calculations.calculate itself (its lookup reads the database), up to the write."""
    _prepared.clear()
    for number in numbers:
        payload = api.validate("LogisticsRequest", api.parse_json_object(json.dumps(body(number)).encode()))
        calculations.calculate(_principal, payload, f"build-{number}", test_capacity=_test_capacity)
    return list(_prepared)


def write_directly(database_url: str, principal: auth.Principal, numbers: range, test_capacity: int) -> None:
    """calculate() split in two: processes of their own run it up to its write (the CPU's share),
    this one runs the write it would run, store.write_calculation, `BATCH` to a transaction.

    On SQLite the preparing processes read a copy of the database as it is now (its customers and
    factors; no key of theirs is in it yet): readers that never stop would keep the built file's
    log from ever being checkpointed to its start, and it would grow by the whole build."""
    batches = [range(start, min(start + BATCH, numbers.stop)) for start in range(numbers.start, numbers.stop, BATCH)]
    reading = database_url
    if is_sqlite():
        source = Path(database_url.removeprefix("sqlite:///"))
        copy = source.with_name(source.name + ".preparing")
        with sqlite3.connect(source) as live, sqlite3.connect(copy) as target:
            live.backup(target)
        reading = f"sqlite:///{copy}"
    if is_sqlite():
        # The writing connection's page cache holds the indexes' pages the build keeps touching
        # (random ids land anywhere in them); what is written stays the same.
        db.execute_sql("PRAGMA cache_size = -2000000")
    context = multiprocessing.get_context("spawn")
    try:
        with context.Pool(max(1, os.cpu_count() or 1), _start_preparing, (reading, principal, test_capacity)) as pool:
            for prepared in pool.imap(_prepare, batches):
                with db.atomic():
                    for calculation, capacity, period, event in prepared:
                        store.write_calculation(calculation, capacity, period, event)
    finally:
        if reading != database_url:
            for path in copy.parent.glob(copy.name + "*"):
                path.unlink()


def build(database_url: str, count: int, via_api: int) -> dict:
    """Write `count` calculations; check a sample by replay and the rollups by analytics.verify."""
    config = bench_config(database_url)
    client = TestApp(create_app(config))
    org, key_row, key = seed()
    checkpointer = WalCheckpointer(db.obj).start() if is_sqlite() else None
    started = time.perf_counter()
    posted = min(count, via_api)
    for number in range(posted):
        client.post_json("/v1/emissions/logistics", body(number), headers=headers(key, f"build-{number}"), status=201)
    posted_seconds = time.perf_counter() - started
    principal = auth.Principal(key_id=key_row.id, organization_id=org.id, organization_slug=org.slug,
                               environment="test", scopes=frozenset(models.SCOPES), expires_at=None, revoked=False,
                               organization_active=True, entitled=True)
    started, cpu, children = time.perf_counter(), time.process_time(), resource.getrusage(resource.RUSAGE_CHILDREN)
    write_directly(database_url, principal, range(posted, count), config.test_capacity)
    direct_seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    preparing = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime
    if checkpointer is not None:
        checkpointer.stop()
    sample = random.Random(1)
    numbers = sample.sample(range(posted), min(posted, 100)) + sample.sample(range(posted, count), min(count - posted, 300))
    replayed = {}
    for number in numbers:
        replay = client.post_json("/v1/emissions/logistics", body(number), headers=headers(key, f"build-{number}"),
                                  status=200)
        stored = client.get(f"/v1/calculations/{replay.json['id']}", headers=headers(key, "get"))
        assert replay.body == stored.body, number
        assert replay.json["external_reference"] == f"shipment-{number}", number
        replayed[number] = replay.json
    verifying = time.perf_counter()
    check = analytics.verify(org.id, "test")
    verify_seconds = time.perf_counter() - verifying
    assert not check.drifted and check.calculations == count, (check.calculations, check.drifted[:3])
    # And each as a new POST of the same body would write it now: equal but for its id and moment.
    for number in numbers[-50:]:
        fresh = client.post_json("/v1/emissions/logistics", body(number), headers=headers(key, f"check-{number}"),
                                 status=201).json
        assert all(fresh[name] == value for name, value in replayed[number].items()
                   if name not in ("id", "created_at")), number
    if not is_sqlite():
        # The planner's statistics, as autovacuum would have them long before a real database grew
        # this large: right after a bulk load it still plans for the empty tables.
        db.execute_sql("ANALYZE")
    db.close()
    return {"build_seconds": round(posted_seconds + direct_seconds, 1),
            "build_posts_per_second": round(posted / posted_seconds) if posted else None,
            "build_direct_per_second": round((count - posted) / direct_seconds) if count > posted else None,
            # CPU time per calculation of the writing process and of the preparing ones: on an idle
            # machine the build's pace is about the larger of the first and their sum over the CPUs.
            "build_cpu_ms_writing": round(cpu * 1000 / (count - posted), 3) if count > posted else None,
            "build_cpu_ms_preparing": round(preparing * 1000 / (count - posted), 3) if count > posted else None,
            "replayed": len(numbers), "verify_seconds": round(verify_seconds, 1)}


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
        write = store.Write(organization_id, "test")
        for _ in range(start, min(start + 1000, count)):
            write.event(webhook_events.new_event(organization_id, "test", "calculation.failed", '{"n":1}'))
        write.commit()


def measure(client: TestApp, key: str, posts: int, database_url: str) -> dict:
    """The outbox and the operator commands, and the POST rate and tail."""
    result = {}
    config = Config(database_url=database_url)
    worker = webhook_delivery.Deliverer(config)
    org = models.Organization.get(models.Organization.slug == "bench")
    checkpointer = WalCheckpointer(db.obj).start() if is_sqlite() else None
    post_rate(client, key, "warm", posts // 4)
    cpu = time.process_time()
    result["fresh_posts_per_second_none_due"] = round(post_rate(client, key, "none-due", posts)[0])
    # This process's CPU time per POST (the checkpointer's thread included), which other work on a
    # shared machine does not inflate as it does the rate.
    result["fresh_post_cpu_ms_none_due"] = round((time.process_time() - cpu) / posts * 1000, 3)

    down = models.Organization.create(slug="down", name="Down", created_at=models.utcnow())
    webhook_endpoints.set_endpoint(down.id, "test", DOWN_URL, actor="bench", allow_private_test=True)
    queue_due(down.id, 100)
    result["claim_ms_100_due"] = timed(lambda: worker._due_ids(models.utcnow(), 32), 21)
    queue_due(down.id, DUE - 100)
    result["claim_ms_100000_due"] = timed(lambda: worker._due_ids(models.utcnow(), 32), 21)
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
    result["redeliver_since_ms"] = timed(lambda: webhook_events.redeliver_since(since, ("failed", "skipped")), 21)
    result["prune_nothing_to_delete_ms"] = timed(lambda: webhook_events.prune(dt.timedelta(days=30)), 21)

    # The tail: a warm-up, then three rounds of sustained writes; the p99 is their median.
    post_rate(client, key, "tail-warm", posts // 2)
    rounds = [post_rate(client, key, f"tail-{number}", posts)[1] for number in range(3)]
    result["fresh_post_p50_ms"] = round(sorted(percentile(r, 0.50) for r in rounds)[1] * 1000, 2)
    result["fresh_post_p99_ms"] = round(sorted(percentile(r, 0.99) for r in rounds)[1] * 1000, 2)
    if checkpointer is not None:
        checkpointer.stop()
    worker.close()
    return result


def build_ids(count: int, size: int) -> list[str]:
    """The ids of `size` calculations of the build, chosen at random."""
    chosen = [f"build-{n}" for n in random.Random(2).sample(range(count), min(count, size))]
    return [row[0] for row in store.run(
        f"SELECT id FROM calculation WHERE idempotency_key IN ({', '.join('?' for _ in chosen)})", tuple(chosen))]


YEAR_READS = 21


def full_years(client: TestApp, key: str) -> list[str]:
    """YEAR_READS customers whose 2025 is full, the same at every size: a calculation of each mode in
    each month, POSTed. A customer of the build has a full year only in a large database, and a
    year's answer grows with the months and modes in it (at most 12 x 3 rows), not with the database."""
    references = []
    org = models.Organization.get(models.Organization.slug == "bench")
    for number in range(YEAR_READS):
        reference = f"full-year-{number}"
        models.Customer.create(organization=org, environment="test", reference=reference, name=reference)
        for month in range(1, 13):
            for mode_number, mode in enumerate(MODES):
                calculation = {**body(mode_number), "customer_reference": reference,
                               "activity_date": dt.date(2025, month, 15).isoformat()}
                client.post_json("/v1/emissions/logistics", calculation,
                                 headers=headers(key, f"{reference}-{month}-{mode}"), status=201)
        references.append(reference)
    return references


def api_reads(client: TestApp, key: str, ids: list[str]) -> dict:
    """GET by random id (each id asked once: the cache never answers), GET of a customer, and a year
    of analytics of customers whose year is full (each asked once: no kept answer)."""
    reads = iter(ids)
    years = iter(full_years(client, key))
    auth_only = {"Authorization": f"Bearer {key}"}
    rng = random.Random(3)
    return {
        "get_by_random_id_ms": timed(lambda: client.get(f"/v1/calculations/{next(reads)}", headers=auth_only), 51),
        "get_customer_ms": timed(lambda: client.get(f"/v1/customers/customer-{rng.randrange(CUSTOMERS)}",
                                                          headers=auth_only), 21),
        "customer_emissions_year_ms": timed(lambda: client.get(
            f"/v1/customers/{next(years)}/emissions?from=2025-01-01&to=2025-12-31", headers=auth_only), YEAR_READS),
    }


def sign_in(client: TestApp) -> str:
    """The session cookie of the bench user, issued as a sign-in issues it (the form itself is not
    what is measured)."""
    user = models.User.get(models.User.email == EMAIL)
    token = accounts.Sessions(auth.instance_secret(os.environ.get("SECRET_KEY"))).issue(user)
    client.set_cookie(session.COOKIE, token)
    return f"{session.COOKIE}={token}"


def first_byte_ms(app, path: str, cookie: str) -> float:
    """Milliseconds until the app hands over the response's first non-empty chunk."""
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path.split("?")[0], "QUERY_STRING": path.partition("?")[2],
               "SERVER_NAME": "localhost", "SERVER_PORT": "80", "wsgi.url_scheme": "http", "HTTP_COOKIE": cookie,
               "wsgi.input": __import__("io").BytesIO(), "wsgi.errors": sys.stderr, "wsgi.version": (1, 0),
               "wsgi.multithread": False, "wsgi.multiprocess": False, "wsgi.run_once": False,
               "SERVER_PROTOCOL": "HTTP/1.1", **REMOTE}
    statuses = []
    started = time.perf_counter()
    chunks = app(environ, lambda status, response_headers, exc_info=None: statuses.append(status))
    for chunk in chunks:
        if chunk:
            break
    elapsed = (time.perf_counter() - started) * 1000
    if hasattr(chunks, "close"):
        chunks.close()
    assert statuses and statuses[0].startswith("200"), statuses
    return elapsed


PAGES = {
    "overview": "/workspace",
    "calculations": "/workspace/calculations",
    # A full page at both sizes (a customer's filter shows a page of one or two rows at 10,000).
    "calculations_filtered": "/workspace/calculations?mode=ROAD&activity_from=2025-03-01&activity_to=2025-09-30",
    "calculation": "/workspace/calculations/{id}",
    "webhooks": "/workspace/webhooks",
    "customer_period": "/workspace/customers/customer-7?period=custom&from=2025-01-01&to=2025-12-31",
}


def pages(client: TestApp, cookie: str, one_id: str, repeat: int) -> dict:
    """The workspace pages of the signed-in bench user, each the median of `repeat`, in wall-clock
    time and in this process's CPU time (which other work on a shared machine does not inflate)."""
    result = {}
    for name, path in PAGES.items():
        walls, cpus = [], []
        for _ in range(repeat):
            started, cpu = time.perf_counter(), time.process_time()
            client.get(path.format(id=one_id), extra_environ=REMOTE, status=200)
            walls.append((time.perf_counter() - started) * 1000)
            cpus.append((time.process_time() - cpu) * 1000)
        result[f"page_{name}_ms"] = round(sorted(walls)[repeat // 2], 2)
        result[f"page_{name}_cpu_ms"] = round(sorted(cpus)[repeat // 2], 2)
    result["csv_first_byte_ms"] = round(sorted(first_byte_ms(client.app, "/workspace/calculations.csv", cookie)
                                               for _ in range(repeat))[repeat // 2], 2)
    return result


def http_get(port: int, path: str, request_headers: dict) -> float:
    """Milliseconds for one GET on a new connection, its body read; asserts a 200."""
    started = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    connection.request("GET", path, headers=request_headers)
    response = connection.getresponse()
    response.read()
    connection.close()
    assert response.status == 200, (path, response.status)
    return (time.perf_counter() - started) * 1000


def served(database_url: str, key: str, cookie: str, ids: list[str], repeat: int) -> dict:
    """`emissions serve` on the database in a subprocess (its defaults: one serving thread on
    SQLite, the scheduler and checkpointer): start-up, and an API GET during an overview render."""
    port = run.free_port()
    environment = {**os.environ, "DATABASE_URL": database_url, "RATE_LIMIT_PER_SECOND": "1000000000",
                   "RATE_LIMIT_BURST": "1000000000", "LOG_REQUESTS": "false"}
    started = time.perf_counter()
    server = subprocess.Popen([sys.executable, "-m", "emissions", "serve", "--port", str(port)], env=environment,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            try:
                http_get(port, "/healthz", {})
                break
            except (OSError, AssertionError):
                if server.poll() is not None:
                    raise RuntimeError("emissions serve stopped") from None
                time.sleep(0.01)
        result = {"startup_seconds": round(time.perf_counter() - started, 2)}
        # What the start-up itself did, which other work on the machine does not inflate.
        result["startup_cpu_seconds"] = round(run.cpu_seconds(server.pid), 2)
        api_headers = {"Authorization": f"Bearer {key}"}
        reads = iter(ids)
        result["served_get_alone_ms"] = timed(lambda: http_get(port, f"/v1/calculations/{next(reads)}", api_headers),
                                              11)
        during, overview = [], []
        for _ in range(repeat):
            rendering = threading.Thread(target=lambda: overview.append(
                http_get(port, "/workspace", {"Cookie": cookie})))
            rendering.start()
            time.sleep(0.005)  # the overview's request is in before the GET
            during.append(http_get(port, f"/v1/calculations/{next(reads)}", api_headers))
            rendering.join()
        result["served_get_during_overview_ms"] = round(sorted(during)[len(during) // 2], 2)
        result["served_overview_ms"] = round(sorted(overview)[len(overview) // 2], 2)
        return result
    finally:
        server.terminate()
        server.wait()


def postgres_url(url: str, count: int) -> str:
    """An empty schema of its own for this size in the given database."""
    schema = f"bench_scale_{count}"
    database = open_database(url)
    database.execute_sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    database.execute_sql(f"CREATE SCHEMA {schema}")
    database.close()
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"


def one_size(args, count: int) -> dict:
    """Build (or reuse) the database of `count` calculations and measure it."""
    result: dict = {"calculations": count}
    started = time.perf_counter()
    if args.postgres:
        url = postgres_url(args.postgres, count)
        result.update(build(url, count, args.via_api))
    else:
        kept = args.directory / f"scale-{count}.sqlite3"
        if built_count(f"sqlite:///{kept}") != count:
            for stale in args.directory.glob(f"scale-{count}.sqlite3*"):
                stale.unlink()
            result.update(build(f"sqlite:///{kept}", count, args.via_api))
            sqlite3.connect(kept).execute("PRAGMA wal_checkpoint(TRUNCATE)").close()
        else:
            result["build_seconds"] = "kept"
        path = args.directory / f"scale-{count}-measured.sqlite3"
        for stale in args.directory.glob(f"scale-{count}-measured.sqlite3*"):
            stale.unlink()
        shutil.copyfile(kept, path)
        url = f"sqlite:///{path}"
    result["prepare_seconds"] = round(time.perf_counter() - started, 1)
    started = time.perf_counter()
    client = TestApp(create_app(bench_config(url)))
    if not args.postgres:
        result.update(bytes_per_calculation(path, count))
    key_row = models.ApiKey.get(models.ApiKey.name == "bench")
    _, key = auth.create_key(key_row.organization, "test", list(models.SCOPES),
                             auth.instance_secret(os.environ.get("SECRET_KEY")), name="bench-measure")
    ids = build_ids(count, 200)
    cookie = sign_in(client)
    result.update(pages(client, cookie, ids[0], args.repeat))
    if not args.postgres:
        result.update(api_reads(client, key, ids[1:60]))
        result.update(served(url, key, cookie, ids[60:], args.repeat))
        result.update(measure(client, key, args.posts, url))
    else:
        result.update(postgres_claim(url))
    db.close()
    result["measure_seconds"] = round(time.perf_counter() - started, 1)
    return result


def postgres_claim(database_url: str) -> dict:
    """One claim with 100 and with 100,000 due on PostgreSQL."""
    worker = webhook_delivery.Deliverer(Config(database_url=database_url))
    down = models.Organization.create(slug="down", name="Down", created_at=models.utcnow())
    webhook_endpoints.set_endpoint(down.id, "test", DOWN_URL, actor="bench", allow_private_test=True)
    queue_due(down.id, 100)
    result = {"claim_ms_100_due": timed(lambda: worker._due_ids(models.utcnow(), 32))}
    queue_due(down.id, DUE - 100)
    result["claim_ms_100000_due"] = timed(lambda: worker._due_ids(models.utcnow(), 32), 21)
    worker.close()
    return result


# Each row of the table: its measure, and its bound ("ratio" large/small at most the number; "rate"
# large-size backlog rate over none-due rate at least the number; "max" the large value at most it).
BOUNDS = {
    "page_overview_ms": ("ratio", 1.5), "page_calculations_ms": ("ratio", 1.5),
    "page_calculations_filtered_ms": ("ratio", 1.5), "page_calculation_ms": ("ratio", 1.5),
    "page_webhooks_ms": ("ratio", 1.5), "page_customer_period_ms": ("ratio", 1.5),
    **{f"page_{name}_cpu_ms": ("ratio", 1.5) for name in PAGES},
    "csv_first_byte_ms": ("ratio", 1.5), "get_by_random_id_ms": ("ratio", 1.5),
    "get_customer_ms": ("ratio", 1.5), "customer_emissions_year_ms": ("ratio", 1.5),
    "startup_seconds": ("ratio", 1.5), "startup_cpu_seconds": ("ratio", 1.5),
    "served_get_during_overview_ms": ("ratio", 1.5),
    "fresh_posts_per_second_none_due": ("inverse", 1.5), "fresh_post_cpu_ms_none_due": ("ratio", 1.5),
    "fresh_posts_per_second_100000_due": ("rate", 0.8),
    "claim_ms_100_due": ("ratio", 1.5), "claim_ms_100000_due": ("ratio", 1.5),
    "claim_and_lease_ms_100000_due": ("ratio", 1.5), "idle_check_ms_100000_pending_no_endpoint": ("ratio", 1.5),
    "webhook_deliveries_ms": ("ratio", 1.5), "webhook_deliveries_org_ms": ("ratio", 1.5),
    "redeliver_since_ms": ("ratio", 1.5), "prune_nothing_to_delete_ms": ("ratio", 1.5),
    "fresh_post_p99_ms": ("ratio", 1.3), "bytes_per_calculation": ("max", 2000),
}


def verdict(name: str, small: dict, large: dict) -> tuple[str, str]:
    kind, bound = BOUNDS[name]
    if kind == "max":
        return f"<= {bound:,}", "PASS" if large[name] <= bound else "FAIL"
    if kind == "rate":
        share = large[name] / large["fresh_posts_per_second_none_due"]
        return f">= {bound}x of none due ({share:.2f}x)", "PASS" if share >= bound else "FAIL"
    ratio = large[name] / small[name] if kind == "ratio" else small[name] / large[name]
    return f"within {bound}x", "PASS" if ratio <= bound else "FAIL"


def table(small: dict, large: dict) -> str:
    lines = [f"| measure | {small['calculations']:,} | {large['calculations']:,} | large/small | bound | |",
             "|---|---|---|---|---|---|"]
    for name, value in small.items():
        other = large.get(name)
        compared = isinstance(value, (int, float)) and value and isinstance(other, (int, float)) \
            and not name.startswith(("calculations", "build_", "prepare_", "verify_", "replayed", "measure_"))
        ratio = f"{other / value:.2f}" if compared else ""
        bound, passed = verdict(name, small, large) if name in BOUNDS and other is not None else ("", "")
        lines.append(f"| {name} | {value} | {other} | {ratio} | {bound} | {passed} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=2_000_000)
    parser.add_argument("--posts", type=int, default=2000, help="POSTs per rate and per tail round")
    parser.add_argument("--via-api", type=int, default=10_000, help="calculations of each build written by POST")
    parser.add_argument("--repeat", type=int, default=3, help="times each page is measured (the median counts)")
    parser.add_argument("--directory", type=Path, default=None,
                        help="where to keep the SQLite databases between runs (default: a temporary one)")
    parser.add_argument("--postgres", help="a PostgreSQL URL: build and measure the pages and claim there")
    args = parser.parse_args()
    args.directory = args.directory or Path(tempfile.mkdtemp(prefix="bench-scale-"))
    args.directory.mkdir(parents=True, exist_ok=True)
    results = {}
    started = time.perf_counter()
    for name, count in (("small", args.small), ("large", args.large)):
        results[name] = one_size(args, count)
        print(json.dumps({name: results[name]}), flush=True)
    report = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              "seconds": round(time.perf_counter() - started),
              "database": "postgresql" if args.postgres else "sqlite",
              "machine": {"python": platform.python_version(), "sqlite": sqlite3.sqlite_version,
                          "cpus": os.cpu_count(), "platform": platform.platform()},
              "results": results}
    print(json.dumps(report, indent=2))
    print()
    print(table(results["small"], results["large"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
