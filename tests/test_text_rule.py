"""One rule for text people write, on every way in (issue 38): control characters and bidirectional
controls are refused naming the field; ordinary Unicode of any script is kept."""
from __future__ import annotations

import json
import re

import pytest

from emissions import schemas
from emissions import text
from emissions import workspace
from emissions.models import ApiKey, Calculation, Customer, Factor, Organization, Shipment, User
from emissions import accounts
from conftest import PASSWORD, logistics_body, post_calculation
from helpers import create_key, csrf_token, sign_in

REFUSED = {"tab": "a\tb", "cr": "a\rb", "lf": "a\nb", "crlf": "a\r\nb", "nul": "a\x00b", "del": "a\x7fb",
           "c1-nel": "a\x85b", "c1-csi": "a\x9bb", "rlo": "a\u202eb", "lre": "a\u202ab", "pdf": "a\u202cb",
           "lri": "a\u2066b", "pdi": "a\u2069b"}
ORDINARY = "Zürich–東京 مرحبا Ünïcødé 🚚 \u200d·"


@pytest.mark.parametrize("character", list(REFUSED.values()), ids=list(REFUSED))
def test_the_rule_refuses_controls_and_bidirectional_controls(character):
    assert text.problem(character) == text.MESSAGE
    assert schemas.ecma_regex(text.PATTERN).search(character) is None


def test_the_rule_keeps_ordinary_unicode():
    assert text.problem(ORDINARY) is None
    assert schemas.ecma_regex(text.PATTERN).search(ORDINARY) is not None


def test_every_free_text_field_of_a_request_schema_carries_the_one_pattern():
    found = []
    for name in ("LogisticsRequest", "Place", "ShipmentRequest", "ShipmentPlace", "ShipmentLeg", "ShipmentHubElement",
                 "VoidRequest"):
        for field, schema in schemas.openapi()["components"]["schemas"][name]["properties"].items():
            # replaces is an id: a UUID's own pattern, stricter than the text rule.
            if schema.get("type") == "string" and "enum" not in schema and field not in ("iata", "locode",
                                                                                            "activity_date", "replaces"):
                found.append((name, field, schema.get("pattern")))
    assert len(found) >= 13
    assert all(pattern == text.PATTERN for _, _, pattern in found), found


@pytest.mark.parametrize("field", ["external_reference", "customer_reference", "factor_reference", "origin.label",
                                   "origin.code", "destination.label"])
@pytest.mark.parametrize("character", ["\t", "\r", "\n", "\x85", "\u202e", "\u2067"],
                         ids=["tab", "cr", "lf", "c1", "rlo", "rli"])
def test_the_api_refuses_a_control_in_any_text_field_naming_it(client, acme, field, character):
    body = logistics_body()
    target, _, member = field.partition(".")
    if member:
        body[target] = {member: "x" + character + "y"}
    else:
        body[target] = "x" + character + "y"
    response = client.post_json("/v1/emissions/logistics", body, headers=acme.headers("idem-1"), status=422)
    assert {"field": field, "message": text.MESSAGE} in response.json["error"]["details"]
    assert Calculation.select().count() == 0


def test_the_api_refuses_a_control_in_a_shipment_label_naming_it(client, acme):
    body = {"customer_reference": "cust-1", "external_reference": "PO-1", "activity_date": "2026-03-01",
            "cargo": {"value": 10, "unit": "tonne"},
            "elements": [{"type": "leg", "mode": "ROAD", "origin": {"label": "Hull\u202e"},
                          "destination": {"label": "York"}, "distance": {"value": 60, "unit": "km"},
                          "factor_reference": "road-default"}]}
    response = client.post_json("/v1/shipments", body, headers=acme.headers("idem-1"), status=422)
    assert {"field": "elements[0].origin.label", "message": text.MESSAGE} in response.json["error"]["details"]
    assert Shipment.select().count() == 0


def test_the_api_keeps_ordinary_unicode_and_finds_it_again(client, acme):
    response = post_calculation(client, acme, external_reference=ORDINARY, origin={"label": ORDINARY},
                                status=201)
    assert response.json["origin"]["label"] == ORDINARY
    found = client.get("/v1/calculations", {"external_reference": ORDINARY}, headers=acme.headers())
    assert [row["id"] for row in found.json["data"]] == [response.json["id"]]


def test_the_list_filter_refuses_what_the_body_refuses(client, acme):
    response = client.get("/v1/calculations", {"external_reference": "a\u2066b"}, headers=acme.headers(), status=400)
    assert response.json["error"]["details"] == [{"field": "external_reference", "message": text.MESSAGE}]


@pytest.mark.parametrize("argv, field", [
    (("org", "create", "--name", "Evil\u202eCorp"), "name"),
    (("customer", "create", "--org", "acme", "--env", "test", "--reference", "c-9", "--name", "a\rb"), "name"),
    (("customer", "update", "--org", "acme", "--env", "test", "--reference", "cust-1", "--name", "a\u2068b"), "name"),
    (("key", "create", "--org", "acme", "--env", "test", "--scopes", "all", "--name", "ci\tkey"), "name"),
    (("factor", "create", "--reference", "van", "--mode", "ROAD", "--value", "0.1", "--name", "Van\n=1",
      "--source", "DESNZ"), "name"),
    (("factor", "create", "--reference", "van", "--mode", "ROAD", "--value", "0.1", "--name", "Van",
      "--source", "DESNZ\r=1"), "source"),
    (("factor", "create", "--reference", "van", "--mode", "ROAD", "--value", "0.1", "--name", "Van",
      "--source", "DESNZ", "--region", "UK\u202d"), "region"),
    (("factor", "create", "--reference", "van\u2066", "--mode", "ROAD", "--value", "0.1", "--name", "Van",
      "--source", "DESNZ"), "reference"),
])
def test_the_cli_refuses_a_control_naming_the_field(acme, fails, argv, field):
    before = (Organization.select().count(), Customer.select().count(), ApiKey.select().count(),
              Factor.select().count(), Customer.get(Customer.reference == "cust-1").name)
    line = fails(*argv)
    assert f"{field} {text.MESSAGE}" in line or (field in line and text.MESSAGE in line), line
    assert (Organization.select().count(), Customer.select().count(), ApiKey.select().count(),
            Factor.select().count(), Customer.get(Customer.reference == "cust-1").name) == before


@pytest.mark.parametrize("email", ["ops\u202e@acme.example", "ops\x01@acme.example"])
def test_a_user_s_email_follows_the_rule_for_the_cli_and_the_workspace_alike(acme, email):
    with pytest.raises(accounts.WorkspaceError, match="email " + re.escape(text.MESSAGE)):
        workspace.create_user(acme.org, email, PASSWORD, actor="cli")
    assert User.select().count() == 0


def test_the_factor_import_refuses_a_control_naming_the_line_and_field(acme, emissions, tmp_path):
    path = tmp_path / "factors.csv"
    path.write_text('reference,mode,name,source,value\nvan,ROAD,"Van\u202e",DESNZ,0.1\n', encoding="utf-8")
    status, out, _ = emissions("factor", "import", path, "--json")
    assert status != 0
    assert {"line": 2, "field": "name", "reason": text.MESSAGE} in json.loads(out)["errors"], out
    assert not Factor.select().where(Factor.reference == "van").exists()


def test_the_workspace_refuses_a_control_in_a_customer_name(client, acme):
    workspace.create_user(acme.org, "ops@acme.example", PASSWORD, actor="cli")
    sign_in(client)
    page = client.get("/workspace/customers")
    response = client.post("/workspace/customers", {"csrf": csrf_token(page), "reference": "c-9",
                                                    "name": "Evil\u2067Corp"}, status=400)
    assert text.MESSAGE in response.text
    assert not Customer.select().where(Customer.reference == "c-9").exists()


def test_the_workspace_refuses_a_bidirectional_control_in_a_key_name(client, acme):
    workspace.create_user(acme.org, "ops@acme.example", PASSWORD, actor="cli")
    sign_in(client)
    assert text.MESSAGE in create_key(client, name="ci\u202e", status=400).text
    assert ApiKey.select().count() == 1  # the persona's own


@pytest.mark.parametrize("url", ["https://hooks.example/\u202etxt.exe", "https://hooks.example/a\x85b"])
def test_a_webhook_url_follows_the_rule(url):
    from emissions.webhooks import endpoints

    with pytest.raises(endpoints.WebhookError, match="bidirectional controls"):
        endpoints.validate_url(url, "test", resolve=lambda *args, **kwargs: [])
