"""POST /v1/emissions/logistics and GET /v1/calculations/{id}: arithmetic, methodology, lineage, resolution."""
from __future__ import annotations

import datetime as dt
import json
import uuid
from decimal import Decimal
from fractions import Fraction

import pytest

from emissions import factors
from emissions import models
from conftest import logistics_body, make_customer, make_factor, make_key, make_org, post_calculation, raw_exchange

URL = "/v1/emissions/logistics"


def exact(response) -> dict:
    """The response body with numbers parsed exactly."""
    return json.loads(response.body, parse_float=Decimal, parse_int=Decimal)


def half_even_6(value: Fraction) -> Fraction:
    """Round to 6 decimal places, ties to even: an independent reference for the service's rounding."""
    scaled = value * 10**6
    whole = scaled.numerator // scaled.denominator
    remainder = scaled - whole
    if remainder > Fraction(1, 2) or (remainder == Fraction(1, 2) and whole % 2 == 1):
        whole += 1
    return Fraction(whole, 10**6)


def expected_values(cargo: str, distance: str, factor: str) -> tuple[Fraction, Fraction]:
    activity = half_even_6(Fraction(cargo) * Fraction(distance))
    return activity, half_even_6(activity * Fraction(factor))


def post_raw_numbers(client, persona, cargo: str, distance: str, key: str = "idem-1", **overrides):
    """POST with cargo and distance written exactly as given (no float in between)."""
    raw = json.dumps(logistics_body(**overrides)).replace('"value": 12.5', f'"value": {cargo}')
    raw = raw.replace('"value": 320', f'"value": {distance}')
    headers = {**persona.headers(key), "Content-Type": "application/json"}
    return client.post(URL, raw.encode(), headers=headers, status="*")


def error_without_request_id(response) -> tuple[int, dict]:
    error = dict(response.json["error"])
    assert error.pop("request_id") == response.headers["X-Request-Id"]
    return response.status_int, error


# --- arithmetic ------------------------------------------------------------------------------------

ARITHMETIC = [
    # (cargo t, distance km, factor kgCO2e/tkm, hand-computed tkm, hand-computed kgCO2e)
    ("12.5", "320", "0.12522", "4000", "500.88"),
    ("0.1", "0.2", "1", "0.02", "0.02"),
    ("0.0000005", "2", "1", "0.000001", "0.000001"),     # no tie: 0.000001 exactly (a tie to 0 is a 422, below)
    ("0.0000015", "1", "1", "0.000002", "0.000002"),     # tie rounds to even 2
    ("0.0000025", "1", "1", "0.000002", "0.000002"),     # tie rounds to even 2, not up to 3
    ("0.0000035", "1", "1", "0.000004", "0.000004"),
    ("1", "1", "0.0000025", "1", "0.000002"),            # the emissions rounding is half-even too
    ("1", "1", "0.0000035", "1", "0.000004"),
    ("1.0000004", "1", "10", "1", "10"),                 # emissions come from the rounded tkm, not 10.000004
    ("3", "0.3333335", "3", "1.000000", "3"),            # 1.0000005 -> 1.000000 (even), then x 3
    ("10000000", "1000000", "0.5", "10000000000000", "5000000000000"),
    ("7.123456789", "13.987654321", "0.0217", "99.640451", "2.162198"),  # 99.640451135..., 2.16219778...,
]


@pytest.mark.on_both
@pytest.mark.parametrize("cargo, distance, factor, tkm, kg", ARITHMETIC)
def test_activity_and_emissions_are_exact_decimals_rounded_half_even(client, acme, cargo, distance, factor, tkm, kg):
    make_factor("arith", value=factor)
    response = post_raw_numbers(client, acme, cargo, distance, factor_reference="arith")
    assert response.status_int == 201, response.body
    body = exact(response)
    activity, emissions = expected_values(cargo, distance, factor)
    assert (activity, emissions) == (Fraction(tkm), Fraction(kg))  # the hand computation agrees
    assert Fraction(body["activity"]["value"]) == activity
    assert Fraction(body["emissions"]["value"]) == emissions
    row = models.Calculation.get_by_id(body["id"])
    assert (Fraction(row.activity_tkm), Fraction(row.emissions_kg)) == (activity, emissions)
    assert (row.cargo_tonnes, row.distance_km) == (Decimal(cargo), Decimal(distance))
    assert row.factor_value == Decimal(factor)


def test_a_product_with_more_than_60_digits_is_rounded_once(client, acme):
    cargo = "1.000001" + "4" + "9" * 70  # just below the 1.0000015 tie
    response = post_raw_numbers(client, acme, cargo, "1", factor_reference="road-default")
    assert response.status_int == 201
    assert Fraction(exact(response)["activity"]["value"]) == Fraction("1.000001")


def test_numbers_are_written_without_trailing_zeros_or_exponents(client, acme):
    response = post_calculation(client, acme, status=201)
    assert b'"activity":{"value":4000,"unit":"tkm"}' in response.body
    assert b'"emissions":{"value":500.88,"unit":"kgCO2e"}' in response.body
    assert b'"cargo":{"value":12.5,"unit":"tonne"}' in response.body
    assert b'"distance":{"value":320,"unit":"km"}' in response.body


def test_twelve_and_twelve_point_zero_give_the_same_numbers(client, acme):
    first = exact(post_raw_numbers(client, acme, "12", "320", key="a"))
    second = exact(post_raw_numbers(client, acme, "12.000", "320.0", key="b"))
    assert first["activity"] == second["activity"] and first["emissions"] == second["emissions"]


# --- the response body -----------------------------------------------------------------------------

@pytest.mark.on_both
def test_the_created_calculation_has_the_documented_body(client, acme):
    response = post_calculation(client, acme, status=201)
    body = response.json
    created_at = dt.datetime.fromisoformat(body.pop("created_at").replace("Z", "+00:00"))
    assert abs(created_at - dt.datetime.now(dt.timezone.utc)) < dt.timedelta(minutes=5)
    calculation_id = body.pop("id")
    assert str(uuid.UUID(calculation_id)) == calculation_id
    assert body == {
        "external_reference": "shipment-1",
        "status": "succeeded",
        "environment": "test",
        "customer": {"reference": "cust-1"},
        "mode": "ROAD",
        "activity_date": "2026-03-01",
        "origin": {"code": "GBLON", "country": "GB"},
        "destination": {"label": "Manchester"},
        "cargo": {"value": 12.5, "unit": "tonne"},
        "distance": {"value": 320, "unit": "km"},
        "activity": {"value": 4000, "unit": "tkm"},
        "emissions": {"value": 500.88, "unit": "kgCO2e"},
        "methodology": {"standard": "ISO 14083:2023", "boundary": "WTW", "business_context": "upstream",
                        "scope3_category": 4},
        "factor": {"reference": "road-default", "version": 1, "name": "Road average", "source": "Test source",
                   "region": None, "mode": "ROAD", "unit": "kgCO2e/tkm", "valid_from": "2025-01-01",
                   "valid_to": None, "radiative_forcing": None},
    }
    assert response.headers["Idempotent-Replayed"] == "false"
    assert response.headers["Content-Type"] == "application/json"


@pytest.mark.parametrize("context, category", [(None, 4), ("upstream", 4), ("downstream", 9)])
def test_methodology_boundary_follows_the_business_context(client, acme, context, category):
    overrides = {} if context is None else {"business_context": context}
    response = post_calculation(client, acme, status=201, **overrides)
    assert response.json["methodology"] == {"standard": "ISO 14083:2023", "boundary": "WTW",
                                            "business_context": context or "upstream", "scope3_category": category}
    assert models.Calculation.get_by_id(response.json["id"]).business_context == (context or "upstream")


# --- factor lineage ----------------------------------------------------------------------------------

LINEAGE_FIELDS = {"reference", "version", "name", "source", "region", "mode", "unit", "valid_from", "valid_to",
                  "radiative_forcing"}


@pytest.mark.on_both
def test_factor_lineage_names_the_version_and_never_the_owner_ids_or_value(client, acme):
    factor = make_factor("acme-sea", mode="SEA", value="0.0161803", name="Container ship", source="GLEC v3.1",
                         region="Global", valid_from=dt.date(2025, 1, 1), valid_to=dt.date(2026, 12, 31),
                         organization=acme.org)
    response = post_calculation(client, acme, status=201, mode="SEA", factor_reference="acme-sea")
    lineage = response.json["factor"]
    assert lineage == {"reference": "acme-sea", "version": 1, "name": "Container ship", "source": "GLEC v3.1",
                       "region": "Global", "mode": "SEA", "unit": "kgCO2e/tkm", "valid_from": "2025-01-01",
                       "valid_to": "2026-12-31", "radiative_forcing": None}
    assert set(lineage) == LINEAGE_FIELDS  # no id, no organization, no value
    assert "0.0161803" not in response.text and "161803" not in response.text  # the value appears nowhere
    assert models.Calculation.get_by_id(response.json["id"]).factor_id == factor.id  # kept internally


# --- factor resolution -------------------------------------------------------------------------------

@pytest.mark.on_both
def test_factor_not_found_is_the_same_404_for_unknown_retired_draft_and_another_orgs_factor(client, acme, globex):
    make_factor("retired-one", value="0.2")
    factors.retire("retired-one", actor="test")
    make_factor("draft-only", value="0.2", draft=True)
    make_factor("globex-private", value="0.2", organization=globex.org)
    answers = set()
    for number, reference in enumerate(["no-such-factor", "retired-one", "draft-only", "globex-private"]):
        response = post_calculation(client, acme, f"idem-{number}", factor_reference=reference)
        status, error = error_without_request_id(response)
        assert (status, error["code"]) == (404, "FACTOR_NOT_FOUND")
        answers.add(json.dumps(error, sort_keys=True))
    assert len(answers) == 1  # nothing tells the four cases apart
    assert models.Calculation.select().count() == 0


@pytest.mark.on_both
def test_a_private_factor_is_visible_to_its_own_organization(client, acme, globex):
    make_factor("globex-private", value="0.2", organization=globex.org)
    response = post_calculation(client, globex, status=201, factor_reference="globex-private")
    assert response.json["factor"]["reference"] == "globex-private"
    assert response.json["emissions"]["value"] == 800  # 4000 tkm x 0.2


def test_the_active_version_is_used_after_a_new_version_and_after_reactivating_an_old_one(client, acme):
    make_factor(value="0.2")  # version 2 of road-default supersedes version 1
    second = post_calculation(client, acme, "a", status=201).json
    assert (second["factor"]["version"], second["emissions"]["value"]) == (2, 800)
    factors.activate("road-default", 1, actor="test")
    first = post_calculation(client, acme, "b", status=201).json
    assert (first["factor"]["version"], first["emissions"]["value"]) == (1, 500.88)


def test_a_draft_version_does_not_replace_the_active_one(client, acme):
    make_factor(value="0.9", draft=True)
    assert post_calculation(client, acme, status=201).json["factor"]["version"] == 1


@pytest.mark.on_both
@pytest.mark.parametrize("overrides, reason", [
    ({"mode": "SEA"}, "mode"),
    ({"activity_date": "2024-12-31"}, "before"),
    ({"activity_date": "2027-01-01"}, "after"),
])
def test_a_factor_that_does_not_apply_is_422_calculation_failed(client, acme, overrides, reason):
    make_factor("bounded", valid_from=dt.date(2025, 1, 1), valid_to=dt.date(2026, 12, 31))
    response = post_calculation(client, acme, factor_reference="bounded", **overrides)
    status, error = error_without_request_id(response)
    assert (status, error["code"]) == (422, "CALCULATION_FAILED")
    assert reason in error["message"]
    assert models.Calculation.select().count() == 0
    # the key was not bound: the same key with an applicable body succeeds
    post_calculation(client, acme, factor_reference="bounded", status=201)


@pytest.mark.parametrize("date", ["2025-01-01", "2026-12-31"])
def test_validity_boundaries_are_inclusive(client, acme, date):
    make_factor("bounded", valid_from=dt.date(2025, 1, 1), valid_to=dt.date(2026, 12, 31))
    post_calculation(client, acme, factor_reference="bounded", activity_date=date, status=201)


# --- customer resolution -----------------------------------------------------------------------------

@pytest.mark.on_both
def test_customer_not_found_is_the_same_404_for_unknown_other_org_and_other_environment(client, acme, globex):
    make_customer(globex.org, "globex-only")
    make_customer(acme.org, "live-only", environment="live")
    answers = set()
    for number, reference in enumerate(["nobody", "globex-only", "live-only"]):
        response = post_calculation(client, acme, f"idem-{number}", customer_reference=reference)
        status, error = error_without_request_id(response)
        assert (status, error["code"]) == (404, "CUSTOMER_NOT_FOUND")
        answers.add(json.dumps(error, sort_keys=True))
    assert len(answers) == 1
    assert models.Calculation.select().count() == 0


@pytest.mark.on_both
@pytest.mark.parametrize("customer_status", ["suspended", "archived"])
def test_a_customer_that_is_not_active_is_403_customer_access_denied(client, acme, customer_status):
    make_customer(acme.org, "paused", status=customer_status)
    response = post_calculation(client, acme, customer_reference="paused")
    status, error = error_without_request_id(response)
    assert (status, error["code"]) == (403, "CUSTOMER_ACCESS_DENIED")
    assert models.Calculation.select().count() == 0


def test_a_live_key_calculates_for_live_customers_only(client, acme, secret):
    live_key = make_key(acme.org, secret, environment="live")
    make_customer(acme.org, "cust-1", environment="live")
    response = client.post_json(URL, logistics_body(), headers={"Authorization": f"Bearer {live_key}",
                                                                "Idempotency-Key": "idem-1"}, status=201)
    assert response.json["environment"] == "live"
    row = models.Calculation.get_by_id(response.json["id"])
    assert row.environment == "live" and row.customer.environment == "live"


# --- stored calculations never change ----------------------------------------------------------------

@pytest.mark.on_both
def test_a_new_factor_version_or_retirement_does_not_change_a_stored_calculation(client, acme):
    created = post_calculation(client, acme, status=201)
    path = f"/v1/calculations/{created.json['id']}"
    make_factor(value="0.5", name="Road average, revised", source="Revised source")
    assert client.get(path, headers=acme.headers()).body == created.body
    factors.retire("road-default", actor="test")
    assert client.get(path, headers=acme.headers()).body == created.body
    row = models.Calculation.get_by_id(created.json["id"])
    assert (row.factor_version, row.factor_value) == (1, Decimal("0.12522"))


# --- GET /v1/calculations/{id} -----------------------------------------------------------------------

@pytest.mark.on_both
def test_get_returns_the_body_of_the_201_exactly(client, acme):
    created = post_calculation(client, acme, status=201)
    read = client.get(f"/v1/calculations/{created.json['id']}", headers=acme.headers(), status=200)
    assert read.body == created.body
    assert read.headers["X-Request-Id"] != created.headers["X-Request-Id"]
    assert "Idempotent-Replayed" not in read.headers


@pytest.mark.parametrize("spoiled", [b"%FF{id}", b"{id}%FF", b"{id}%0A", b"{id}%0A%0A"],
                         ids=["invalid byte first", "invalid byte last", "final newline", "two newlines"])
def test_an_id_with_invalid_utf8_or_a_newline_is_not_an_alias_of_the_calculation(client, acme, live_server, spoiled):
    created = post_calculation(client, acme, status=201)
    path = b"/v1/calculations/" + spoiled.replace(b"{id}", created.json["id"].encode())
    status, _, body = raw_exchange(live_server, b"GET " + path + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                                                b"Authorization: Bearer " + acme.key.encode() + b"\r\n\r\n")
    assert status == 404, body
    assert json.loads(body)["error"]["message"] == "No calculation with this id exists."


@pytest.mark.on_both
def test_a_calculation_outside_the_keys_organization_or_environment_is_the_same_404(client, acme, globex, secret):
    created = post_calculation(client, acme, status=201)
    path = f"/v1/calculations/{created.json['id']}"
    live_key = make_key(acme.org, secret, environment="live")
    answers = set()
    for headers, calculation_path in [
        (globex.headers(), path),                                   # another organization
        ({"Authorization": f"Bearer {live_key}"}, path),              # the same organization, live
        (acme.headers(), f"/v1/calculations/{uuid.uuid4()}"),         # unknown id
        (acme.headers(), "/v1/calculations/not-a-uuid"),              # not a UUID
        (acme.headers(), path.upper().replace("/V1/CALCULATIONS/", "/v1/calculations/")),  # not canonical
        (acme.headers(), "/v1/calculations/" + "9" * 5000),           # long
        (acme.headers(), "/v1/calculations/%00"),                     # NUL
    ]:
        status, error = error_without_request_id(client.get(calculation_path, headers=headers, status="*"))
        assert (status, error["code"]) == (404, "INVALID_REQUEST")
        answers.add(json.dumps(error, sort_keys=True))
    assert len(answers) == 1
    assert client.get(path, headers=acme.headers(), status=200).body == created.body


def test_another_org_cannot_read_even_with_a_read_only_key(client, acme, secret):
    other = make_org("initech")
    reader = make_key(other, secret, scopes=["emissions:read"])
    created = post_calculation(client, acme, status=201)
    response = client.get(f"/v1/calculations/{created.json['id']}", headers={"Authorization": f"Bearer {reader}"},
                          status=404)
    assert response.json["error"]["code"] == "INVALID_REQUEST"


@pytest.mark.on_both
@pytest.mark.parametrize("cargo, distance, factor_value", [
    ("1.5E-400", "320", None), ("0.0000001", "1", None), ("0.000001", "0.5", None), ("0.0000005", "1", None),
    ("0.001", "0.001", "0.1"),
])
def test_a_calculation_that_would_round_to_zero_is_a_422_with_field_details(client, acme, cargo, distance,
                                                                             factor_value):
    from conftest import make_factor

    reference = "road-default"
    if factor_value is not None:
        make_factor("tiny", value=factor_value)
        reference = "tiny"
    raw = (json.dumps(logistics_body(factor_reference=reference, cargo={"value": 0, "unit": "tonne"},
                                     distance={"value": 0, "unit": "km"}))
           .replace('"cargo": {"value": 0', f'"cargo": {{"value": {cargo}')
           .replace('"distance": {"value": 0', f'"distance": {{"value": {distance}'))
    answer = client.post("/v1/emissions/logistics", raw, status="*",
                         headers={**acme.headers("zero"), "Content-Type": "application/json"})
    assert answer.status_int == 422, answer.text
    error = answer.json["error"]
    assert error["code"] == "INVALID_REQUEST"
    assert [detail["field"] for detail in error["details"]] == ["cargo.value", "distance.value"]
    from emissions.models import Calculation, WebhookEvent

    assert Calculation.select().count() == 0 and WebhookEvent.select().count() == 0
