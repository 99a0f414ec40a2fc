"""Idempotency: replay, conflict, what counts as the same payload, key scope, and the race."""
from __future__ import annotations

import json

import pytest

from emissions import auth
from emissions import calculations
from emissions import factors
from emissions import jsoncodec
from emissions import models
from emissions.errors import IdempotencyError
from conftest import (LiveServer, logistics_body, make_customer, make_factor, make_key, make_org, post_calculation,
                      raw_exchange)
from helpers import race

URL = "/v1/emissions/logistics"


@pytest.fixture(params=["remembered", "looked-up"])
def config(config, request):
    """Every test twice: as served, where the process remembers the calculations it made, and with
    nothing remembered, as when another instance made them: every replay then reads the database."""
    return config.with_(calculation_cache_size=10_000 if request.param == "remembered" else 0)


def post_text(client, persona, text: str, key: str = "idem-1"):
    headers = {**persona.headers(key), "Content-Type": "application/json"}
    return client.post(URL, text.encode(), headers=headers, status="*")


def counts() -> dict:
    """What a calculation writes: the row, the bill, the rollup and the event."""
    return {
        "calculations": models.Calculation.select().count(),
        "billed": sum(row.count for row in models.UsageCounter.select()),
        "rolled_up": sum(row.calculation_count for row in models.CustomerRollup.select()),
        "events": models.WebhookEvent.select().where(models.WebhookEvent.type == "calculation.succeeded").count(),
    }


ONE = {"calculations": 1, "billed": 1, "rolled_up": 1, "events": 1}


# --- replay -----------------------------------------------------------------------------------------

@pytest.mark.on_both
def test_a_replay_returns_200_with_the_original_body_and_writes_nothing(client, acme):
    first = post_calculation(client, acme, status=201)
    again = post_calculation(client, acme, status=200)
    third = post_calculation(client, acme, status=200)
    assert again.body == first.body == third.body
    assert first.headers["Idempotent-Replayed"] == "false"
    assert again.headers["Idempotent-Replayed"] == third.headers["Idempotent-Replayed"] == "true"
    assert again.headers["X-Request-Id"] != first.headers["X-Request-Id"]
    assert counts() == ONE


@pytest.mark.on_both
def test_a_replay_still_answers_after_the_factor_is_retired_and_the_customer_suspended(client, acme):
    first = post_calculation(client, acme, status=201)
    factors.retire("road-default", actor="test")
    models.Customer.update(status="suspended").where(models.Customer.id == acme.customer.id).execute()
    assert post_calculation(client, acme, status=200).body == first.body


# --- conflict -----------------------------------------------------------------------------------------

MATERIAL_CHANGES = {
    "cargo value": {"cargo": {"value": 12.6, "unit": "tonne"}},
    "distance value": {"distance": {"value": 321, "unit": "km"}},
    "mode": {"mode": "SEA"},
    "external reference": {"external_reference": "shipment-2"},
    "customer": {"customer_reference": "cust-2"},
    "factor": {"factor_reference": "road-other"},
    "activity date": {"activity_date": "2026-03-02"},
    "business context": {"business_context": "downstream"},
    "origin label added": {"origin": {"code": "GBLON", "country": "GB", "label": "London"}},
    "destination changed": {"destination": {"label": "Leeds"}},
}


@pytest.mark.on_both
@pytest.mark.parametrize("change", MATERIAL_CHANGES.values(), ids=MATERIAL_CHANGES.keys())
def test_the_same_key_with_a_different_payload_is_409_and_the_original_stays(client, acme, change):
    first = post_calculation(client, acme, status=201)
    response = post_calculation(client, acme, **change)
    assert response.status_int == 409
    error = response.json["error"]
    assert error["code"] == "IDEMPOTENCY_KEY_REUSED"
    assert error["request_id"] == response.headers["X-Request-Id"]
    assert "Idempotent-Replayed" not in response.headers
    assert post_calculation(client, acme, status=200).body == first.body
    assert counts() == ONE


# --- what counts as the same payload -----------------------------------------------------------------

SAME_PAYLOAD = {
    "reversed key order": json.dumps(dict(reversed(list(logistics_body().items())))),
    "pretty printed": json.dumps(logistics_body(), indent=4),
    "twelve point five as 12.50": json.dumps(logistics_body()).replace("12.5", "12.50"),
    "320 as 320.0": json.dumps(logistics_body()).replace("320", "320.0"),
    "320 as 3.2e2": json.dumps(logistics_body()).replace("320", "3.2e2"),
    "320 as 32E+1": json.dumps(logistics_body()).replace("320", "32E+1"),
    "explicit upstream": json.dumps(logistics_body(business_context="upstream")),
    "nested key order": json.dumps(logistics_body(origin={"country": "GB", "code": "GBLON"},
                                                  cargo={"unit": "tonne", "value": 12.5})),
    "escaped characters": json.dumps(logistics_body()).replace("Manchester", "Manch\\u0065ster"),
}


@pytest.mark.on_both
@pytest.mark.parametrize("text", SAME_PAYLOAD.values(), ids=SAME_PAYLOAD.keys())
def test_the_same_data_written_differently_is_the_same_payload(client, acme, text):
    first = post_text(client, acme, json.dumps(logistics_body()))
    assert first.status_int == 201
    again = post_text(client, acme, text)
    assert again.status_int == 200, again.body
    assert again.body == first.body
    assert counts() == ONE


def test_twelve_and_twelve_point_zero_are_the_same_payload(client, acme):
    first = post_text(client, acme, json.dumps(logistics_body(cargo={"value": 12, "unit": "tonne"})))
    again = post_text(client, acme, json.dumps(logistics_body(cargo={"value": 12.0, "unit": "tonne"})))
    assert (first.status_int, again.status_int) == (201, 200)
    assert again.body == first.body


def test_an_invalid_body_with_a_bound_key_is_still_a_validation_error(client, acme):
    post_calculation(client, acme, status=201)
    response = post_calculation(client, acme, mode="BIKE")
    assert (response.status_int, response.json["error"]["code"]) == (422, "INVALID_REQUEST")


# --- failures do not bind the key --------------------------------------------------------------------

@pytest.mark.on_both
def test_a_request_that_failed_does_not_bind_its_key(client, acme):
    # 404 customer, 404 factor, 422 schema, 422 calculation failed: each may be retried with the same key
    assert post_calculation(client, acme, customer_reference="later").status_int == 404
    assert post_calculation(client, acme, factor_reference="later-factor").status_int == 404
    assert post_calculation(client, acme, cargo={"value": 0, "unit": "tonne"}).status_int == 422
    assert post_calculation(client, acme, mode="AIR").status_int == 422  # road-default is a ROAD factor
    assert counts()["calculations"] == 0
    make_customer(acme.org, "later")
    make_factor("later-factor", value="0.1")
    created = post_calculation(client, acme, status=201, customer_reference="later", factor_reference="later-factor")
    assert created.json["customer"] == {"reference": "later"}
    assert post_calculation(client, acme, status=200, customer_reference="later",
                            factor_reference="later-factor").body == created.body


def test_a_suspended_customer_does_not_bind_the_key(client, acme):
    make_customer(acme.org, "paused", status="suspended")
    assert post_calculation(client, acme, customer_reference="paused").status_int == 403
    models.Customer.update(status="active").where(models.Customer.reference == "paused").execute()
    post_calculation(client, acme, customer_reference="paused", status=201)


# --- key scope: organization + environment -----------------------------------------------------------

@pytest.mark.on_both
def test_another_key_of_the_same_organization_and_environment_replays(client, acme, secret):
    first = post_calculation(client, acme, status=201)
    second_key = make_key(acme.org, secret, scopes=["emissions:calculate"])
    response = client.post_json(URL, logistics_body(), status=200,
                                headers={"Authorization": f"Bearer {second_key}", "Idempotency-Key": "idem-1"})
    assert response.body == first.body
    assert response.headers["Idempotent-Replayed"] == "true"


@pytest.mark.on_both
def test_the_same_idempotency_key_in_live_or_another_org_creates_its_own_calculation(client, acme, globex, secret):
    first = post_calculation(client, acme, status=201)
    live_key = make_key(acme.org, secret, environment="live")
    make_customer(acme.org, "cust-1", environment="live")
    live = client.post_json(URL, logistics_body(), status=201,
                            headers={"Authorization": f"Bearer {live_key}", "Idempotency-Key": "idem-1"})
    other = post_calculation(client, globex, status=201)
    ids = {first.json["id"], live.json["id"], other.json["id"]}
    assert len(ids) == 3
    assert (live.json["environment"], other.json["environment"]) == ("live", "test")
    # each replays its own
    assert client.post_json(URL, logistics_body(), status=200, headers={
        "Authorization": f"Bearer {live_key}", "Idempotency-Key": "idem-1"}).body == live.body
    assert post_calculation(client, globex, status=200).body == other.body
    assert post_calculation(client, acme, status=200).body == first.body


def test_a_different_payload_under_the_same_key_in_another_org_is_not_a_conflict(client, acme, secret):
    other = make_org("initech")
    make_customer(other, "cust-9")
    key = make_key(other, secret)
    post_calculation(client, acme, status=201)
    client.post_json(URL, logistics_body(customer_reference="cust-9"), status=201,
                     headers={"Authorization": f"Bearer {key}", "Idempotency-Key": "idem-1"})


# --- the race, against a real server -----------------------------------------------------------------

N = 16


@pytest.fixture
def wide_server(app):
    """A real server with a thread for every racing request."""
    with LiveServer(app, threads=N) as server:
        yield server


@pytest.mark.on_both
@pytest.mark.parametrize("hold_writes", [False, True], ids=["free", "all-past-the-lookup"])
def test_identical_concurrent_requests_create_exactly_one_calculation(wide_server, acme, hold_writes):
    headers = {**acme.headers("race-1"), "Content-Type": "application/json"}
    body = json.dumps(logistics_body()).encode()
    responses = race(wide_server.url + URL, [(headers, body)] * N, hold_writes)
    statuses = sorted(response.status_code for response in responses)
    assert statuses == [200] * (N - 1) + [201], [r.text for r in responses if r.status_code not in (200, 201)]
    created = next(response for response in responses if response.status_code == 201)
    assert all(response.content == created.content for response in responses)
    assert sorted(response.headers["Idempotent-Replayed"] for response in responses) == ["false"] + ["true"] * (N - 1)
    assert len({response.headers["X-Request-Id"] for response in responses}) == N
    assert counts() == ONE


@pytest.mark.on_both
@pytest.mark.parametrize("hold_writes", [False, True], ids=["free", "all-past-the-lookup"])
def test_concurrent_requests_with_one_key_and_different_payloads_create_one_calculation(wide_server, acme,
                                                                                         hold_writes):
    headers = {**acme.headers("race-2"), "Content-Type": "application/json"}
    bodies = [json.dumps(logistics_body(cargo={"value": 10 + index % 4, "unit": "tonne"})).encode()
              for index in range(12)]
    responses = race(wide_server.url + URL, [(headers, body) for body in bodies], hold_writes)
    assert [r.status_code for r in responses].count(201) == 1
    winner = next(index for index, response in enumerate(responses) if response.status_code == 201)
    for body, response in zip(bodies, responses):
        if body == bodies[winner]:
            assert response.status_code in (200, 201)
            assert response.content == responses[winner].content
        else:
            assert response.status_code == 409, response.text
            assert response.json()["error"]["code"] == "IDEMPOTENCY_KEY_REUSED"
    assert counts() == ONE


@pytest.mark.on_both
def test_concurrent_requests_with_different_keys_each_create_one(live_server, acme):
    body = json.dumps(logistics_body()).encode()
    responses = race(live_server.url + URL, [({**acme.headers(f"race-{index}"), "Content-Type": "application/json"},
                                              body) for index in range(8)])
    assert [response.status_code for response in responses] == [201] * 8
    assert len({response.json()["id"] for response in responses}) == 8
    assert counts() == {"calculations": 8, "billed": 8, "rolled_up": 8, "events": 8}


@pytest.mark.on_both
def test_calculate_is_a_domain_function_the_api_and_tools_call_alike(app, acme, secret):
    principal = auth.KeyStore(secret, 0).lookup(acme.key)
    payload = jsoncodec.loads(json.dumps(logistics_body()))
    created = calculations.calculate(principal, payload, "domain-key")
    replayed = calculations.calculate(principal, payload, "domain-key")
    assert (created.replayed, replayed.replayed, replayed.body) == (False, True, created.body)
    assert calculations.get(principal, created.calculation_id) == created.body
    with pytest.raises(IdempotencyError):
        calculations.calculate(principal, {**payload, "external_reference": "other"}, "domain-key")


def test_two_idempotency_key_headers_are_a_400_not_one_joined_key(live_server, acme):
    body = json.dumps(logistics_body()).encode()
    request = (f"POST /v1/emissions/logistics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
               f"Authorization: Bearer {acme.key}\r\nContent-Type: application/json\r\n"
               f"Idempotency-Key: a\r\nidempotency-key: b\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
    status, _, answer = raw_exchange(live_server, request)
    assert status == 400
    assert json.loads(answer)["error"]["code"] == "INVALID_REQUEST"
    assert "one Idempotency-Key" in json.loads(answer)["error"]["message"]
    one = request.replace(b"idempotency-key: b\r\n", b"")
    assert raw_exchange(live_server, one)[0] == 201
    # A single key that holds ", " is still one key.
    assert raw_exchange(live_server, one.replace(b"Idempotency-Key: a", b"Idempotency-Key: a, b"))[0] == 201
