"""Throughput (token bucket per key, RATE_LIMITED) and contract capacity (USAGE_LIMIT_REACHED)."""
from __future__ import annotations

import datetime as dt
import json
import random
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from emissions import calculations
from emissions import cli
from emissions import limits
from emissions import models
from emissions import store
from emissions.app import create_app
from emissions.config import Config
from emissions.serving import workers
from conftest import LiveServer, logistics_body, make_customer, make_key, post_calculation
from emissions.errors import LimitReached
from emissions.limits import RateLimiter
from emissions.models import Calculation, UsageCounter
from webtest import TestApp

UTC = dt.timezone.utc


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self, start: float = 1000.0):
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def rejected_after(limiter: RateLimiter, key_id: str) -> int:
    """The Retry-After of the next check, which must be refused."""
    with pytest.raises(LimitReached) as caught:
        limiter.check(key_id)
    assert caught.value.code == "RATE_LIMITED"
    return caught.value.retry_after


# --- the token bucket, unit ----------------------------------------------------------------------

def test_a_full_bucket_allows_the_burst_then_refuses():
    clock = FakeClock()
    limiter = RateLimiter(rate=1, burst=3, clock=clock)
    for _ in range(3):
        limiter.check("key_a")
    assert rejected_after(limiter, "key_a") == 1


def test_tokens_come_back_at_the_configured_rate_up_to_the_burst():
    clock = FakeClock()
    limiter = RateLimiter(rate=2, burst=4, clock=clock)
    for _ in range(4):
        limiter.check("key_a")
    clock.advance(1.0)  # two tokens back
    limiter.check("key_a")
    limiter.check("key_a")
    rejected_after(limiter, "key_a")
    clock.advance(3600)  # a long pause refills only up to the burst
    for _ in range(4):
        limiter.check("key_a")
    rejected_after(limiter, "key_a")


def test_a_refused_request_does_not_take_a_token():
    clock = FakeClock()
    limiter = RateLimiter(rate=0.5, burst=1, clock=clock)
    limiter.check("key_a")
    for _ in range(5):
        assert rejected_after(limiter, "key_a") == 2
    clock.advance(2)
    limiter.check("key_a")


def test_retry_after_is_whole_seconds_and_at_least_one_for_a_fast_rate():
    clock = FakeClock()
    limiter = RateLimiter(rate=1000, burst=1, clock=clock)
    limiter.check("key_a")
    assert rejected_after(limiter, "key_a") == 1


@pytest.mark.parametrize("rate", [0.1, 0.3, 0.7, 1, 1 / 3, 2.5, 7, 0.05])
def test_retry_after_is_true_a_retry_after_that_many_seconds_passes(rate):
    clock = FakeClock(start=123456.789)
    limiter = RateLimiter(rate=rate, burst=3, clock=clock)
    shuffle = random.Random(f"retry-after-{rate}")
    for _ in range(200):
        try:
            limiter.check("key_a")
        except LimitReached as refused:
            clock.advance(refused.retry_after)
            limiter.check("key_a")  # waited exactly Retry-After: must pass
        clock.advance(shuffle.choice([0, 0, 0.01, 0.1, 0.37, 1.3]))


def test_retry_after_holds_when_float_clock_arithmetic_rounds_down():
    clock = FakeClock(start=0.3)  # (0.3 + 2) - 0.3 == 1.9999999999999998
    limiter = RateLimiter(rate=0.5, burst=1, clock=clock)
    limiter.check("key_a")
    assert rejected_after(limiter, "key_a") == 2
    clock.advance(2)
    limiter.check("key_a")


def test_retry_after_is_not_longer_than_needed():
    clock = FakeClock()
    limiter = RateLimiter(rate=0.25, burst=1, clock=clock)
    limiter.check("key_a")
    clock.advance(1.5)  # 0.375 of a token back; 0.625 / 0.25 = 2.5 s to go
    assert rejected_after(limiter, "key_a") == 3
    clock.advance(2)
    assert rejected_after(limiter, "key_a") == 1
    clock.advance(1)
    limiter.check("key_a")


def test_buckets_are_per_key():
    clock = FakeClock()
    limiter = RateLimiter(rate=1, burst=1, clock=clock)
    limiter.check("key_a")
    rejected_after(limiter, "key_a")
    limiter.check("key_b")


@pytest.mark.parametrize("rate, burst", [(0, 5), (5, 0), (0, 0)])
def test_zero_rate_or_burst_disables_the_limit(rate, burst):
    limiter = RateLimiter(rate=rate, burst=burst, clock=FakeClock())
    assert not limiter.enabled
    for _ in range(1000):
        limiter.check("key_a")


# --- throughput through the API ------------------------------------------------------------------

OPERATIONS = ["calculate", "get_calculation", "get_customer", "get_customer_emissions"]


def call(client, operation: str, key: str, status="*"):
    """One request of an operation with `key`; a POST gets a fresh Idempotency-Key."""
    headers = {"Authorization": f"Bearer {key}"}
    if operation == "calculate":
        headers["Idempotency-Key"] = str(uuid.uuid4())
        return client.post_json("/v1/emissions/logistics", logistics_body(external_reference=headers[
            "Idempotency-Key"]), headers=headers, status=status)
    path = {"get_calculation": f"/v1/calculations/{uuid.uuid4()}",
            "get_customer": "/v1/customers/cust-1",
            "get_customer_emissions": "/v1/customers/cust-1/emissions"}[operation]
    return client.get(path, headers=headers, status=status)


@pytest.fixture
def limited(config, acme) -> tuple[TestApp, FakeClock]:
    """A client of an app limited to 1 request a second with a burst of 2, on a clock the test moves."""
    app = create_app(config.with_(rate_limit_per_second=1, rate_limit_burst=2))
    clock = app.limiter.clock = FakeClock()
    return TestApp(app), clock


@pytest.mark.parametrize("operation", OPERATIONS)
def test_every_operation_is_rate_limited_with_retry_after_and_the_envelope(acme, limited, operation):
    client, clock = limited
    for _ in range(2):
        assert call(client, operation, acme.key).status_int != 429
    refused = call(client, operation, acme.key, status=429)
    assert refused.headers["Retry-After"] == "1"
    assert refused.json == {"error": {
        "code": "RATE_LIMITED",
        "message": "Too many requests for this API key; retry after 1 second.",
        "request_id": refused.headers["X-Request-Id"]}}
    assert refused.headers["Cache-Control"] == "no-store"
    clock.advance(int(refused.headers["Retry-After"]))
    assert call(client, operation, acme.key).status_int != 429


def test_one_bucket_covers_all_operations_of_a_key(acme, limited):
    client, _ = limited
    call(client, "get_customer", acme.key, status=200)
    call(client, "get_calculation", acme.key, status=404)
    for operation in OPERATIONS:
        call(client, operation, acme.key, status=429)


def test_another_key_of_the_same_organization_is_unaffected(acme, secret, limited):
    client, _ = limited
    other = make_key(acme.org, secret)
    for _ in range(2):
        call(client, "get_customer", acme.key, status=200)
    call(client, "get_customer", acme.key, status=429)
    for _ in range(2):
        call(client, "get_customer", other, status=200)
    call(client, "calculate", acme.key, status=429)


def test_a_rate_limited_post_creates_nothing(acme, limited):
    client, clock = limited
    for number in range(2):
        post_calculation(client, acme, idempotency_key=f"idem-{number}", status=201)
    post_calculation(client, acme, idempotency_key="idem-2", status=429)
    assert Calculation.select().count() == 2
    clock.advance(1)
    post_calculation(client, acme, idempotency_key="idem-2", status=201)


@pytest.mark.parametrize("operation", OPERATIONS)
def test_zero_disables_the_limit_through_the_api(client, acme, operation):
    assert not client.app.limiter.enabled  # the test config sets RATE_LIMIT_PER_SECOND=0
    for _ in range(25):
        assert call(client, operation, acme.key).status_int != 429


def test_the_limit_applies_after_authentication_a_bad_key_gets_401(acme, limited):
    client, _ = limited
    for _ in range(2):
        call(client, "get_customer", acme.key, status=200)
    call(client, "get_customer", acme.key, status=429)
    for _ in range(5):
        refused = call(client, "get_customer", "service_test_" + "x" * 40, status=401)
        assert refused.json["error"]["code"] == "INVALID_API_KEY"
        assert "Retry-After" not in refused.headers
    models.ApiKey.update(revoked_at=models.utcnow()).execute()
    assert call(client, "get_customer", acme.key, status=401).json["error"]["code"] == "API_KEY_REVOKED"


def test_requests_refused_for_scope_take_no_token(acme, secret, limited):
    client, _ = limited
    reader = make_key(acme.org, secret, scopes=["customers:read"])
    for _ in range(5):
        call(client, "calculate", reader, status=403)
    call(client, "get_customer", reader, status=200)
    call(client, "get_customer", reader, status=200)
    call(client, "get_customer", reader, status=429)


# --- contract capacity ---------------------------------------------------------------------------

def set_capacity(org, **capacities) -> None:
    models.Organization.update(**capacities).where(models.Organization.id == org.id).execute()


def usage_count(org, environment: str) -> int:
    row = UsageCounter.get_or_none((UsageCounter.organization == org.id)
                                   & (UsageCounter.environment == environment))
    return row.count if row else 0


class Clock:
    """Replaces the calculation's clock (UTC wall time)."""

    def __init__(self, monkeypatch, moment: dt.datetime):
        self.moment = moment
        monkeypatch.setattr(calculations, "utcnow", lambda: self.moment)


def test_capacity_allows_exactly_n_then_usage_limit_reached(client, acme):
    set_capacity(acme.org, test_capacity=3)
    for number in range(3):
        post_calculation(client, acme, idempotency_key=f"idem-{number}", status=201)
    refused = post_calculation(client, acme, idempotency_key="idem-3", status=429)
    assert refused.json["error"]["code"] == "USAGE_LIMIT_REACHED"
    assert refused.json["error"]["request_id"] == refused.headers["X-Request-Id"]
    assert int(refused.headers["Retry-After"]) >= 1
    assert Calculation.select().count() == 3
    assert usage_count(acme.org, "test") == 3


def test_usage_limit_retry_after_is_the_seconds_to_the_next_utc_month(client, acme, monkeypatch):
    clock = Clock(monkeypatch, dt.datetime(2026, 3, 31, 23, 59, 30, 250_000, tzinfo=UTC))
    set_capacity(acme.org, test_capacity=1)
    post_calculation(client, acme, idempotency_key="march-1", status=201)
    refused = post_calculation(client, acme, idempotency_key="march-2", status=429)
    assert refused.headers["Retry-After"] == "30"  # 29.75 s, rounded up so the retry is in April
    clock.moment += dt.timedelta(seconds=int(refused.headers["Retry-After"]))
    created = post_calculation(client, acme, idempotency_key="march-2", status=201)
    assert created.json["created_at"] == "2026-04-01T00:00:00.250Z"


def test_a_new_month_resets_the_count(client, acme, monkeypatch):
    clock = Clock(monkeypatch, dt.datetime(2026, 1, 15, 12, 0, tzinfo=UTC))
    set_capacity(acme.org, test_capacity=2)
    for number in range(2):
        post_calculation(client, acme, idempotency_key=f"jan-{number}", status=201)
    refused = post_calculation(client, acme, idempotency_key="jan-2", status=429)
    assert refused.headers["Retry-After"] == str(int((dt.datetime(2026, 2, 1, tzinfo=UTC)
                                                      - clock.moment).total_seconds()))
    clock.moment = dt.datetime(2026, 2, 1, 0, 0, tzinfo=UTC)
    for number in range(2):
        post_calculation(client, acme, idempotency_key=f"feb-{number}", status=201)
    post_calculation(client, acme, idempotency_key="feb-2", status=429)
    assert [(row.period, row.count) for row in UsageCounter.select().order_by(UsageCounter.period)] == [
        ("2026-01", 2), ("2026-02", 2)]


def test_seconds_to_next_month_across_the_year_end_and_a_leap_february():
    assert limits.seconds_to_next_month(dt.datetime(2026, 12, 31, 23, 59, 59, tzinfo=UTC)) == 1
    assert limits.seconds_to_next_month(dt.datetime(2028, 2, 28, 0, 0, tzinfo=UTC)) == 2 * 86400
    assert limits.seconds_to_next_month(dt.datetime(2026, 5, 1, 0, 0, tzinfo=UTC)) == 31 * 86400


def test_a_replay_at_the_cap_answers_200_with_the_original_body(client, acme):
    set_capacity(acme.org, test_capacity=1)
    original = post_calculation(client, acme, idempotency_key="idem-1", status=201)
    post_calculation(client, acme, idempotency_key="idem-2", status=429)
    replay = post_calculation(client, acme, idempotency_key="idem-1", status=200)
    assert replay.body == original.body
    assert replay.headers["Idempotent-Replayed"] == "true"
    assert usage_count(acme.org, "test") == 1


def test_a_replay_is_not_blocked_when_the_capacity_was_lowered_to_zero(client, acme):
    original = post_calculation(client, acme, idempotency_key="idem-1", status=201)
    set_capacity(acme.org, test_capacity=0)
    post_calculation(client, acme, idempotency_key="idem-2", status=429)
    assert post_calculation(client, acme, idempotency_key="idem-1", status=200).body == original.body


def test_failed_requests_are_not_billed(client, acme):
    set_capacity(acme.org, test_capacity=1)
    post_calculation(client, acme, idempotency_key="a", factor_reference="missing", status=404)
    post_calculation(client, acme, idempotency_key="b", mode="SEA", status=422)  # CALCULATION_FAILED
    post_calculation(client, acme, idempotency_key="c", customer_reference="nobody", status=404)
    post_calculation(client, acme, idempotency_key="d", status=201)
    assert usage_count(acme.org, "test") == 1


def test_the_test_environment_has_the_sandbox_default_and_live_is_unlimited(app, acme, secret):
    client = app_with_test_capacity(app, 2)
    live_key = make_key(acme.org, secret, environment="live")
    make_customer(acme.org, environment="live")
    for number in range(2):
        post_calculation(client, acme, idempotency_key=f"t-{number}", status=201)
    post_calculation(client, acme, idempotency_key="t-2", status=429)
    live_headers = {"Authorization": f"Bearer {live_key}"}
    for number in range(5):
        client.post_json("/v1/emissions/logistics", logistics_body(),
                         headers={**live_headers, "Idempotency-Key": f"l-{number}"}, status=201)
    assert (usage_count(acme.org, "test"), usage_count(acme.org, "live")) == (2, 5)


def consume(organization_id: int, environment: str, test_default: int, now: dt.datetime | None = None) -> None:
    """The usage counting a calculation's transaction does, on its own."""
    now = now or models.utcnow()
    if store.run(*limits.consume(organization_id, environment, test_default, limits.period_of(now))).rowcount != 1:
        limits.capacity_used_up(now)


def test_live_unlimited_by_default_in_the_domain_function(app, acme):
    for _ in range(100):
        with models.db.atomic():
            consume(acme.org.id, "live", test_default=0)
    assert usage_count(acme.org, "live") == 100


def test_an_organization_test_capacity_overrides_the_default_and_live_capacity_applies(app, acme, secret):
    client = app_with_test_capacity(app, 2)
    set_capacity(acme.org, test_capacity=3, live_capacity=1)
    live_key = make_key(acme.org, secret, environment="live")
    make_customer(acme.org, environment="live")
    for number in range(3):
        post_calculation(client, acme, idempotency_key=f"t-{number}", status=201)
    post_calculation(client, acme, idempotency_key="t-3", status=429)
    live_headers = {"Authorization": f"Bearer {live_key}"}
    client.post_json("/v1/emissions/logistics", logistics_body(),
                     headers={**live_headers, "Idempotency-Key": "l-0"}, status=201)
    refused = client.post_json("/v1/emissions/logistics", logistics_body(),
                               headers={**live_headers, "Idempotency-Key": "l-1"}, status=429)
    assert refused.json["error"]["code"] == "USAGE_LIMIT_REACHED"


def test_capacity_is_per_organization(client, acme, globex):
    set_capacity(acme.org, test_capacity=1)
    post_calculation(client, acme, idempotency_key="idem-1", status=201)
    post_calculation(client, acme, idempotency_key="idem-2", status=429)
    post_calculation(client, globex, idempotency_key="idem-2", status=201)


def app_with_test_capacity(app, capacity: int) -> TestApp:
    """A client of an app like `app` but with TEST_CAPACITY set to `capacity`."""
    return TestApp(create_app(app.settings.with_(test_capacity=capacity)))


# --- capacity under concurrency, against a real server ---------------------------------------------

def concurrent_posts(server: LiveServer, key: str, idempotency_keys: list[str]) -> list[requests.Response]:
    """POST one calculation per idempotency key, all threads released at once."""
    barrier = threading.Barrier(len(idempotency_keys))

    def post(idempotency_key: str) -> requests.Response:
        barrier.wait()
        return requests.post(f"{server.url}/v1/emissions/logistics", json=logistics_body(), timeout=30,
                             headers={"Authorization": f"Bearer {key}", "Idempotency-Key": idempotency_key})

    with ThreadPoolExecutor(max_workers=len(idempotency_keys)) as pool:
        return list(pool.map(post, idempotency_keys))


@pytest.mark.on_both
@pytest.mark.parametrize("environment", ["test", "live"])
def test_capacity_is_exact_under_concurrency(app, acme, secret, environment):
    capacity = 4
    set_capacity(acme.org, **{f"{environment}_capacity": capacity})
    key = acme.key
    if environment == "live":
        key = make_key(acme.org, secret, environment="live")
        make_customer(acme.org, environment="live")
    with LiveServer(app, threads=12) as server:
        responses = concurrent_posts(server, key, [f"idem-{number}" for number in range(12)])
    statuses = sorted(response.status_code for response in responses)
    assert statuses == [201] * capacity + [429] * (12 - capacity)
    for response in responses:
        if response.status_code == 429:
            assert response.json()["error"]["code"] == "USAGE_LIMIT_REACHED"
            assert int(response.headers["Retry-After"]) >= 1
    assert Calculation.select().where(Calculation.environment == environment).count() == capacity
    assert usage_count(acme.org, environment) == capacity


@pytest.mark.on_both
def test_concurrent_identical_requests_at_the_cap_are_replays_not_429(app, acme):
    set_capacity(acme.org, test_capacity=1)
    with LiveServer(app, threads=8) as server:
        responses = concurrent_posts(server, acme.key, ["same-key"] * 8)
    statuses = sorted(response.status_code for response in responses)
    assert statuses == [200] * 7 + [201]
    assert len({response.text for response in responses}) == 1
    assert usage_count(acme.org, "test") == 1


# --- organization capacities and usage in the CLI -------------------------------------------------

@pytest.fixture
def run_cli(app, config, monkeypatch, capsys):
    """Run `emissions ...` against the test database; (exit status, stdout, stderr)."""
    monkeypatch.setenv("DATABASE_URL", config.database_url)
    monkeypatch.setenv("TEST_CAPACITY", "50")

    def run(*argv: str):
        status = cli.main(list(argv))
        out, err = capsys.readouterr()
        return status, out, err

    return run


def test_org_update_sets_and_resets_capacities(run_cli, acme):
    status, out, _ = run_cli("org", "update", "acme", "--live-capacity", "7", "--test-capacity", "3", "--json")
    assert status == 0
    assert (json.loads(out)["live_capacity"], json.loads(out)["test_capacity"]) == (7, 3)
    status, out, _ = run_cli("org", "update", "acme", "--live-capacity", "none", "--test-capacity", "none",
                             "--json")
    assert status == 0
    assert (json.loads(out)["live_capacity"], json.loads(out)["test_capacity"]) == (None, None)
    org = models.Organization.get_by_id(acme.org.id)
    assert limits.capacity_for(org, "test", 50) == 50
    assert limits.capacity_for(org, "live", 50) is None


@pytest.mark.parametrize("value", ["-1", "many", "1.5", "²", "99999999999", ""])
def test_org_update_rejects_a_bad_capacity_with_one_line(run_cli, acme, value):
    status, out, err = run_cli("org", "update", "acme", "--live-capacity", value)
    assert status != 0
    assert out == ""
    assert err.startswith("emissions: ") and err.count("\n") == 1


@pytest.mark.parametrize("value", ["-1", "99999999999"])
def test_org_create_rejects_a_bad_live_capacity_with_one_line(run_cli, value):
    status, out, err = run_cli("org", "create", "--name", "Initech", "--live-capacity", value)
    assert status != 0
    assert out == ""
    assert err.startswith("emissions: ") and err.count("\n") == 1
    assert not models.Organization.select().where(models.Organization.slug == "initech").exists()


def test_usage_prints_the_period_usage_and_capacity_per_environment(run_cli, client, acme, secret, monkeypatch):
    Clock(monkeypatch, dt.datetime(2026, 3, 15, 9, 30, tzinfo=UTC))
    live_key = make_key(acme.org, secret, environment="live")
    make_customer(acme.org, environment="live")
    for number in range(2):
        post_calculation(client, acme, idempotency_key=f"t-{number}", status=201)
    post_calculation(client, acme, idempotency_key="t-0", status=200)  # a replay is not billed
    client.post_json("/v1/emissions/logistics", logistics_body(),
                     headers={"Authorization": f"Bearer {live_key}", "Idempotency-Key": "l-0"}, status=201)

    status, out, _ = run_cli("usage", "--org", "acme", "--period", "2026-03", "--json")
    assert status == 0
    assert json.loads(out) == {"organization": "acme", "period": "2026-03", "environments": {
        "test": {"used": 2, "capacity": 50}, "live": {"used": 1, "capacity": None}}}

    run_cli("org", "update", "acme", "--live-capacity", "10", "--test-capacity", "5")
    status, out, _ = run_cli("usage", "--org", "acme", "--period", "2026-02", "--json")
    assert json.loads(out) == {"organization": "acme", "period": "2026-02", "environments": {
        "test": {"used": 0, "capacity": 5}, "live": {"used": 0, "capacity": 10}}}

    status, out, _ = run_cli("usage", "--org", "acme", "--period", "2026-03")
    assert status == 0
    assert out.splitlines() == ["acme, 2026-03", "test: 2 of 5", "live: 1 of 10"]


def test_usage_defaults_to_the_current_utc_month(run_cli, acme, monkeypatch):
    monkeypatch.setattr(limits, "utcnow", lambda: dt.datetime(2027, 1, 1, 0, 0, 1, tzinfo=UTC))
    consume(acme.org.id, "test", 50, now=dt.datetime(2027, 1, 1, 0, 0, 0, tzinfo=UTC))
    status, out, _ = run_cli("usage", "--org", "acme", "--json")
    assert status == 0
    assert json.loads(out)["period"] == "2027-01"
    assert json.loads(out)["environments"]["test"] == {"used": 1, "capacity": 50}
    status, out, _ = run_cli("usage", "--org", "acme")
    assert out.splitlines()[-1] == "live: 0 of unlimited"


@pytest.mark.parametrize("argv, message", [
    (["usage", "--org", "nobody"], "no organization with slug nobody"),
    (["usage", "--org", "acme", "--period", "2026-13"], "period must be YYYY-MM"),
    (["usage", "--org", "acme", "--period", "March"], "period must be YYYY-MM"),
])
def test_usage_errors_are_one_line(run_cli, acme, argv, message):
    status, out, err = run_cli(*argv)
    assert status != 0
    assert out == ""
    assert message in err and err.count("\n") == 1


def test_each_worker_takes_its_share_of_the_rate_limit():
    config = Config(rate_limit_per_second=100.0, rate_limit_burst=200)
    share = workers.worker_config(config, 2)
    assert (share.rate_limit_per_second, share.rate_limit_burst) == (50.0, 100)
    assert workers.worker_config(config.with_(rate_limit_burst=3), 2).rate_limit_burst == 2
    off = workers.worker_config(config.with_(rate_limit_per_second=0, rate_limit_burst=0), 4)
    assert (off.rate_limit_per_second, off.rate_limit_burst) == (0, 0)
