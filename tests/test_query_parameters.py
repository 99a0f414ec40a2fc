"""Query parameters: every API route declares the ones it takes; others, repeats and bad values are a 400."""
from __future__ import annotations

import pytest

from emissions import parameters
from emissions import text
from conftest import post_calculation

ROUTES = [  # (method, path) of every /v1 route, with the parameters it takes
    ("POST", "/v1/emissions/logistics"),
    ("GET", "/v1/calculations"),
    ("GET", "/v1/calculations/00000000-0000-4000-8000-000000000000"),
    ("POST", "/v1/calculations/00000000-0000-4000-8000-000000000000/void"),
    ("GET", "/v1/factors"),
    ("GET", "/v1/customers/cust-1"),
    ("GET", "/v1/customers/cust-1/emissions"),
    ("GET", "/v1/customers/cust-1/statement"),
    ("GET", "/v1/customers/cust-1/lanes"),
    ("GET", "/v1/openapi.json"),
    ("POST", "/v1/shipments"),
    ("GET", "/v1/shipments"),
    ("GET", "/v1/shipments/00000000-0000-4000-8000-000000000000"),
    ("POST", "/v1/shipments/00000000-0000-4000-8000-000000000000/void"),
]


def request(client, method: str, path: str, headers: dict, status="*"):
    if method == "POST":
        return client.post(path, b"{}", headers={**headers, "Content-Type": "application/json",
                                                 "Idempotency-Key": "q-1"}, status=status)
    return client.get(path, headers=headers, status=status)


def test_every_api_route_declares_its_query_parameters(app):
    undeclared = [route.rule for route in app.routes
                  if route.rule.startswith("/v1/") and not isinstance(route.config.get("query"), parameters.Query)]
    assert undeclared == []
    assert sorted(route.rule for route in app.routes if route.rule.startswith("/v1/")) == sorted(
        ["/v1/emissions/logistics", "/v1/calculations", "/v1/calculations/<calculation_id>", "/v1/factors",
         "/v1/customers/<reference:path>/emissions", "/v1/customers/<reference:path>/statement",
         "/v1/customers/<reference:path>/lanes", "/v1/customers/<reference:re:.*>", "/v1/openapi.json",
         "/v1/shipments", "/v1/shipments",
         "/v1/shipments/<shipment_id>", "/v1/calculations/<calculation_id>/void", "/v1/shipments/<shipment_id>/void"])


@pytest.mark.parametrize("method, path", ROUTES)
@pytest.mark.parametrize("query, field", [
    ("period=2026-10", "period"), ("debug", "debug"), ("From=2026-10-01", "From"), ("%FFx=1", "\ufffdx"),
])
def test_an_unknown_query_parameter_is_a_400_naming_it(client, acme, method, path, query, field):
    response = request(client, method, f"{path}?{query}", acme.headers(), status=400)
    error = response.json["error"]
    assert error["code"] == "INVALID_REQUEST"
    assert error["details"] == [{"field": field, "message": "is not an accepted query parameter"}]
    assert error["message"] == f"The query parameter {field} is not an accepted query parameter."
    assert error["request_id"] == response.headers["X-Request-Id"]


@pytest.mark.parametrize("method, path", [route for route in ROUTES if "openapi" not in route[1]])
def test_authentication_comes_before_the_query(client, method, path):
    response = request(client, method, f"{path}?unknown=1", {}, status=401)
    assert response.json["error"]["code"] == "INVALID_API_KEY"


EMISSIONS = "/v1/customers/cust-1/emissions"
LIST = "/v1/calculations"


@pytest.mark.parametrize("path, query, details", [
    (EMISSIONS, "from=2026-10", [{"field": "from", "message": "must be a calendar date YYYY-MM-DD"}]),
    (EMISSIONS, "to=2026-02-30", [{"field": "to", "message": "must be a calendar date YYYY-MM-DD"}]),
    (EMISSIONS, "from=20261001", [{"field": "from", "message": "must be a calendar date YYYY-MM-DD"}]),
    (EMISSIONS, "from=", [{"field": "from", "message": "must be a calendar date YYYY-MM-DD"}]),
    (EMISSIONS, "from=2026-10-02&to=2026-10-01", [{"field": "from", "message": "must not be after to"}]),
    (EMISSIONS, "from=2026-10-01&from=2026-11-01", [{"field": "from", "message": "is given more than once"}]),
    (LIST, "limit=0", [{"field": "limit", "message": "must be an integer from 1 to 100"}]),
    (LIST, "limit=101", [{"field": "limit", "message": "must be an integer from 1 to 100"}]),
    (LIST, "limit=ten", [{"field": "limit", "message": "must be an integer from 1 to 100"}]),
    (LIST, "limit=%EF%BC%95", [{"field": "limit", "message": "must be an integer from 1 to 100"}]),  # fullwidth 5
    (LIST, "mode=BIKE", [{"field": "mode", "message": "must be one of ROAD, SEA, AIR, RAIL"}]),
    (LIST, "external_reference=", [{"field": "external_reference", "message": "must not be empty"}]),
    (LIST, "customer_reference=" + "x" * 121, [{"field": "customer_reference",
                                                "message": "must be at most 120 characters"}]),
    (LIST, "external_reference=a%00b", [{"field": "external_reference",
                                         "message": text.MESSAGE}]),
    (LIST, "external_reference=a%E2%80%AEb", [{"field": "external_reference", "message": text.MESSAGE}]),
    (LIST, "customer_reference=%FF", [{"field": "customer_reference", "message": "must be percent-encoded UTF-8"}]),
    (LIST, "external_reference=a%ED%A0%80", [{"field": "external_reference",
                                              "message": "must be percent-encoded UTF-8"}]),  # an encoded surrogate
    ("/v1/shipments", "customer_reference=%C3", [{"field": "customer_reference",
                                                  "message": "must be percent-encoded UTF-8"}]),
    (LIST, "activity_from=2026-10-02&activity_to=2026-10-01", [{"field": "activity_from",
                                                                "message": "must not be after activity_to"}]),
    (LIST, "created_from=2026-10-02&created_to=2026-10-01", [{"field": "created_from",
                                                              "message": "must not be after created_to"}]),
    (LIST, "created_to=yesterday&mode=SEA&limit=1&unknown=1", [
        {"field": "created_to", "message": "must be a calendar date YYYY-MM-DD"},
        {"field": "unknown", "message": "is not an accepted query parameter"}]),
])
def test_a_bad_value_is_a_400_naming_the_parameter(client, acme, path, query, details):
    response = client.get(f"{path}?{query}", headers=acme.headers(), status=400)
    assert response.json["error"]["code"] == "INVALID_REQUEST"
    assert response.json["error"]["details"] == details
    assert details[0]["field"] in response.json["error"]["message"]


@pytest.mark.parametrize("query", ["from=2026-03-01", "to=2026-03-01", "from=2026-03-01&to=2026-03-01", ""])
def test_good_parameters_are_answered(client, acme, query):
    post_calculation(client, acme, status=201)
    response = client.get(f"{EMISSIONS}?{query}", headers=acme.headers(), status=200)
    assert response.json["analytics"]["calculation_count"] == 1
