"""Authentication and authorization of every operation: the decided codes, their order, isolation."""
from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import itertools
import json
import re
import uuid
from pathlib import Path

import pytest
import requests
from webtest import TestApp

from emissions import auth
from emissions import cli
from emissions import models
from emissions.app import create_app
from conftest import ALL_SCOPES, LiveServer, logistics_body, make_customer, make_key, post_calculation
from emissions.models import ApiKey, Organization

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
KEY_FORMAT = re.compile(r"^service_(test|live)_[0-9A-Za-z]{32,}$")

# What each operation needs, as interface-spec 5.4 states it (not read from the app's URL map).
OPERATIONS = {
    "calculate": lambda scopes: "emissions:calculate" in scopes,
    "get_calculation": lambda scopes: bool({"emissions:read", "emissions:calculate"} & scopes),
    "get_customer": lambda scopes: "customers:read" in scopes,
    "get_customer_emissions": lambda scopes: {"customers:read", "customer-analytics:read"} <= scopes,
}
SUCCESS = {"calculate": 201, "get_calculation": 200, "get_customer": 200, "get_customer_emissions": 200}
SCOPE_SETS = [frozenset(combination) for size in range(1, len(ALL_SCOPES) + 1)
              for combination in itertools.combinations(ALL_SCOPES, size)]


@pytest.fixture
def calculation_id(client, acme) -> str:
    """A calculation of acme's test environment, made with a key of every scope."""
    return post_calculation(client, acme, idempotency_key="existing", status=201).json["id"]


def call(client, operation: str, authorization: str | None, calculation_id: str = "", status="*"):
    """One request of `operation` with this Authorization header (None: no header)."""
    headers = {} if authorization is None else {"Authorization": authorization}
    if operation == "calculate":
        headers["Idempotency-Key"] = str(uuid.uuid4())
        return client.post_json("/v1/emissions/logistics", logistics_body(), headers=headers, status=status)
    path = {"get_calculation": f"/v1/calculations/{calculation_id or uuid.uuid4()}",
            "get_customer": "/v1/customers/cust-1",
            "get_customer_emissions": "/v1/customers/cust-1/emissions"}[operation]
    return client.get(path, headers=headers, status=status)


def assert_error(response, status: int, code: str) -> None:
    """The decided envelope with this status and code, its request_id the X-Request-Id header."""
    assert response.status_int == status, response.body
    assert set(response.json) == {"error"}
    assert response.json["error"]["code"] == code
    assert response.json["error"]["request_id"] == response.headers["X-Request-Id"]
    assert response.json["error"]["message"]


def bearer(key: str) -> str:
    return f"Bearer {key}"


# --- 401: missing, malformed, unknown ------------------------------------------------------------

UNKNOWN_RANDOM = "Z" * 40
MALFORMED = {
    "no header": None,
    "empty": "",
    "basic": "Basic dXNlcjpwYXNzd29yZA==",
    "bearer without value": "Bearer",
    "bearer with blank value": "Bearer    ",
    "garbage": "garbage",
    "key without scheme": "service_test_" + UNKNOWN_RANDOM,
    "wrong scheme": "Token service_test_" + UNKNOWN_RANDOM,
    "wrong prefix": "Bearer service_prod_" + UNKNOWN_RANDOM,
    "no prefix": "Bearer " + UNKNOWN_RANDOM,
    "unknown test key": "Bearer service_test_" + UNKNOWN_RANDOM,
    "unknown live key": "Bearer service_live_" + UNKNOWN_RANDOM,
    "overlong": "Bearer service_test_" + "a" * 5000,
    "not ascii": "Bearer service_test_\u00e9\u00e9\u00e9",
}


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("authorization", MALFORMED.values(), ids=MALFORMED.keys())
def test_missing_malformed_or_unknown_keys_are_invalid_api_key(client, acme, operation, authorization):
    response = call(client, operation, authorization)
    assert_error(response, 401, "INVALID_API_KEY")


@pytest.mark.parametrize("operation", OPERATIONS)
def test_a_real_key_in_a_wrong_form_is_invalid(client, acme, calculation_id, operation):
    random_part = acme.key.removeprefix("service_test_")
    for authorization in (f"Basic {acme.key}", acme.key, f"Bearer service_live_{random_part}",
                          f"Bearer {acme.key}x", f"Bearer {acme.key[:-1]}", f"Bearer {random_part}",
                          f"Bearer {acme.key} {acme.key}"):
        assert_error(call(client, operation, authorization, calculation_id), 401, "INVALID_API_KEY")


@pytest.mark.parametrize("operation", OPERATIONS)
def test_the_scheme_is_case_insensitive_and_spaces_around_the_key_are_ignored(client, acme, calculation_id,
                                                                              operation):
    for authorization in (f"bearer {acme.key}", f"BEARER  {acme.key} "):
        assert call(client, operation, authorization, calculation_id).status_int == SUCCESS[operation]


# --- 401: revoked, expired; 403: organization -----------------------------------------------------

def revoke(key: str, secret: bytes) -> None:
    ApiKey.update(revoked_at=models.utcnow()).where(ApiKey.key_hash == auth.hash_key(secret, key)).execute()


def set_org(org: Organization, **fields) -> None:
    Organization.update(**fields).where(Organization.id == org.id).execute()


@pytest.mark.parametrize("operation", OPERATIONS)
def test_a_revoked_key_is_api_key_revoked(client, acme, secret, calculation_id, operation):
    revoke(acme.key, secret)
    assert_error(call(client, operation, bearer(acme.key), calculation_id), 401, "API_KEY_REVOKED")


@pytest.mark.parametrize("operation", OPERATIONS)
def test_an_expired_key_is_api_key_expired(client, acme, secret, calculation_id, operation):
    expired = make_key(acme.org, secret, expires_at=models.utcnow() - dt.timedelta(seconds=1))
    assert_error(call(client, operation, bearer(expired), calculation_id), 401, "API_KEY_EXPIRED")
    still_valid = make_key(acme.org, secret, expires_at=models.utcnow() + dt.timedelta(hours=1))
    assert call(client, operation, bearer(still_valid), calculation_id).status_int == SUCCESS[operation]


def test_a_key_expires_at_its_expiry_instant_even_while_cached(app, acme, secret, calculation_id, monkeypatch):
    client = TestApp(create_app(app.settings.with_(key_cache_seconds=3600)))
    expires_at = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)
    key = make_key(acme.org, secret, expires_at=expires_at)
    monkeypatch.setattr(auth, "utcnow", lambda: expires_at - dt.timedelta(milliseconds=1))
    call(client, "get_customer", bearer(key), status=200)
    monkeypatch.setattr(auth, "utcnow", lambda: expires_at)
    assert_error(call(client, "get_customer", bearer(key)), 401, "API_KEY_EXPIRED")


@pytest.mark.parametrize("operation", OPERATIONS)
def test_a_suspended_organization_is_organization_not_active(client, acme, calculation_id, operation):
    set_org(acme.org, status="suspended")
    assert_error(call(client, operation, bearer(acme.key), calculation_id), 403, "ORGANIZATION_NOT_ACTIVE")
    set_org(acme.org, status="active")
    assert call(client, operation, bearer(acme.key), calculation_id).status_int == SUCCESS[operation]


@pytest.mark.parametrize("operation", OPERATIONS)
def test_an_organization_not_entitled_is_feature_not_entitled(client, acme, calculation_id, operation):
    set_org(acme.org, entitled=False)
    assert_error(call(client, operation, bearer(acme.key), calculation_id), 403, "FEATURE_NOT_ENTITLED")


# --- 403: scopes ----------------------------------------------------------------------------------

@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("scopes", SCOPE_SETS, ids=lambda scopes: "+".join(sorted(scopes)))
def test_each_operation_needs_its_documented_scopes(client, acme, secret, calculation_id, operation, scopes):
    key = make_key(acme.org, secret, scopes=sorted(scopes))
    response = call(client, operation, bearer(key), calculation_id)
    if OPERATIONS[operation](scopes):
        assert response.status_int == SUCCESS[operation], response.body
    else:
        assert_error(response, 403, "INSUFFICIENT_SCOPE")


def test_insufficient_scope_names_what_is_missing(client, acme, secret):
    key = make_key(acme.org, secret, scopes=["customers:read"])
    response = call(client, "get_customer_emissions", bearer(key), status=403)
    assert "customer-analytics:read" in response.json["error"]["message"]
    response = call(client, "get_calculation", bearer(key), status=403)
    assert "emissions:read or emissions:calculate" in response.json["error"]["message"]


# --- the order of the checks ------------------------------------------------------------------------

def test_a_revoked_key_of_a_suspended_organization_is_401(client, acme, secret):
    set_org(acme.org, status="suspended", entitled=False)
    revoke(acme.key, secret)
    assert_error(call(client, "get_customer", bearer(acme.key)), 401, "API_KEY_REVOKED")


def test_an_expired_key_of_a_suspended_organization_is_401(client, acme, secret):
    expired = make_key(acme.org, secret, expires_at=models.utcnow() - dt.timedelta(days=1))
    set_org(acme.org, status="suspended", entitled=False)
    assert_error(call(client, "get_customer", bearer(expired)), 401, "API_KEY_EXPIRED")


def test_a_suspended_organization_not_entitled_is_organization_not_active(client, acme):
    set_org(acme.org, status="suspended", entitled=False)
    assert_error(call(client, "get_customer", bearer(acme.key)), 403, "ORGANIZATION_NOT_ACTIVE")


def test_a_suspended_organization_with_a_missing_scope_is_organization_not_active(client, acme, secret):
    key = make_key(acme.org, secret, scopes=["emissions:read"])
    set_org(acme.org, status="suspended")
    assert_error(call(client, "calculate", bearer(key)), 403, "ORGANIZATION_NOT_ACTIVE")


def test_an_organization_not_entitled_with_a_missing_scope_is_feature_not_entitled(client, acme, secret):
    key = make_key(acme.org, secret, scopes=["emissions:read"])
    set_org(acme.org, entitled=False)
    assert_error(call(client, "get_customer", bearer(key)), 403, "FEATURE_NOT_ENTITLED")


class FakeClock:
    def __init__(self):
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def one_request_a_minute(app, acme) -> TestApp:
    """A client of an app whose keys may make one request, then one a minute (clock held still)."""
    limited = create_app(app.settings.with_(rate_limit_per_second=1 / 60, rate_limit_burst=1))
    limited.limiter.clock = FakeClock()
    return TestApp(limited)


def test_a_missing_scope_with_the_rate_limit_exhausted_is_403(one_request_a_minute, acme, secret):
    client = one_request_a_minute
    key = make_key(acme.org, secret, scopes=["customers:read"])
    call(client, "get_customer", bearer(key), status=200)
    assert_error(call(client, "get_customer", bearer(key)), 429, "RATE_LIMITED")
    assert_error(call(client, "calculate", bearer(key)), 403, "INSUFFICIENT_SCOPE")
    assert_error(call(client, "get_customer_emissions", bearer(key)), 403, "INSUFFICIENT_SCOPE")


def test_an_organization_403_comes_before_the_rate_limit(one_request_a_minute, acme):
    client = one_request_a_minute
    call(client, "get_customer", bearer(acme.key), status=200)
    set_org(acme.org, entitled=False)
    assert_error(call(client, "get_customer", bearer(acme.key)), 403, "FEATURE_NOT_ENTITLED")


def test_the_rate_limit_comes_before_the_operation(one_request_a_minute, acme):
    client = one_request_a_minute
    call(client, "get_customer", bearer(acme.key), status=200)
    refused = client.post("/v1/emissions/logistics", "not json", status=429,
                          headers={"Authorization": bearer(acme.key), "Content-Type": "text/plain"})
    assert_error(refused, 429, "RATE_LIMITED")
    assert refused.headers["Retry-After"] == "60"
    assert refused.json["error"]["message"] == "Too many requests for this API key; retry after 60 seconds."
    assert_error(client.get("/v1/customers/nobody", headers={"Authorization": bearer(acme.key)}, status="*"),
                 429, "RATE_LIMITED")


@pytest.mark.parametrize("operation", OPERATIONS)
def test_authentication_comes_before_validation_and_lookup(client, acme, secret, operation):
    if operation == "calculate":
        response = client.post("/v1/emissions/logistics", "{not json", status="*",
                               headers={"Content-Type": "text/plain"})
    else:
        path = {"get_calculation": "/v1/calculations/not-a-uuid", "get_customer": "/v1/customers/%2E%2E",
                "get_customer_emissions": "/v1/customers/nobody/emissions"}[operation]
        response = client.get(path, status="*")
    assert_error(response, 401, "INVALID_API_KEY")


def test_a_missing_scope_comes_before_validation(client, acme, secret):
    key = make_key(acme.org, secret, scopes=["customers:read"])
    response = client.post("/v1/emissions/logistics", "{not json", status="*",
                           headers={"Authorization": bearer(key), "Content-Type": "text/plain"})
    assert_error(response, 403, "INSUFFICIENT_SCOPE")


# --- isolation: environments and organizations ------------------------------------------------------

def never_existing_calculation(client, key: str):
    return client.get(f"/v1/calculations/{uuid.uuid4()}", headers={"Authorization": bearer(key)}, status=404)


def without_request_id(response) -> dict:
    body = json.loads(response.body)
    body["error"].pop("request_id")
    return body


@pytest.mark.on_both
def test_a_test_key_never_sees_live_data_and_the_reverse(client, acme, secret):
    live_key = make_key(acme.org, secret, environment="live")
    make_customer(acme.org, environment="live")
    make_customer(acme.org, reference="live-only", environment="live")
    test_calculation = post_calculation(client, acme, idempotency_key="same", status=201).json
    live_calculation = client.post_json("/v1/emissions/logistics", logistics_body(), status=201,
                                        headers={"Authorization": bearer(live_key), "Idempotency-Key": "same"}).json
    assert (test_calculation["environment"], live_calculation["environment"]) == ("test", "live")
    assert test_calculation["id"] != live_calculation["id"]  # the idempotency key is per environment too

    for key, foreign in ((acme.key, live_calculation["id"]), (live_key, test_calculation["id"])):
        hidden = client.get(f"/v1/calculations/{foreign}", headers={"Authorization": bearer(key)}, status=404)
        assert without_request_id(hidden) == without_request_id(never_existing_calculation(client, key))

    for path in ("/v1/customers/live-only", "/v1/customers/live-only/emissions"):
        assert_error(client.get(path, headers={"Authorization": bearer(acme.key)}, status=404),
                     404, "CUSTOMER_NOT_FOUND")
    refused = client.post_json("/v1/emissions/logistics", logistics_body(customer_reference="live-only"),
                               headers=acme.headers("other"), status=404)
    assert_error(refused, 404, "CUSTOMER_NOT_FOUND")

    live_analytics = client.get("/v1/customers/cust-1/emissions", headers={"Authorization": bearer(live_key)},
                                status=200).json["analytics"]
    test_analytics = client.get("/v1/customers/cust-1/emissions", headers=acme.headers(),
                                status=200).json["analytics"]
    assert (live_analytics["environment"], live_analytics["calculation_count"]) == ("live", 1)
    assert (test_analytics["environment"], test_analytics["calculation_count"]) == ("test", 1)


@pytest.mark.on_both
def test_another_organizations_calculation_is_the_same_404_as_a_never_existing_one(client, acme, globex):
    acme_calculation = post_calculation(client, acme, status=201).json["id"]
    foreign = client.get(f"/v1/calculations/{acme_calculation}", headers=globex.headers(), status=404)
    never = never_existing_calculation(client, globex.key)
    not_a_uuid = client.get("/v1/calculations/not-a-uuid", headers=globex.headers(), status=404)
    assert without_request_id(foreign) == without_request_id(never) == without_request_id(not_a_uuid)
    assert_error(foreign, 404, "INVALID_REQUEST")
    assert foreign.headers["Content-Type"] == never.headers["Content-Type"]
    assert foreign.headers["Content-Length"] == never.headers["Content-Length"]


@pytest.mark.on_both
def test_another_organizations_customer_is_the_same_404_as_a_never_existing_one(client, acme, globex):
    make_customer(acme.org, reference="acme-only")
    for suffix in ("", "/emissions"):
        foreign = client.get(f"/v1/customers/acme-only{suffix}", headers=globex.headers(), status=404)
        never = client.get(f"/v1/customers/never-existed{suffix}", headers=globex.headers(), status=404)
        assert without_request_id(foreign) == without_request_id(never)
        assert_error(foreign, 404, "CUSTOMER_NOT_FOUND")


# --- keys: format, storage, revocation and the cache --------------------------------------------------

@pytest.mark.parametrize("environment", ["test", "live"])
def test_keys_have_the_documented_format(app, acme, secret, environment):
    keys = {make_key(acme.org, secret, environment=environment) for _ in range(20)}
    assert len(keys) == 20
    for key in keys:
        assert KEY_FORMAT.match(key)
        assert key.startswith(f"service_{environment}_")


def test_the_cli_prints_a_key_of_the_documented_format_once(app, acme, config, monkeypatch, capsys):
    monkeypatch.setenv("DATABASE_URL", config.database_url)
    assert cli.main(["key", "create", "--org", "acme", "--env", "live", "--scopes", "emissions:read", "--json"]) == 0
    created = json.loads(capsys.readouterr().out)
    assert KEY_FORMAT.match(created["key"]) and created["key"].startswith("service_live_")
    assert cli.main(["key", "list", "--org", "acme", "--json"]) == 0
    assert created["key"] not in capsys.readouterr().out


def database_bytes(config) -> bytes:
    """Every byte SQLite keeps for the test database: the file, its WAL and shared memory."""
    path = Path(config.database_url.removeprefix("sqlite:///"))
    return b"".join(candidate.read_bytes() for candidate in sorted(path.parent.glob(path.name + "*")))


def test_keys_are_stored_only_as_a_keyed_hash(app, config, acme, secret, client):
    live_key = make_key(acme.org, secret, environment="live", scopes=["emissions:read"])
    call(client, "get_customer", bearer(acme.key), status=200)  # a lookup must not store the key either
    models.db.close()  # the connection's pages are in the files from here on
    stored = database_bytes(config)
    assert len(stored) > 10_000
    for plain in (acme.key, live_key):
        random_part = plain.split("_", 2)[2]
        assert plain.encode() not in stored
        assert random_part.encode() not in stored
        assert random_part[4:20].encode() not in stored  # not even a stretch beyond the shown prefix
        row = ApiKey.get(ApiKey.key_hash == auth.hash_key(secret, plain))
        assert row.key_hash == hmac.new(secret, plain.encode(), hashlib.sha256).hexdigest()
        assert row.key_hash != hashlib.sha256(plain.encode()).hexdigest()  # keyed, not a bare digest
        assert row.key_hash.encode() in stored  # the check above would see a value that is there


def test_a_revoked_key_stops_working_within_key_cache_seconds(app, acme, secret, config, monkeypatch, capsys):
    cached = create_app(app.settings.with_(key_cache_seconds=5))
    clock = cached.keys.clock = FakeClock()
    client = TestApp(cached)
    call(client, "get_customer", bearer(acme.key), status=200)
    monkeypatch.setenv("DATABASE_URL", config.database_url)
    key_id = ApiKey.get(ApiKey.key_hash == auth.hash_key(secret, acme.key)).id
    assert cli.main(["key", "revoke", key_id]) == 0

    clock.now += 4.9  # still the cached answer: the documented staleness
    call(client, "get_customer", bearer(acme.key), status=200)
    clock.now += 0.1  # KEY_CACHE_SECONDS after the lookup
    assert_error(call(client, "get_customer", bearer(acme.key)), 401, "API_KEY_REVOKED")
    clock.now += 100
    assert_error(call(client, "calculate", bearer(acme.key)), 401, "API_KEY_REVOKED")


def test_a_suspension_applies_within_key_cache_seconds(app, acme):
    cached = create_app(app.settings.with_(key_cache_seconds=2))
    clock = cached.keys.clock = FakeClock()
    client = TestApp(cached)
    call(client, "get_customer", bearer(acme.key), status=200)
    set_org(acme.org, status="suspended")
    clock.now += 2
    assert_error(call(client, "get_customer", bearer(acme.key)), 403, "ORGANIZATION_NOT_ACTIVE")


def test_a_new_key_works_at_once_even_after_it_was_tried_unknown(app, acme, secret):
    cached = create_app(app.settings.with_(key_cache_seconds=5))
    clock = cached.keys.clock = FakeClock()
    client = TestApp(cached)
    assert_error(call(client, "get_customer", "Bearer service_test_" + "Q" * 40), 401, "INVALID_API_KEY")
    clock.now += 5
    call(client, "get_customer", bearer(make_key(acme.org, secret)), status=200)


# --- headers on every response -------------------------------------------------------------------------

def every_kind_of_response(client, acme, secret) -> dict:
    """One response of each kind the API gives, successes and errors, by name."""
    reader = make_key(acme.org, secret, scopes=["customers:read"])
    with_key = acme.headers()
    created = post_calculation(client, acme, idempotency_key="headers", status=201)
    responses = {
        "201 created": created,
        "200 replay": post_calculation(client, acme, idempotency_key="headers", status=200),
        "200 calculation": client.get(f"/v1/calculations/{created.json['id']}", headers=with_key),
        "200 customer": client.get("/v1/customers/cust-1", headers=with_key),
        "200 customer emissions": client.get("/v1/customers/cust-1/emissions", headers=with_key),
        "200 openapi": client.get("/v1/openapi.json"),
        "401": client.get("/v1/customers/cust-1", status=401),
        "403": client.get("/v1/customers/cust-1/emissions", headers={"Authorization": bearer(reader)}, status=403),
        "404 calculation": client.get(f"/v1/calculations/{uuid.uuid4()}", headers=with_key, status=404),
        "404 customer": client.get("/v1/customers/nobody", headers=with_key, status=404),
        "404 route": client.get("/v1/nothing-here", status=404),
        "404 outside the api": client.get("/", status=404),
        "405": client.delete("/v1/emissions/logistics", headers=with_key, status=405),
        "preflight": client.options("/v1/emissions/logistics", status="*", headers={
            "Origin": "https://shop.example", "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type, idempotency-key"}),
        "400 not json": client.post("/v1/emissions/logistics", "{", status=400,
                                    headers={**acme.headers("bad-json"), "Content-Type": "application/json"}),
        "400 no idempotency key": client.post_json("/v1/emissions/logistics", logistics_body(),
                                                   headers=with_key, status=400),
        "409": post_calculation(client, acme, idempotency_key="headers", status=409, external_reference="other"),
        "413": client.post("/v1/emissions/logistics", b"{" + b" " * 70_000 + b"}", status=413,
                           headers={**acme.headers("big"), "Content-Type": "application/json"}),
        "422": post_calculation(client, acme, idempotency_key="invalid", status=422, mode="TRAIN"),
    }
    set_org(acme.org, test_capacity=0)
    responses["429 capacity"] = post_calculation(client, acme, idempotency_key="over", status=429)
    return responses


def assert_api_headers(name: str, response) -> None:
    headers = response.headers
    assert UUID.match(headers.get("X-Request-Id", "")), name
    assert headers.get("Cache-Control") == "no-store", name
    assert headers.get("X-Content-Type-Options") == "nosniff", name
    assert not [header for header in headers if header.lower().startswith("access-control-")], name
    if response.status_int >= 400:
        assert response.json["error"]["request_id"] == headers["X-Request-Id"], name


def test_every_response_carries_the_request_id_and_the_security_headers(client, acme, secret):
    responses = every_kind_of_response(client, acme, secret)
    for name, response in responses.items():
        assert_api_headers(name, response)
    assert len({response.headers["X-Request-Id"] for response in responses.values()}) == len(responses)
    assert responses["405"].headers["Allow"] == "POST"
    assert responses["preflight"].status_int == 405


def test_a_rate_limited_response_carries_them_too(one_request_a_minute, acme):
    client = one_request_a_minute
    call(client, "get_customer", bearer(acme.key), status=200)
    assert_api_headers("429 rate", call(client, "get_customer", bearer(acme.key), status=429))


def test_no_cors_on_the_wire_even_for_a_preflight(app, acme):
    with LiveServer(app) as server:
        preflight = requests.options(f"{server.url}/v1/calculations/{uuid.uuid4()}", timeout=10, headers={
            "Origin": "https://shop.example", "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "authorization"})
        cross_origin = requests.get(f"{server.url}/v1/customers/cust-1", timeout=10, headers={
            "Origin": "https://shop.example", "Authorization": bearer(acme.key)})
    for response in (preflight, cross_origin):
        assert not [header for header in response.headers if header.lower().startswith("access-control-")]
        assert response.headers["Cache-Control"] == "no-store"
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert UUID.match(response.headers["X-Request-Id"])
    assert preflight.status_code == 405
    assert preflight.json()["error"]["request_id"] == preflight.headers["X-Request-Id"]
    assert cross_origin.status_code == 200
