"""The contract: schemas/openapi.json is valid OpenAPI 3.1, served, the source of validation, and true."""
from __future__ import annotations

import copy
import json
import re

import jsonschema
import pytest
from openapi_spec_validator import validate as validate_openapi
from webtest import TestApp

from emissions import models
from emissions.db import bind
from emissions import schemas
from emissions.app import create_app
from conftest import logistics_body, make_customer, make_factor, make_key, make_org, post_calculation
from helpers import DOCUMENT, check_response, pointer, resolve, response_spec, schema_validator, serving_document


# --- the document itself ---------------------------------------------------------------------------

def test_the_document_is_valid_openapi_3_1():
    assert DOCUMENT["openapi"] == "3.1.0"
    validate_openapi(copy.deepcopy(DOCUMENT))


def test_every_component_schema_is_a_valid_json_schema():
    for name, schema in DOCUMENT["components"]["schemas"].items():
        jsonschema.Draft202012Validator.check_schema(schema)


def test_the_document_has_the_four_operations_the_webhook_and_every_error_code():
    operations = {operation["operationId"] for path in DOCUMENT["paths"].values() for operation in path.values()}
    assert {"calculateLogisticsEmissions", "getCalculation", "getCustomer", "getCustomerEmissions"} <= operations
    assert DOCUMENT["webhooks"]["calculationEvent"]["post"]["requestBody"]["content"]["application/json"]
    codes = DOCUMENT["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["code"]["enum"]
    assert set(codes) == {
        "INVALID_API_KEY", "API_KEY_REVOKED", "API_KEY_EXPIRED", "INSUFFICIENT_SCOPE", "FEATURE_NOT_ENTITLED",
        "ORGANIZATION_NOT_ACTIVE", "CUSTOMER_NOT_FOUND", "CUSTOMER_ACCESS_DENIED", "INVALID_REQUEST",
        "IDEMPOTENCY_KEY_REQUIRED", "IDEMPOTENCY_KEY_REUSED", "FACTOR_NOT_FOUND", "CALCULATION_FAILED",
        "USAGE_LIMIT_REACHED", "RATE_LIMITED", "INTERNAL_ERROR", "ALREADY_VOIDED", "SHIPMENT_LEG"}


@pytest.mark.parametrize("path, method, statuses", [
    ("/emissions/logistics", "post", {201, 200, 400, 401, 403, 404, 409, 422, 429}),
    ("/calculations", "get", {200, 400, 401, 403, 429}),
    ("/calculations/{id}", "get", {200, 400, 401, 403, 404, 429}),
    ("/customers/{customerReference}", "get", {200, 400, 401, 403, 404, 429}),
    ("/customers/{customerReference}/emissions", "get", {200, 400, 401, 403, 404, 429}),
])
def test_each_operation_declares_the_statuses_of_the_spec(path, method, statuses):
    responses = DOCUMENT["paths"][path][method]["responses"]
    assert statuses <= {int(status) for status in responses}
    assert "Retry-After" in resolve(responses["429"])[0]["headers"]
    for status in responses:
        assert "X-Request-Id" in resolve(responses[status])[0]["headers"], (path, status)


def test_every_api_route_of_the_app_is_in_the_document(app):
    documented = {(re.sub(r"\{[^}]+\}", "{}", path), method.upper())
                  for path, operations in DOCUMENT["paths"].items() for method in operations}
    served = {(re.sub(r"<[^>]+>", "{}", route.rule.removeprefix("/v1")), route.method)
              for route in app.routes if route.rule.startswith("/v1/")}
    assert served <= documented, served - documented
    assert DOCUMENT["servers"][0]["url"].endswith("/v1")


# --- served, and the one source of validation ------------------------------------------------------

def test_the_document_is_served_without_authentication(client):
    response = client.get("/v1/openapi.json", status=200)
    assert response.content_type == "application/json"
    assert response.json == DOCUMENT
    assert response.body == schemas.OPENAPI_PATH.read_bytes()
    assert response.headers["X-Request-Id"]
    assert not [name for name in response.headers if name.lower().startswith("access-control-")]


def test_the_request_validator_points_into_the_document():
    assert schemas.validator("LogisticsRequest").schema == {
        "$ref": f"{schemas.DOCUMENT_URI}#/components/schemas/LogisticsRequest"}


@pytest.fixture
def edited_document(tmp_path, monkeypatch):
    """The service reading an edited copy of the document: cargo at most 5 t, codes at most 3 characters."""
    document = copy.deepcopy(DOCUMENT)
    request = document["components"]["schemas"]["LogisticsRequest"]["properties"]
    request["cargo"]["properties"]["value"]["maximum"] = 5
    document["components"]["schemas"]["Place"]["properties"]["code"]["maxLength"] = 3
    with serving_document(document, tmp_path, monkeypatch):
        yield document


def test_validation_follows_an_edit_of_the_document(client, acme, edited_document):
    response = post_calculation(client, acme, status=422)
    assert response.json["error"]["details"] == [
        {"field": "cargo.value", "message": "must be at most 5"},
        {"field": "origin.code", "message": "must be at most 3 characters"},
    ]
    assert client.get("/v1/openapi.json").json == edited_document
    post_calculation(client, acme, status=201, cargo={"value": 5, "unit": "tonne"}, origin={"code": "LON"})


# --- real responses match the document --------------------------------------------------------------

POST = ("/emissions/logistics", "post")
GET_CALCULATION = ("/calculations/{id}", "get")
GET_CUSTOMER = ("/customers/{customerReference}", "get")
GET_EMISSIONS = ("/customers/{customerReference}/emissions", "get")
LIST = ("/calculations", "get")


def test_the_response_checker_rejects_what_the_document_does_not_allow(client, acme):
    response = post_calculation(client, acme, status=201)
    check_response(response, *POST)
    _check_body(response.json, *POST, 201)
    body = response.json
    del body["factor"]
    with pytest.raises(AssertionError):
        _check_body(body, *POST, 201)
    body = response.json
    body["factor"]["value"] = 0.12522  # the lineage must not carry the value
    with pytest.raises(AssertionError):
        _check_body(body, *POST, 201)
    response.headers["Idempotent-Replayed"] = "maybe"
    with pytest.raises(AssertionError):
        check_response(response, *POST)


def _check_body(body: dict, path: str, method: str, status: int) -> None:
    location, _ = response_spec(path, method, status)
    errors = list(schema_validator(location + pointer("content", "application/json", "schema")).iter_errors(body))
    assert not errors


@pytest.mark.on_both
def test_successful_responses_match_the_document(client, acme):
    created = post_calculation(client, acme, status=201)
    check_response(created, *POST)
    check_response(post_calculation(client, acme, status=200), *POST)
    downstream = post_calculation(client, acme, "idem-2", status=201, business_context="downstream",
                                  origin={"code": "GBLON", "label": "London", "country": "GB"})
    check_response(downstream, *POST)
    check_response(client.get(f"/v1/calculations/{created.json['id']}", headers=acme.headers()), *GET_CALCULATION)
    check_response(client.get("/v1/customers/cust-1", headers=acme.headers()), *GET_CUSTOMER)
    emissions = client.get("/v1/customers/cust-1/emissions", headers=acme.headers())
    assert emissions.json["analytics"]["calculation_count"] == 2
    check_response(emissions, *GET_EMISSIONS)
    for query in ("from=2026-03-01&to=2026-03-31", "from=2026-04-01", "to=2026-02-28"):
        check_response(client.get(f"/v1/customers/cust-1/emissions?{query}", headers=acme.headers()), *GET_EMISSIONS)
    listed = client.get("/v1/calculations?limit=1", headers=acme.headers())
    assert listed.json["has_more"] is True
    check_response(listed, *LIST)
    check_response(client.get("/v1/calculations?mode=AIR", headers=acme.headers()), *LIST)
    make_customer(acme.org, "quiet", country_code="DE")
    check_response(client.get("/v1/customers/quiet/emissions", headers=acme.headers()), *GET_EMISSIONS)
    check_response(client.get("/v1/customers/quiet", headers=acme.headers()), *GET_CUSTOMER)


@pytest.mark.on_both
def test_answers_with_ttw_and_wtt_parts_match_the_document(client, acme):
    make_factor("parts", mode="AIR", value=None, ttw_value="0.89939", wtt_value="0.13516", radiative_forcing=True)
    created = post_calculation(client, acme, status=201, mode="AIR", factor_reference="parts")
    assert set(created.json["emissions"]["breakdown"]) == {"ttw", "wtt"}
    assert created.json["factor"]["radiative_forcing"] is True
    check_response(created, *POST)
    check_response(client.get(f"/v1/calculations/{created.json['id']}", headers=acme.headers()), *GET_CALCULATION)
    post_calculation(client, acme, "idem-2", status=201, external_reference="without-parts")
    emissions = client.get("/v1/customers/cust-1/emissions", headers=acme.headers())
    assert set(emissions.json["analytics"]["emissions"]["breakdown"]) == {"ttw", "wtt", "unattributed"}
    check_response(emissions, *GET_EMISSIONS)
    event = models.WebhookEvent.get(models.WebhookEvent.type == "calculation.succeeded")
    webhook = DOCUMENT["webhooks"]["calculationEvent"]["post"]["requestBody"]["content"]["application/json"]
    assert webhook["schema"] == {"$ref": "#/components/schemas/WebhookEvent"}
    assert not list(schema_validator("/components/schemas/WebhookEvent").iter_errors(json.loads(event.payload)))
    body = created.json
    body["emissions"]["breakdown"]["rf"] = 1  # the document allows no other part
    with pytest.raises(AssertionError):
        _check_body(body, *POST, 201)


@pytest.mark.on_both
def test_error_responses_match_the_document(client, acme, globex, secret):
    json_headers = {**acme.headers("idem-e"), "Content-Type": "application/json"}
    reader = {"Authorization": "Bearer " + make_key(acme.org, secret, scopes=["emissions:read"])}
    post = client.post
    cases = [
        (post("/v1/emissions/logistics", b"not json", headers=json_headers, status="*"), 400, POST),
        (client.post_json("/v1/emissions/logistics", logistics_body(), headers=acme.headers(), status="*"), 400, POST),
        (post_calculation(client, acme, customer_reference="nobody"), 404, POST),
        (post_calculation(client, acme, factor_reference="nothing"), 404, POST),
        (post_calculation(client, acme, mode="BIKE"), 422, POST),
        (post_calculation(client, acme, mode="AIR"), 422, POST),  # CALCULATION_FAILED
        (post("/v1/emissions/logistics", b" " * 70_000, headers=json_headers, status="*"), 413, POST),
        (client.post_json("/v1/emissions/logistics", logistics_body(), status="*"), 401, POST),
        (client.post_json("/v1/emissions/logistics", logistics_body(), headers={**reader, "Idempotency-Key": "x"},
                          status="*"), 403, POST),
        (client.get("/v1/calculations/not-a-uuid", headers=acme.headers(), status="*"), 404, GET_CALCULATION),
        (client.get("/v1/calculations/not-a-uuid", headers={"Authorization": "Bearer nope"}, status="*"), 401,
         GET_CALCULATION),
        (client.get("/v1/customers/nobody", headers=acme.headers(), status="*"), 404, GET_CUSTOMER),
        (client.get("/v1/customers/cust-1", headers=reader, status="*"), 403, GET_CUSTOMER),
        (client.get("/v1/customers/cust-1/emissions", headers=reader, status="*"), 403, GET_EMISSIONS),
        (client.get("/v1/customers/bad%20ref/emissions", headers=acme.headers(), status="*"), 404, GET_EMISSIONS),
        (client.get("/v1/customers/cust-1/emissions?period=2026-10", headers=acme.headers(), status="*"), 400,
         GET_EMISSIONS),
        (client.get("/v1/customers/cust-1?x=1", headers=acme.headers(), status="*"), 400, GET_CUSTOMER),
        (client.get("/v1/calculations?limit=0", headers=acme.headers(), status="*"), 400, LIST),
        (client.get("/v1/calculations", headers={"Authorization": "Bearer nope"}, status="*"), 401, LIST),
        (client.get("/v1/calculations", headers={"Authorization": "Bearer " + make_key(
            acme.org, secret, scopes=["customers:read"])}, status="*"), 403, LIST),
        (client.get("/v1/calculations/not-a-uuid?x=1", headers=acme.headers(), status="*"), 400, GET_CALCULATION),
    ]
    make_customer(acme.org, "paused", status="suspended")
    cases.append((post_calculation(client, acme, customer_reference="paused"), 403, POST))
    post_calculation(client, acme, "bound", status=201)
    cases.append((post_calculation(client, acme, "bound", mode="SEA"), 409, POST))
    for response, status, (path, method) in cases:
        assert response.status_int == status, (path, response.body)
        check_response(response, path, method)
    assert {response.json["error"]["code"] for response, *_ in cases} >= {
        "INVALID_REQUEST", "IDEMPOTENCY_KEY_REQUIRED", "CUSTOMER_NOT_FOUND", "FACTOR_NOT_FOUND",
        "CALCULATION_FAILED", "INVALID_API_KEY", "INSUFFICIENT_SCOPE", "CUSTOMER_ACCESS_DENIED",
        "IDEMPOTENCY_KEY_REUSED"}


def test_429_responses_match_the_document(config, acme):
    limited = TestApp(create_app(config.with_(rate_limit_per_second=0.001, rate_limit_burst=1)))
    assert limited.get("/v1/calculations/not-a-uuid", headers=acme.headers(), status=404)
    response = limited.get("/v1/calculations/not-a-uuid", headers=acme.headers(), status=429)
    assert response.json["error"]["code"] == "RATE_LIMITED"
    check_response(response, *GET_CALCULATION)
    response = limited.get("/v1/customers/cust-1", headers=acme.headers(), status=429)
    check_response(response, *GET_CUSTOMER)


def test_a_used_up_capacity_429_matches_the_document(client, acme, secret):
    org = make_org("full", test_capacity=0)
    make_customer(org)
    key = make_key(org, secret)
    response = client.post_json("/v1/emissions/logistics", logistics_body(), status=429,
                                headers={"Authorization": f"Bearer {key}", "Idempotency-Key": "idem-1"})
    assert response.json["error"]["code"] == "USAGE_LIMIT_REACHED"
    check_response(response, *POST)


def test_a_database_outage_is_a_503_that_matches_the_document(client, acme, tmp_path):
    bind(f"sqlite:///{tmp_path / 'missing' / 'gone.sqlite3'}")
    response = client.get("/v1/calculations/00000000-0000-4000-8000-000000000000", headers=acme.headers(),
                          status=503)
    assert response.json["error"]["code"] == "INTERNAL_ERROR"
    assert response.headers["Retry-After"] == "5"
    assert "Traceback" not in response.text and "sqlite" not in response.text.lower()
    check_response(response, *GET_CALCULATION)


def test_unknown_routes_and_wrong_methods_answer_with_the_error_schema(client, acme):
    error_schema = schema_validator("/components/schemas/Error")
    for response in [client.get("/v1/nothing-here", status=404),
                     client.get("/v1/emissions/logistics", headers=acme.headers(), status=405),
                     client.delete("/v1/calculations/x", headers=acme.headers(), status=405)]:
        error_schema.validate(response.json)
        assert response.json["error"]["request_id"] == response.headers["X-Request-Id"]
    assert client.get("/v1/emissions/logistics", status=405).headers["Allow"] == "POST"
    # A GET route answers HEAD too, and says so.
    assert client.delete("/v1/calculations/x", status=405).headers["Allow"] == "GET,HEAD"
    assert client.post("/v1/customers/acme-customer", status=405).headers["Allow"] == "GET,HEAD"
    assert client.head("/v1/openapi.json").status_int == 200
