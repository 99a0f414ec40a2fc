"""POST /v1/emissions/logistics: 400, 413 and 422 with field details, never a 500, never a partial write."""
from __future__ import annotations

import copy
import itertools
import json
import string

import pytest
import requests

from emissions import models
from conftest import logistics_body, make_customer, raw_exchange
from helpers import serving_document

URL = "/v1/emissions/logistics"
DELETE = object()


def changed(path: str, value) -> dict:
    """The valid body with one field (dotted path) replaced, added or, with DELETE, removed."""
    body = copy.deepcopy(logistics_body())
    *parents, name = path.split(".")
    target = body
    for parent in parents:
        target = target[parent]
    if value is DELETE:
        del target[name]
    else:
        target[name] = value
    return body


def calculation_count() -> int:
    return models.Calculation.select().count()


def post_raw(client, persona, raw, content_type="application/json", idempotency_key="idem-1", **headers):
    headers = {**persona.headers(idempotency_key), **headers}
    if content_type is not None:
        headers["Content-Type"] = content_type
    return client.post(URL, raw, headers=headers, status="*", expect_errors=True)


def assert_error(response, status: int, code: str) -> dict:
    """The documented envelope with this status and code; returns error."""
    assert response.status_int == status, response.body
    assert response.content_type == "application/json"
    error = response.json["error"]
    assert error["code"] == code
    assert error["request_id"] == response.headers["X-Request-Id"]
    assert isinstance(error["message"], str) and error["message"]
    assert set(error) <= {"code", "message", "request_id", "details"}
    return error


# --- 422: the schema, field by field ------------------------------------------------------------

REQUIRED = ["customer_reference", "external_reference", "mode", "origin", "destination", "cargo", "distance",
            "activity_date", "factor_reference", "cargo.value", "cargo.unit", "distance.value", "distance.unit"]

SCHEMA_CASES = [
    *[(f"{path} missing", path, DELETE, path, "is required") for path in REQUIRED],
    # types
    ("customer_reference number", "customer_reference", 12, "customer_reference", "must be a string"),
    ("external_reference null", "external_reference", None, "external_reference", "must be a string"),
    ("mode number", "mode", 1, "mode", "must be a string"),
    ("origin string", "origin", "London", "origin", "must be an object"),
    ("destination array", "destination", [], "destination", "must be an object"),
    ("cargo string", "cargo", "12 t", "cargo", "must be an object"),
    ("distance number", "distance", 320, "distance", "must be an object"),
    ("activity_date number", "activity_date", 20260301, "activity_date", "must be a string"),
    ("business_context boolean", "business_context", True, "business_context", "must be a string"),
    ("numeric factor_reference", "factor_reference", 0.1, "factor_reference", "must be a string"),
    ("cargo.value string", "cargo.value", "12.5", "cargo.value", "must be a number"),
    ("cargo.value boolean", "cargo.value", True, "cargo.value", "must be a number"),
    ("distance.value null", "distance.value", None, "distance.value", "must be a number"),
    ("origin.code number", "origin.code", 44, "origin.code", "must be a string"),
    ("destination.label boolean", "destination.label", False, "destination.label", "must be a string"),
    ("origin.country number", "origin.country", 44, "origin.country", "must be a string"),
    # enums and constants
    ("mode lowercase", "mode", "road", "mode", "must be one of ROAD, SEA, AIR"),
    ("mode RAIL", "mode", "RAIL", "mode", "must be one of ROAD, SEA, AIR"),
    ("business_context unknown", "business_context", "sideways", "business_context",
     "must be one of upstream, downstream"),
    ("business_context empty", "business_context", "", "business_context", "must be one of upstream, downstream"),
    ("cargo.unit kg", "cargo.unit", "kg", "cargo.unit", 'must be "tonne"'),
    ("cargo.unit tonnes", "cargo.unit", "tonnes", "cargo.unit", 'must be "tonne"'),
    ("distance.unit mi", "distance.unit", "mi", "distance.unit", 'must be "km"'),
    ("distance.unit KM", "distance.unit", "KM", "distance.unit", 'must be "km"'),
    # bounds
    ("cargo.value zero", "cargo.value", 0, "cargo.value", "must be greater than 0"),
    ("cargo.value negative", "cargo.value", -12.5, "cargo.value", "must be greater than 0"),
    ("cargo.value tiny negative", "cargo.value", -0.000001, "cargo.value", "must be greater than 0"),
    ("distance.value zero", "distance.value", 0.0, "distance.value", "must be greater than 0"),
    ("distance.value negative", "distance.value", -1, "distance.value", "must be greater than 0"),
    ("cargo.value above maximum", "cargo.value", 10_000_001, "cargo.value", "must be at most 10000000"),
    ("distance.value above maximum", "distance.value", 1_000_000.5, "distance.value", "must be at most 1000000"),
    # lengths
    ("customer_reference empty", "customer_reference", "", "customer_reference", "must not be empty"),
    ("customer_reference 121", "customer_reference", "c" * 121, "customer_reference",
     "must be at most 120 characters"),
    ("external_reference empty", "external_reference", "", "external_reference", "must not be empty"),
    ("external_reference 121", "external_reference", "e" * 121, "external_reference",
     "must be at most 120 characters"),
    ("factor_reference empty", "factor_reference", "", "factor_reference", "must not be empty"),
    ("factor_reference 121", "factor_reference", "f" * 121, "factor_reference", "must be at most 120 characters"),
    ("origin.code 21", "origin.code", "C" * 21, "origin.code", "must be at most 20 characters"),
    ("origin.code empty", "origin.code", "", "origin.code", "must not be empty"),
    ("destination.label 201", "destination.label", "L" * 201, "destination.label",
     "must be at most 200 characters"),
    ("origin.country 1", "origin.country", "G", "origin.country", "must be at least 2 characters"),
    ("origin.country 3", "origin.country", "GBR", "origin.country", "must be at most 2 characters"),
    ("destination.country empty", "destination.country", "", "destination.country",
     "must be at least 2 characters"),
    # Place needs code or label
    ("origin empty", "origin", {}, "origin", "needs at least one of code or label"),
    ("origin country only", "origin", {"country": "GB"}, "origin", "needs at least one of code or label"),
    ("destination country only", "destination", {"country": "DE"}, "destination",
     "needs at least one of code or label"),
    # dates
    ("activity_date not a day", "activity_date", "2026-02-30", "activity_date", "must be a calendar date YYYY-MM-DD"),
    ("activity_date day first", "activity_date", "01/03/2026", "activity_date", "must be a calendar date YYYY-MM-DD"),
    ("activity_date compact", "activity_date", "20260301", "activity_date", "must be a calendar date YYYY-MM-DD"),
    ("activity_date with time", "activity_date", "2026-03-01T00:00:00Z", "activity_date",
     "must be a calendar date YYYY-MM-DD"),
    ("activity_date empty", "activity_date", "", "activity_date", "must be a calendar date YYYY-MM-DD"),
    # unknown fields, at the top level and inside every object; no raw factor value slips in
    ("raw factor", "factor", 0.1, "factor", "is not an accepted field"),
    ("raw emission_factor", "emission_factor", 0.1, "emission_factor", "is not an accepted field"),
    ("raw factor_value", "factor_value", "0.1", "factor_value", "is not an accepted field"),
    ("unknown top-level", "note", "hello", "note", "is not an accepted field"),
    ("unknown in origin", "origin.lat", 51.5, "origin.lat", "is not an accepted field"),
    ("unknown in destination", "destination.factor", 0.1, "destination.factor", "is not an accepted field"),
    ("unknown in cargo", "cargo.factor", 0.1, "cargo.factor", "is not an accepted field"),
    ("unknown in distance", "distance.emission_factor", 0.1, "distance.emission_factor",
     "is not an accepted field"),
    # text the databases cannot store
    ("NUL in customer_reference", "customer_reference", "cust\u00001", "customer_reference",
     "must not contain control characters, bidirectional controls or unpaired surrogates"),
    ("NUL in external_reference", "external_reference", "ship\u0000", "external_reference",
     "must not contain control characters, bidirectional controls or unpaired surrogates"),
    ("NUL in origin.label", "origin.label", "Lon\u0000don", "origin.label",
     "must not contain control characters, bidirectional controls or unpaired surrogates"),
    ("lone surrogate in customer_reference", "customer_reference", "\ud800", "customer_reference",
     "must not contain control characters, bidirectional controls or unpaired surrogates"),
    ("lone surrogate in factor_reference", "factor_reference", "road\udfff", "factor_reference",
     "must not contain control characters, bidirectional controls or unpaired surrogates"),
    ("lone surrogate in destination.code", "destination.code", "\udc00X", "destination.code",
     "must not contain control characters, bidirectional controls or unpaired surrogates"),
]


@pytest.mark.parametrize("path, value, field, message",
                         [case[1:] for case in SCHEMA_CASES], ids=[case[0] for case in SCHEMA_CASES])
def test_a_body_breaking_the_schema_is_422_naming_the_field(client, acme, path, value, field, message):
    response = client.post_json(URL, changed(path, value), headers=acme.headers("idem-1"), status="*")
    error = assert_error(response, 422, "INVALID_REQUEST")
    assert {"field": field, "message": message} in error["details"]
    assert field in error["message"]
    assert calculation_count() == 0


@pytest.mark.parametrize("value", ["2026-1-5", "2026-13-01", "26-03-01"])
def test_a_date_breaking_both_its_pattern_and_its_format_is_one_detail(client, acme, value):
    response = client.post_json(URL, changed("activity_date", value), headers=acme.headers("idem-1"), status=422)
    assert response.json["error"]["details"] == [
        {"field": "activity_date", "message": "must be a calendar date YYYY-MM-DD"}]


def test_every_violation_is_listed_sorted_by_field(client, acme):
    body = changed("cargo.value", 0)
    body["mode"] = "BIKE"
    body["origin"] = {"code": "X" * 21, "extra": 1}
    del body["activity_date"]
    response = client.post_json(URL, body, headers=acme.headers("idem-1"), status=422)
    assert response.json["error"]["details"] == [
        {"field": "activity_date", "message": "is required"},
        {"field": "cargo.value", "message": "must be greater than 0"},
        {"field": "mode", "message": "must be one of ROAD, SEA, AIR"},
        {"field": "origin.code", "message": "must be at most 20 characters"},
        {"field": "origin.extra", "message": "is not an accepted field"},
    ]


def test_the_message_names_every_field_its_details_list(client, acme):
    body = changed("cargo.value", 0)
    body.update(mode="BIKE", origin={"code": "X" * 21}, note="x", colour="red")
    del body["activity_date"], body["factor_reference"]
    error = assert_error(client.post_json(URL, body, headers=acme.headers("idem-1"), status="*"), 422,
                         "INVALID_REQUEST")
    fields = [detail["field"] for detail in error["details"]]
    assert fields == ["activity_date", "cargo.value", "colour", "factor_reference", "mode", "note", "origin.code"]
    assert error["message"] == (
        "The request body is invalid in 7 fields, each with its reason in details: activity_date is required; "
        "cargo.value must be greater than 0; colour is not an accepted field; factor_reference is required; "
        "mode must be one of ROAD, SEA, AIR; and note, origin.code.")


def test_a_message_with_five_problems_or_fewer_spells_out_each(client, acme):
    body = changed("mode", "BIKE")
    body["note"] = "x"
    error = client.post_json(URL, body, headers=acme.headers("idem-1"), status=422).json["error"]
    assert error["message"] == "The request body is invalid: mode must be one of ROAD, SEA, AIR; note is not an accepted field."


def test_a_customer_or_factor_not_found_names_the_field_and_the_remedy(client, acme, globex):
    make_customer(acme.org, "acme-only")
    unknown = client.post_json(URL, changed("customer_reference", "nobody"), headers=acme.headers("idem-1"), status=404)
    foreign = client.post_json(URL, changed("customer_reference", "acme-only"), headers=globex.headers("idem-2"),
                               status=404)
    for response in (unknown, foreign):  # the same words for another tenant's customer
        error = assert_error(response, 404, "CUSTOMER_NOT_FOUND")
        assert error["details"] == [{"field": "customer_reference", "message": "names no customer"}]
        assert error["message"] == ("No customer with this customer_reference exists in this environment: create it "
                                    "with `emissions customer create` or in the workspace.")
    error = assert_error(client.post_json(URL, changed("factor_reference", "nothing"), headers=acme.headers("idem-3"),
                                          status=404), 404, "FACTOR_NOT_FOUND")
    assert error["details"] == [{"field": "factor_reference", "message": "names no active factor"}]
    assert error["message"] == ("No active governed factor with this factor_reference is available to this "
                                "organization: list the factors this key may use with `GET /v1/factors`.")


ACCEPTED_EDGES = [
    ("external_reference of 120", "external_reference", "e" * 120),
    ("origin.code of 20", "origin.code", "C" * 20),
    ("destination.label of 200", "destination.label", "L" * 200),
    ("label only", "origin", {"label": "London"}),
    ("code only", "destination", {"code": "DEHAM"}),
    ("code, label and country", "origin", {"code": "GBLON", "label": "London", "country": "GB"}),
    ("cargo at the maximum", "cargo.value", 10_000_000),
    ("distance at the maximum", "distance.value", 1_000_000),
    ("tiny positive cargo", "cargo.value", 0.000001),
    ("downstream", "business_context", "downstream"),
    ("unicode labels", "origin", {"label": "Zürich – 東京 🚚", "country": "CH"}),
    ("unicode external reference", "external_reference", "Sendung-Größe-№1"),
]


@pytest.mark.parametrize("path, value", [case[1:] for case in ACCEPTED_EDGES], ids=[c[0] for c in ACCEPTED_EDGES])
def test_values_at_the_edge_of_the_rules_are_accepted(client, acme, path, value):
    response = client.post_json(URL, changed(path, value), headers=acme.headers("idem-1"), status="*")
    assert response.status_int == 201, response.body
    *parents, name = path.split(".")
    echoed = response.json
    for parent in parents:
        echoed = echoed[parent]
    if path == "business_context":
        echoed = response.json["methodology"]
    assert echoed[name] == value
    assert calculation_count() == 1


def test_a_reference_at_its_maximum_length_passes_validation_and_then_resolves(client, acme):
    response = client.post_json(URL, changed("factor_reference", "f" * 120), headers=acme.headers("idem-1"),
                                status=404)
    assert response.json["error"]["code"] == "FACTOR_NOT_FOUND"
    response = client.post_json(URL, changed("customer_reference", "c" * 120), headers=acme.headers("idem-2"),
                                status=404)
    assert response.json["error"]["code"] == "CUSTOMER_NOT_FOUND"


# --- 400: not JSON, not an object, wrong content type ----------------------------------------------

VALID = json.dumps(logistics_body()).encode()

NOT_A_JSON_OBJECT = {
    "not JSON": b"customer_reference=cust-1",
    "truncated JSON": VALID[:-1],
    "trailing garbage": VALID + b"x",
    "empty body": b"",
    "whitespace only": b"   \n",
    "JSON array": b"[" + VALID + b"]",
    "JSON string": b'"hello"',
    "JSON number": b"12",
    "JSON null": b"null",
    "JSON true": b"true",
    "NaN": VALID.replace(b"12.5", b"NaN"),
    "Infinity": VALID.replace(b"12.5", b"Infinity"),
    "minus Infinity": VALID.replace(b"320", b"-Infinity"),
    "invalid UTF-8": VALID.replace(b"Manchester", b"Manch\xffster"),
    "overlong UTF-8": VALID.replace(b"Manchester", b"Manch\xc0\xafster"),
    "a raw NUL byte in a string": VALID.replace(b"Manchester", b"Man\x00chester"),
    "single quotes": VALID.replace(b'"', b"'"),
    "deep nesting": b"[" * 30_000 + b"]" * 30_000,
    "an exponent beyond any decimal": VALID.replace(b"12.5", b"1e99999999999999999999"),
    "a negative exponent beyond any decimal": VALID.replace(b"12.5", b"1e-99999999999999999999"),
}


@pytest.mark.parametrize("raw", NOT_A_JSON_OBJECT.values(), ids=NOT_A_JSON_OBJECT.keys())
def test_a_body_that_is_not_a_json_object_is_400(client, acme, raw):
    assert len(raw) <= 64 * 1024
    error = assert_error(post_raw(client, acme, raw), 400, "INVALID_REQUEST")
    assert "details" not in error
    assert calculation_count() == 0


DUPLICATE_MEMBERS = {
    # Taking the last value, as Python's parser does, would look up "other-factor" here.
    "top level": (VALID[:-1] + b', "factor_reference": "other-factor"}', "factor_reference"),
    "nested": (VALID.replace(b'"value": 12.5', b'"value": 12.5, "value": 1'), "value"),
    "the same value twice": (VALID.replace(b'"mode": "ROAD"', b'"mode": "ROAD", "mode": "ROAD"'), "mode"),
}


@pytest.mark.parametrize("raw, name", DUPLICATE_MEMBERS.values(), ids=DUPLICATE_MEMBERS.keys())
def test_a_member_named_twice_in_one_object_is_400_and_named(client, acme, raw, name):
    assert raw.count(f'"{name}"'.encode()) >= 2
    error = assert_error(post_raw(client, acme, raw), 400, "INVALID_REQUEST")
    assert error["message"] == f'The request body names the member "{name}" twice in one object.'
    assert calculation_count() == 0


def test_a_long_member_name_named_twice_is_cut_in_the_message(client, acme):
    name = "x" * 5000
    raw = VALID[:-1] + f', "{name}": 1, "{name}": 2}}'.encode()
    error = assert_error(post_raw(client, acme, raw), 400, "INVALID_REQUEST")
    assert error["message"] == f'The request body names the member "{"x" * 100}..." twice in one object.'


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded",
                                          "application/jsonx", "multipart/form-data; boundary=x", "json"])
def test_a_wrong_or_missing_content_type_is_400(client, acme, content_type):
    error = assert_error(post_raw(client, acme, VALID, content_type=content_type), 400, "INVALID_REQUEST")
    assert "Content-Type" in error["message"]
    assert calculation_count() == 0


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "Application/JSON",
                                          "application/json ; charset=UTF-8"])
def test_json_content_types_with_parameters_or_other_case_are_accepted(client, acme, content_type):
    assert post_raw(client, acme, VALID, content_type=content_type).status_int == 201


# --- the Idempotency-Key header ----------------------------------------------------------------

@pytest.mark.parametrize("key", [None, "", "   "], ids=["missing", "empty", "blank"])
def test_a_missing_or_empty_idempotency_key_is_400_idempotency_key_required(client, acme, key):
    headers = {"Authorization": f"Bearer {acme.key}", "Content-Type": "application/json"}
    if key is not None:
        headers["Idempotency-Key"] = key
    response = client.post(URL, VALID, headers=headers, status="*")
    assert_error(response, 400, "IDEMPOTENCY_KEY_REQUIRED")
    assert calculation_count() == 0


def test_an_idempotency_key_over_200_characters_is_400_invalid_request(client, acme):
    response = post_raw(client, acme, VALID, idempotency_key="k" * 201)
    error = assert_error(response, 400, "INVALID_REQUEST")
    assert "Idempotency-Key" in error["message"]
    assert calculation_count() == 0


@pytest.mark.on_both
def test_an_idempotency_key_of_exactly_200_characters_is_accepted_and_replays(client, acme):
    key = "k" * 200
    first = post_raw(client, acme, VALID, idempotency_key=key)
    assert first.status_int == 201
    again = post_raw(client, acme, VALID, idempotency_key=key)
    assert again.status_int == 200 and again.body == first.body


@pytest.mark.on_both
def test_an_idempotency_key_of_200_utf8_characters_is_counted_in_characters(live_server, acme):
    def send(key: str):
        return raw_exchange(live_server, (
            f"POST {URL} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {acme.key}\r\n"
            f"Content-Type: application/json\r\nIdempotency-Key: {key}\r\nContent-Length: {len(VALID)}\r\n"
            "Connection: close\r\n\r\n").encode() + VALID)

    status, _, first = send("é" * 200)
    assert status == 201, first
    status, _, again = send("é" * 200)
    assert status == 200 and again == first
    status, _, body = send("é" * 201)
    assert status == 400 and json.loads(body)["error"]["code"] == "INVALID_REQUEST"


def test_an_idempotency_key_that_is_not_utf8_is_400(client, acme):
    # WebTest sends header text as Latin-1: a lone 0xE9 byte is not UTF-8.
    error = assert_error(post_raw(client, acme, VALID, idempotency_key="caf\u00e9"), 400, "INVALID_REQUEST")
    assert "UTF-8" in error["message"]


@pytest.mark.parametrize("key", ["abc\x00def", "line\nbreak", "tab\there", "bell\x07"])
def test_an_idempotency_key_with_control_characters_is_400(client, acme, key):
    response = client.post(URL, VALID, headers={**acme.headers(), "Content-Type": "application/json"},
                           extra_environ={"HTTP_IDEMPOTENCY_KEY": key}, status="*")
    assert_error(response, 400, "INVALID_REQUEST")
    assert calculation_count() == 0


def test_a_body_error_is_reported_before_a_missing_idempotency_key(client, acme):
    headers = {"Authorization": f"Bearer {acme.key}", "Content-Type": "application/json"}
    assert_error(client.post(URL, b"[]", headers=headers, status="*"), 400, "INVALID_REQUEST")
    response = client.post(URL, json.dumps(changed("mode", "BIKE")), headers=headers, status="*")
    assert_error(response, 400, "IDEMPOTENCY_KEY_REQUIRED")


# --- 413: the 64 KiB limit ---------------------------------------------------------------------

def padded(size: int) -> bytes:
    """The valid body padded with trailing whitespace (still valid JSON) to exactly `size` bytes."""
    return VALID + b" " * (size - len(VALID))


def test_a_body_of_exactly_64_kib_is_accepted(client, acme):
    assert post_raw(client, acme, padded(64 * 1024)).status_int == 201


def test_a_body_one_byte_over_64_kib_is_413(client, acme):
    assert_error(post_raw(client, acme, padded(64 * 1024 + 1)), 413, "INVALID_REQUEST")
    assert calculation_count() == 0


def test_a_large_body_is_413_even_when_it_is_not_json(client, acme):
    assert_error(post_raw(client, acme, b"x" * 1_000_000, content_type="text/plain"), 413, "INVALID_REQUEST")


def test_a_large_body_is_413_through_a_real_server_with_content_length(live_server, acme):
    response = requests.post(live_server.url + URL, data=padded(100_000), timeout=10,
                             headers={**acme.headers("idem-1"), "Content-Type": "application/json"})
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "INVALID_REQUEST"
    assert response.json()["error"]["request_id"] == response.headers["X-Request-Id"]


def chunks(data: bytes, size: int = 8192):
    for start in range(0, len(data), size):
        yield data[start:start + size]


def test_a_large_chunked_body_without_content_length_is_413(live_server, acme):
    response = requests.post(live_server.url + URL, data=chunks(padded(100_000)), timeout=10,
                             headers={**acme.headers("idem-1"), "Content-Type": "application/json"})
    assert response.request.headers.get("Transfer-Encoding") == "chunked"
    assert "Content-Length" not in response.request.headers
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "INVALID_REQUEST"
    assert calculation_count() == 0


def test_a_small_chunked_body_is_calculated(live_server, acme):
    response = requests.post(live_server.url + URL, data=chunks(VALID, 50), timeout=10,
                             headers={**acme.headers("idem-1"), "Content-Type": "application/json"})
    assert response.request.headers.get("Transfer-Encoding") == "chunked"
    assert response.status_code == 201
    assert response.json()["activity"] == {"value": 4000, "unit": "tkm"}


def test_a_post_without_content_length_or_chunking_has_an_empty_body_and_is_400(live_server, acme):
    request = (f"POST {URL} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {acme.key}\r\n"
               "Content-Type: application/json\r\nIdempotency-Key: idem-1\r\nConnection: close\r\n\r\n").encode()
    status, headers, body = raw_exchange(live_server, request + VALID)
    assert status == 400
    assert json.loads(body)["error"]["code"] == "INVALID_REQUEST"
    assert json.loads(body)["error"]["request_id"] == headers["x-request-id"]
    assert json.loads(body)["error"]["message"] == ("The request body is empty: send one JSON object, "
                                                    "with a Content-Length header or chunked.")
    assert calculation_count() == 0


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br", "GZIP", "gzip, identity"])
def test_a_content_encoding_is_400_saying_so(client, acme, encoding):
    response = client.post(URL, VALID, headers={**acme.headers("idem-1"), "Content-Type": "application/json",
                                                "Content-Encoding": encoding}, status="*")
    error = assert_error(response, 400, "INVALID_REQUEST")
    assert error["message"] == "Content-Encoding is not supported: send the body uncompressed."
    assert calculation_count() == 0


def test_content_encoding_identity_is_the_plain_body(client, acme):
    response = client.post(URL, VALID, headers={**acme.headers("idem-1"), "Content-Type": "application/json",
                                                "Content-Encoding": "identity"}, status="*")
    assert response.status_int == 201


def assert_envelope(status: int, headers: dict, body: bytes, expected_status: int) -> None:
    assert status == expected_status, body
    assert headers["content-type"] == "application/json"
    error = json.loads(body)["error"]
    assert error["code"] == "INVALID_REQUEST"
    assert error["request_id"] == headers["x-request-id"]


def test_a_body_over_the_servers_own_limit_is_413_in_the_envelope(live_server, acme):
    request = (f"POST {URL} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {acme.key}\r\n"
               "Content-Type: application/json\r\nIdempotency-Key: idem-1\r\n"
               f"Content-Length: {50 * 1024 * 1024}\r\nConnection: close\r\n\r\n").encode()
    assert_envelope(*raw_exchange(live_server, request), 413)  # refused before the body is sent


@pytest.mark.parametrize("request_bytes, status", [
    (b"GARBAGE\r\n\r\n", 400),
    (f"POST {URL} HTTP/1.1\r\nHost: x\r\nContent-Length: twelve\r\n\r\n".encode(), 400),
    (f"POST {URL} HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n".encode(), 400),
    (f"POST {URL} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".encode(), 400),
    # Waitress's own answer is a 501, which clients retry; it is the client's to change: 400.
    (f"POST {URL} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n".encode(), 400),
    (f"POST {URL} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n".encode(), 400),
], ids=["not HTTP", "Content-Length not a number", "negative Content-Length", "bad chunk",
        "unsupported Transfer-Encoding", "unsupported Transfer-Encoding before chunked"])
def test_requests_the_server_cannot_parse_get_the_envelope(live_server, request_bytes, status):
    assert_envelope(*raw_exchange(live_server, request_bytes), status)


# --- hostile input: never a 500, always the envelope, no partial write ---------------------------

def many_keys(count: int) -> list[str]:
    alphabet = [c for c in string.ascii_letters + string.digits + string.punctuation if c not in '"\\']
    shortest_first = itertools.chain.from_iterable(
        ("".join(letters) for letters in itertools.product(alphabet, repeat=length)) for length in (1, 2, 3))
    return list(itertools.islice(shortest_first, count))


def test_a_dict_of_ten_thousand_keys_is_over_the_limit_and_413(client, acme):
    raw = json.dumps({key: 0 for key in many_keys(10_000)}, separators=(",", ":")).encode()
    assert len(raw) > 64 * 1024  # ten thousand distinct keys cannot fit in 64 KiB
    assert_error(post_raw(client, acme, raw), 413, "INVALID_REQUEST")


def test_thousands_of_unknown_keys_give_a_bounded_422(client, acme):
    body = logistics_body()
    body["origin"] = {key: 0 for key in many_keys(8_000)}
    raw = json.dumps(body, separators=(",", ":")).encode()
    assert len(raw) <= 64 * 1024
    error = assert_error(post_raw(client, acme, raw), 422, "INVALID_REQUEST")
    assert len(error["details"]) == 50
    assert {"field": "origin", "message": "needs at least one of code or label"} in error["details"]
    assert all(detail["field"].startswith("origin") for detail in error["details"])


HOSTILE_VALUES = {
    "huge exponent": ("cargo.value", "1e999999", 422),
    "huge negative exponent": ("distance.value", "-1e999999", 422),
    "many decimal places": ("cargo.value", "0." + "1" * 1001, 422),
    "a long zero fraction": ("cargo.value", "1." + "0" * 1001, 422),
    "huge exponent in an unknown field": ("weight", "1e999999999", 422),
    "the largest exponent a decimal holds": ("cargo.value", "1e999999999999999999", 422),
    "the smallest exponent a decimal holds": ("distance.value", "1e-999999999999999999", 422),
    "deep nesting in a known field": ("origin.code", "[" * 5000 + "]" * 5000, 400),
    "deep nesting within the recursion limit": ("destination", '{"a":' * 500 + "1" + "}" * 500, 422),
    "an object for a number": ("cargo.value", '{"value": 1}', 422),
    "escaped NUL": ("external_reference", '"\\u0000"', 422),
    "escaped lone surrogate": ("origin.label", '"\\ud83d"', 422),
    "escaped surrogate pair": ("origin.label", '"\\ud83d\\ude9a"', 201),
    "a 1000-digit value": ("distance.value", "1." + "3" * 999, 201),
}


@pytest.mark.on_both
@pytest.mark.parametrize("path, literal, status", HOSTILE_VALUES.values(), ids=HOSTILE_VALUES.keys())
def test_hostile_values_get_the_envelope_not_a_500(client, acme, path, literal, status):
    raw = json.dumps(changed(path, "@@@")).replace('"@@@"', literal).encode()
    response = post_raw(client, acme, raw)
    assert response.status_int == status, response.body
    if status == 201:
        assert calculation_count() == 1
    else:
        error = assert_error(response, status, "INVALID_REQUEST")
        if status == 422:
            assert path in [detail["field"] for detail in error["details"]]
        assert calculation_count() == 0


PROBES = [None, True, 0, -1, 1e-7, 12.5, 1e308, "", " ", "x" * 121, "x" * 201, "ROAD", "tonne", "km",
          "2026-03-01", "2026-02-29", "\u0000", "\ud800", "\u202e\ufeff", "𝄞" * 120, [], [1, {"a": None}], {},
          {"code": "X"}, {"value": 1, "unit": "km"}]
PATHS = ["customer_reference", "external_reference", "mode", "origin", "origin.code", "origin.label",
         "origin.country", "destination", "destination.code", "cargo", "cargo.value", "cargo.unit", "distance",
         "distance.value", "distance.unit", "activity_date", "business_context", "factor_reference", "extra"]


@pytest.mark.on_both
def test_any_value_at_any_position_is_answered_without_a_500(client, acme):
    seen = set()
    for number, (path, probe) in enumerate(itertools.product(PATHS, PROBES)):
        response = client.post_json(URL, changed(path, probe), headers=acme.headers(f"probe-{number}"), status="*")
        assert response.status_int in (201, 404, 422), (path, probe, response.body)
        assert response.json.get("error", {}).get("code", "created") in (
            "created", "INVALID_REQUEST", "CUSTOMER_NOT_FOUND", "FACTOR_NOT_FOUND", "CALCULATION_FAILED")
        seen.add(response.status_int)
    assert seen == {201, 404, 422}


@pytest.mark.on_both
def test_a_tiny_value_is_stored_exactly_and_one_that_rounds_to_nothing_is_refused(client, acme):
    raw = json.dumps(logistics_body()).replace("12.5", "1e-7").replace('"value": 320', '"value": 1000000').encode()
    response = post_raw(client, acme, raw)
    assert response.status_int == 201, response.body
    assert b'"cargo":{"value":0.0000001,"unit":"tonne"}' in response.body
    assert response.json["activity"] == {"value": 0.1, "unit": "tkm"}
    assert client.get(f"/v1/calculations/{response.json['id']}", headers=acme.headers()).body == response.body
    # 1e-1000 tonnes was once stored as a calculation of 0 tkm; now it is a 422 (test_calculations.py).
    zero = post_raw(client, acme, json.dumps(logistics_body()).replace("12.5", "1e-1000").encode(), idempotency_key="z")
    assert zero.status_int == 422 and zero.json["error"]["details"][0]["field"] == "cargo.value"
    assert models.Calculation.select().count() == 1


@pytest.mark.on_both
def test_unicode_is_stored_and_returned_intact(client, acme):
    body = changed("origin", {"label": "Zürich – 東京 🚚", "code": "CHZRH"})
    body["external_reference"] = "ñ-ø-€-𝄞"
    created = client.post_json(URL, body, headers=acme.headers("idem-1"), status=201)
    read = client.get(f"/v1/calculations/{created.json['id']}", headers=acme.headers())
    assert read.json["origin"] == {"label": "Zürich – 東京 🚚", "code": "CHZRH"}
    assert read.json["external_reference"] == "ñ-ø-€-𝄞"
    assert read.body == created.body


def test_a_failed_validation_writes_nothing(client, acme):
    tables = [models.Calculation, models.UsageCounter, models.CustomerRollup, models.WebhookEvent]
    before = [table.select().count() for table in tables]
    for path, value, *_ in [case[1:] for case in SCHEMA_CASES[:10]]:
        client.post_json(URL, changed(path, value), headers=acme.headers("idem-1"), status=422)
    post_raw(client, acme, b"[]")
    assert [table.select().count() for table in tables] == before
    # the key was never bound: the valid request with it succeeds
    assert client.post_json(URL, logistics_body(), headers=acme.headers("idem-1"), status=201)


@pytest.fixture
def probe_document(tmp_path, monkeypatch):
    """The service's document with a Probe component using oneOf and anyOf as a future schema might."""
    from emissions import schemas
    document = json.loads(schemas.OPENAPI_PATH.read_text())
    document["components"]["schemas"]["Probe"] = {"type": "object", "properties": {
        "place": {"type": "object", "oneOf": [{"required": ["code"]}, {"required": ["label"]}]},
        "amount": {"anyOf": [{"type": "number", "minimum": 1}, {"type": "string", "maxLength": 3}]},
        "items": {"type": "array", "minItems": 2, "maxItems": 3}}}
    with serving_document(document, tmp_path, monkeypatch):
        yield schemas


@pytest.mark.parametrize("body, expected", [
    ({"place": {}}, {"field": "place", "message": "needs exactly one of code or label"}),
    ({"place": {"code": "A", "label": "B"}}, {"field": "place", "message": "takes only one of code or label"}),
    ({"amount": 0}, {"field": "amount", "message": "must be at least 1"}),
    ({"amount": "four"}, {"field": "amount", "message": "must be at most 3 characters"}),
    ({"items": [1]}, {"field": "items", "message": "must have at least 2 elements"}),
    ({"items": [1, 2, 3, 4]}, {"field": "items", "message": "must have at most 3 elements (it has 4)"}),
])
def test_one_of_any_of_and_item_counts_say_what_would_be_accepted(probe_document, body, expected):
    assert probe_document.validation_details("Probe", body) == [expected]


def test_a_value_of_no_accepted_type_is_told_every_type_it_may_have(probe_document):
    assert probe_document.validation_details("Probe", {"amount": [1]}) == [
        {"field": "amount", "message": "must be a number or a string"}]
