"""POST /v1/shipments, GET /v1/shipments[/{id}]: transport chains of legs and hubs (docs/api.md, "Shipments")."""
from __future__ import annotations

import datetime as dt
import json
from decimal import ROUND_HALF_EVEN, Decimal

import pytest

from emissions.rollups import recount
from emissions import customers, factor_files, factors, jsoncodec, models, schemas
from emissions.models import Calculation, Shipment, ShipmentHub, UsageCounter, WebhookEvent
from tests.conftest import LiveServer, TERMINAL, make_customer, make_factor, make_org
from helpers import check_response, post, race, worked_example

SIX = Decimal("0.000001")


def exact(response) -> dict:
    return jsoncodec.loads(response.body)


def r6(value: Decimal) -> Decimal:
    return value.quantize(SIX, rounding=ROUND_HALF_EVEN)


@pytest.mark.on_both
def test_the_worked_example_adds_up_exactly(client, acme, library):
    response = post(client, acme, worked_example(), status=201)
    assert response.headers["Idempotent-Replayed"] == "false"
    body = exact(response)
    tonnes = Decimal(20)  # 2 TEU at the default 10 t per TEU
    assert body["cargo"] == {"value": 2, "unit": "TEU", "tonnes_per_teu": 10, "tonnes": tonnes}
    road = models.Factor.get(reference="desnz-2025-road-hgv-diesel-average-laden", status="active")
    sea = models.Factor.get(reference="desnz-2025-sea-container-ship-average", status="active")
    terminal = models.Factor.get(reference=TERMINAL)
    elements = body["elements"]
    assert [element["index"] for element in elements] == [0, 1, 2, 3]
    assert [element["factor"]["reference"] for element in elements] == [road.reference, sea.reference, TERMINAL,
                                                                         road.reference]
    assert [element["factor_default"] for element in elements] == [True, True, False, True]

    sea_leg = elements[1]["distance"]
    assert sea_leg["method"] == "sea_route" and sea_leg["unit"] == "km"
    assert sea_leg["value"] == r6(sea_leg["adjustment"]["unadjusted"] * Decimal("1.15")).quantize(Decimal("0.001"))
    assert 18000 < sea_leg["adjustment"]["unadjusted"] < 21000  # Shanghai to Felixstowe through Suez
    assert elements[0]["distance"] == {"value": Decimal("48.5"), "unit": "km", "method": "given"}

    distances = [Decimal("48.5"), sea_leg["value"], None, Decimal("372.4")]
    leg_factors = [road, sea, None, road]
    for element, distance, factor in zip(elements, distances, leg_factors):
        if factor is None:
            continue
        activity = r6(tonnes * distance)
        emissions = r6(activity * factor.value)
        ttw = r6(activity * factor.ttw_value)
        assert element["activity"] == {"value": activity, "unit": "tkm"}
        assert element["emissions"] == {"value": emissions, "unit": "kgCO2e",
                                        "breakdown": {"ttw": ttw, "wtt": emissions - ttw}}
    hub = elements[2]
    assert hub["activity"] == {"value": tonnes, "unit": "tonne"}
    assert hub["emissions"] == {"value": r6(tonnes * terminal.value), "unit": "kgCO2e",
                                "breakdown": {"ttw": r6(tonnes * Decimal("0.95")),
                                              "wtt": r6(tonnes * terminal.value) - r6(tonnes * Decimal("0.95"))}}
    assert hub["factor"]["unit"] == "kgCO2e/t" and hub["factor"]["hub_type"] == "container_terminal"

    totals = body["totals"]
    total = sum(element["emissions"]["value"] for element in elements)
    assert totals["emissions"]["value"] == total
    assert totals["emissions"]["breakdown"] == {
        "ttw": sum(element["emissions"]["breakdown"]["ttw"] for element in elements),
        "wtt": sum(element["emissions"]["breakdown"]["wtt"] for element in elements), "unattributed": 0}
    assert totals["activity"] == {"value": sum(e["activity"]["value"] for e in elements if e["type"] == "leg"),
                                  "unit": "tkm"}
    assert totals["intensity"] == {"value": r6(total / totals["activity"]["value"]), "unit": "kgCO2e/tkm"}

    # Each leg is a calculation naming its shipment; GET reads the same body.
    for element in elements:
        if element["type"] == "leg":
            calculation = exact(client.get(f"/v1/calculations/{element['calculation_id']}", headers=acme.headers()))
            assert calculation["shipment"] == {"id": body["id"], "element_index": element["index"]}
            assert calculation["emissions"] == element["emissions"]
    assert client.get(f"/v1/shipments/{body['id']}", headers=acme.headers()).body == response.body


@pytest.mark.on_both
def test_one_transaction_stores_legs_hubs_rollups_usage_and_one_event(client, acme, library):
    body = exact(post(client, acme, worked_example(), status=201))
    assert Calculation.select().count() == 3 and ShipmentHub.select().count() == 1
    assert UsageCounter.get().count == 3  # each leg is billable
    events = list(WebhookEvent.select())
    assert [event.type for event in events] == ["shipment.succeeded"]
    assert jsoncodec.loads(events[0].payload)["data"] == body

    analytics = exact(client.get("/v1/customers/cust-1/emissions", headers=acme.headers()))["analytics"]
    road, sea = analytics["by_mode"]["ROAD"], analytics["by_mode"]["SEA"]
    hubs = analytics["hubs"]
    assert (road["calculation_count"], sea["calculation_count"], hubs["count"]) == (2, 1, 1)
    assert hubs["activity"] == {"value": 20, "unit": "tonne"}
    assert analytics["calculation_count"] == 3
    assert analytics["emissions"]["value"] == (road["emissions"]["value"] + sea["emissions"]["value"]
                                               + hubs["emissions"]["value"]) == body["totals"]["emissions"]["value"]
    assert analytics["activity"]["value"] == body["totals"]["activity"]["value"]
    assert recount.verify().drifted == []


@pytest.mark.on_both
def test_the_legs_and_hubs_add_up_in_the_organizations_day_rows(client, acme, library):
    """Two ROAD legs, a SEA leg and a hub of one day: a row per mode, the legs of one mode in one row."""
    make_customer(acme.org, "cust-2")
    post(client, acme, worked_example(), status=201)
    post(client, acme, worked_example(customer_reference="cust-2", activity_date="2026-03-02"), key="ship-2",
         status=201)
    expected: dict = {}
    parts = [(c.activity_date, c.mode, c.activity_tkm, c.emissions_kg, c.emissions_ttw_kg or 0,
              c.emissions_wtt_kg or 0) for c in Calculation.select()]
    parts += [(h.activity_date, "HUB", h.tonnes, h.emissions_kg, h.emissions_ttw_kg or 0, h.emissions_wtt_kg or 0)
              for h in ShipmentHub.select()]
    for day, mode, *sums in parts:
        row = expected.setdefault((day, mode), [0, 0, 0, 0, 0])
        row[:] = [row[0] + 1, *(total + value for total, value in zip(row[1:], sums))]
    stored = {(r.activity_date, r.mode): [r.calculation_count, r.activity_tkm, r.emissions_kg, r.emissions_ttw_kg,
                                          r.emissions_wtt_kg]
              for r in models.OrganizationPeriodRollup.select().where(
                  (models.OrganizationPeriodRollup.organization == acme.org.id)
                  & (models.OrganizationPeriodRollup.environment == "test"))}
    assert stored == expected
    assert (stored[(dt.date(2026, 3, 1), "ROAD")][0], stored[(dt.date(2026, 3, 2), "HUB")][0]) == (2, 1)
    assert recount.verify().drifted == []


@pytest.mark.on_both
def test_shipments_of_one_organization_at_once_add_up_in_its_day_rows(app, acme, library):
    """Shipments of several customers on one day, their hubs first or last, all at once: none waits for
    another's day rows in the opposite order (PostgreSQL), and every leg and hub is counted."""
    hub_first = worked_example()
    hub_first["elements"] = hub_first["elements"][2:3] + hub_first["elements"][:2] + hub_first["elements"][3:]
    requests_to_send = []
    for number in range(RACERS):
        reference = f"racer-{number}"
        make_customer(acme.org, reference)
        body = (hub_first if number % 2 else worked_example()) | {"customer_reference": reference}
        requests_to_send.append(({**acme.headers(f"day-{number}"), "Content-Type": "application/json"},
                                 json.dumps(body).encode()))
    with LiveServer(app, threads=RACERS) as server:
        answers = race(f"{server.url}/v1/shipments", requests_to_send)
    assert [answer.status_code for answer in answers] == [201] * RACERS, [answer.text for answer in answers]
    rows = {row.mode: row.calculation_count for row in models.OrganizationPeriodRollup.select()}
    assert rows == {"ROAD": 2 * RACERS, "SEA": RACERS, "HUB": RACERS}
    assert recount.verify().drifted == []


@pytest.mark.on_both
def test_a_rail_leg_and_an_air_leg_take_their_default_factors(client, acme, library):
    body = worked_example(cargo={"value": 1500, "unit": "kg"}, elements=[
        {"type": "leg", "mode": "AIR", "origin": {"iata": "PVG"}, "destination": {"iata": "MAN"}},
        {"type": "leg", "mode": "RAIL", "origin": {"label": "Manchester"}, "destination": {"label": "Leeds"},
         "distance": {"value": 70, "unit": "km"}}])
    answer = exact(post(client, acme, body, status=201))
    air, rail = answer["elements"]
    assert answer["cargo"]["tonnes"] == Decimal("1.5")
    assert air["distance"]["method"] == "great_circle" and "adjustment" not in air["distance"]
    assert 9100 < air["distance"]["value"] < 9300
    assert air["factor"]["reference"] == "desnz-2025-air-freight-long-haul"  # to the UK, over 3,700 km
    assert rail["factor"]["reference"] == "desnz-2025-rail-freight-train"
    assert rail["activity"]["value"] == 105
    analytics = exact(client.get("/v1/customers/cust-1/emissions", headers=acme.headers()))["analytics"]
    assert list(analytics["by_mode"]) == ["AIR", "RAIL"] and "hubs" not in analytics


@pytest.mark.on_both
def test_replay_answers_the_original_and_a_different_payload_is_409(client, acme, library):
    first = post(client, acme, worked_example(), status=201)
    again = post(client, acme, json.loads(json.dumps(worked_example())), status=200)
    assert again.headers["Idempotent-Replayed"] == "true" and again.body == first.body
    conflict = post(client, acme, worked_example(external_reference="PO-other"), status=409)
    assert conflict.json["error"]["code"] == "IDEMPOTENCY_KEY_REUSED"
    assert Shipment.select().count() == 1 and Calculation.select().count() == 3
    assert UsageCounter.get().count == 3


RACERS = 8


@pytest.mark.on_both
@pytest.mark.parametrize("hold_writes", [False, True], ids=["free", "all-past-the-lookup"])
def test_concurrent_requests_with_one_key_create_one_shipment(app, acme, library, hold_writes):
    """With hold_writes, every request gets past the lookup first: the unique key picks the one winner."""
    headers = {**acme.headers("race"), "Content-Type": "application/json"}
    with LiveServer(app, threads=RACERS) as server:
        answers = race(f"{server.url}/v1/shipments", [(headers, json.dumps(worked_example()).encode())] * RACERS,
                       hold_writes, table="shipment")
    assert sorted(answer.status_code for answer in answers) == [200] * (RACERS - 1) + [201]
    assert len({answer.text for answer in answers}) == 1
    assert Shipment.select().count() == 1 and Calculation.select().count() == 3
    assert WebhookEvent.select().count() == 1 and UsageCounter.get().count == 3


@pytest.mark.on_both
@pytest.mark.parametrize("index, place, field", [
    (1, {"locode": "ZZZZZ"}, "elements[1].origin.locode"),
    (1, {"locode": "CNSHA"}, None),
])
def test_an_unknown_code_is_a_422_naming_the_field(client, acme, library, index, place, field):
    body = worked_example()
    body["elements"][index]["origin"] = place
    if field is None:  # the control: a known code is accepted
        post(client, acme, body, status=201)
        return
    answer = post(client, acme, body, status=422)
    assert answer.json["error"]["code"] == "INVALID_REQUEST"
    assert [detail["field"] for detail in answer.json["error"]["details"]] == [field]


@pytest.mark.on_both
def test_an_unknown_airport_is_a_422_naming_the_field(client, acme, library):
    body = worked_example(elements=[{"type": "leg", "mode": "AIR", "origin": {"iata": "PVG"},
                                     "destination": {"iata": "QQQ"}}])
    answer = post(client, acme, body, status=422)
    assert answer.json["error"]["details"] == [{"field": "elements[0].destination.iata",
                                                "message": "is not an IATA airport code the service knows ('QQQ')"}]
    assert Shipment.select().count() == 0


@pytest.mark.on_both
@pytest.mark.parametrize("element, field", [
    ({"type": "leg", "mode": "ROAD", "origin": {"label": "a"}, "destination": {"label": "b"}}, "elements[0].distance"),
    ({"type": "leg", "mode": "SHIP", "origin": {"label": "a"}, "destination": {"label": "b"}}, "elements[0].mode"),
    ({"type": "leg", "mode": "AIR", "origin": {"iata": "PVGX"}, "destination": {"iata": "MAN"}},
     "elements[0].origin.iata"),
])
def test_a_leg_the_service_cannot_measure_is_a_422_naming_the_field(client, acme, library, element, field):
    answer = post(client, acme, worked_example(elements=[element]), status=422)
    assert field in [detail["field"] for detail in answer.json["error"]["details"]]


@pytest.mark.on_both
def test_a_factor_of_another_mode_fails_the_shipment_naming_the_element(client, acme, library):
    body = worked_example()
    body["elements"][3]["factor_reference"] = "desnz-2025-rail-freight-train"
    answer = post(client, acme, body, status=422)
    assert answer.json["error"]["code"] == "CALCULATION_FAILED"
    assert answer.json["error"]["details"] == [{"field": "elements[3]", "message":
                                                "factor desnz-2025-rail-freight-train is for mode RAIL, not ROAD"}]
    body["elements"][3].pop("factor_reference")
    body["elements"][2]["factor_reference"] = "desnz-2025-rail-freight-train"
    assert post(client, acme, body, "ship-2", status=422).json["error"]["details"][0]["field"] == "elements[2]"
    events = [json.loads(event.payload) for event in WebhookEvent.select()]
    assert [event["type"] for event in events] == ["shipment.failed", "shipment.failed"]
    assert events[0]["data"]["error"]["code"] == "CALCULATION_FAILED"
    assert Shipment.select().count() == Calculation.select().count() == 0


@pytest.mark.on_both
def test_a_hub_factor_of_another_hub_type_fails_the_shipment(client, acme, library):
    body = worked_example()
    body["elements"][2]["hub_type"] = "warehouse"
    answer = post(client, acme, body, status=422)
    assert answer.json["error"]["details"] == [{"field": "elements[2]", "message": f"factor {TERMINAL} is for hub "
                                                "type container_terminal, not warehouse"}]


@pytest.mark.on_both
def test_legs_that_do_not_fit_the_capacity_are_a_429_storing_nothing(client, acme, library):
    models.Organization.update(test_capacity=4).where(models.Organization.id == acme.org.id).execute()
    post(client, acme, worked_example(), status=201)  # 3 of 4 used
    answer = post(client, acme, worked_example(), "ship-2", status=429)
    assert answer.json["error"]["code"] == "USAGE_LIMIT_REACHED" and int(answer.headers["Retry-After"]) >= 1
    assert Shipment.select().count() == 1 and Calculation.select().count() == 3
    assert ShipmentHub.select().count() == 1 and UsageCounter.get().count == 3
    assert WebhookEvent.select().count() == 1
    assert recount.verify().drifted == []


@pytest.mark.on_both
def test_shipments_are_tenant_safe_and_listed_newest_first(client, acme, globex, library, secret):
    ids = [exact(post(client, acme, worked_example(external_reference=f"PO-{n}"), f"k{n}", status=201))["id"]
           for n in range(3)]
    assert client.get(f"/v1/shipments/{ids[0]}", headers=globex.headers(), status=404).json["error"]["code"] \
        == "INVALID_REQUEST"
    first = client.get("/v1/shipments?limit=2", headers=acme.headers()).json
    assert first["object"] == "list" and first["has_more"] is True
    assert [item["id"] for item in first["data"]] == ids[::-1][:2]
    second = client.get(f"/v1/shipments?limit=2&starting_after={first['data'][-1]['id']}", headers=acme.headers())
    assert [item["id"] for item in second.json["data"]] == [ids[0]] and second.json["has_more"] is False
    stored = client.get(f"/v1/shipments/{ids[0]}", headers=acme.headers()).text
    assert second.text == '{"object":"list","data":[' + stored + '],"has_more":false}'
    assert client.get("/v1/shipments", headers=globex.headers()).json == {"object": "list", "data": [],
                                                                          "has_more": False}


@pytest.mark.on_both
def test_the_shipments_list_filters_as_the_calculations_list_does(client, acme, library):
    make_customer(acme.org, "cust-2")
    made = {name: exact(post(client, acme, worked_example(**overrides), name, status=201))["id"] for name, overrides in {
        "march": {}, "april": {"activity_date": "2026-04-02", "external_reference": "PO-2"},
        "other": {"customer_reference": "cust-2", "external_reference": "PO-2"}}.items()}

    def found(query: str) -> set[str]:
        return {item["id"] for item in client.get(f"/v1/shipments?{query}", headers=acme.headers()).json["data"]}

    assert found("customer_reference=cust-2") == {made["other"]}
    assert found("customer_reference=nobody") == set()
    assert found("external_reference=PO-2") == {made["april"], made["other"]}
    assert found("activity_from=2026-04-01") == {made["april"]}
    assert found("activity_to=2026-03-31") == {made["march"], made["other"]}
    assert found("customer_reference=cust-1&external_reference=PO-2") == {made["april"]}
    assert found("created_from=2000-01-01&created_to=2999-12-31") == set(made.values())
    assert found("created_to=2000-01-01") == set()


@pytest.mark.on_both
@pytest.mark.parametrize("query, details", [
    ("limit=0", [{"field": "limit", "message": "must be an integer from 1 to 100"}]),
    ("limit=101", [{"field": "limit", "message": "must be an integer from 1 to 100"}]),
    ("cursor=x", [{"field": "cursor", "message": "is not an accepted query parameter"}]),
    ("mode=ROAD", [{"field": "mode", "message": "is not an accepted query parameter"}]),
    ("starting_after=x", [{"field": "starting_after", "message": "must be the id of a shipment"}]),
    ("starting_after=00000000-0000-4000-8000-000000000000",
     [{"field": "starting_after", "message": "names no shipment"}]),
    ("activity_from=2026-05-01&activity_to=2026-04-01",
     [{"field": "activity_from", "message": "must not be after activity_to"}]),
])
def test_a_query_the_shipments_list_cannot_use_is_a_400_naming_it(client, acme, library, query, details):
    error = client.get(f"/v1/shipments?{query}", headers=acme.headers(), status=400).json["error"]
    assert error["code"] == "INVALID_REQUEST" and error["details"] == details


@pytest.mark.on_both
def test_starting_after_another_tenants_shipment_is_the_400_of_an_unknown_one(client, acme, globex, library):
    theirs = exact(post(client, globex, worked_example(), status=201))["id"]
    other = client.get(f"/v1/shipments?starting_after={theirs}", headers=acme.headers(), status=400).json
    unknown = client.get("/v1/shipments?starting_after=00000000-0000-4000-8000-000000000000",
                         headers=acme.headers(), status=400).json
    assert other["error"]["message"] == unknown["error"]["message"]
    assert other["error"]["details"] == unknown["error"]["details"]


def test_hub_factors_are_governed_and_travel_by_csv(app, library):
    import io
    stream = io.StringIO()
    factor_files.export_factors(stream)
    rows = [line for line in stream.getvalue().splitlines() if line.startswith(TERMINAL)]
    assert rows and rows[0].endswith(",container_terminal")
    with pytest.raises(factors.FactorError, match="hub_type must be one of"):
        make_factor("hub-nameless", mode="HUB", value="1")
    with pytest.raises(factors.FactorError, match="hub_type applies to HUB factors only"):
        make_factor("road-with-hub", value="1", hub_type="warehouse")
    org = make_org("initech")
    private = make_factor("initech-warehouse", mode="HUB", value="2.5", hub_type="warehouse", organization=org)
    assert private.to_dict()["unit"] == "kgCO2e/t" and private.to_dict()["hub_type"] == "warehouse"


def one_leg() -> dict:
    return {"type": "leg", "mode": "ROAD", "origin": {"label": "a"}, "destination": {"label": "b"},
            "distance": {"value": 10, "unit": "km"}}


@pytest.mark.parametrize("overrides, field, message", [
    ({"elements": []}, "elements", "must have at least 1 element"),
    ({"elements": [one_leg()] * 11}, "elements", "must have at most 10 elements (it has 11)"),
    ({"elements": [{"type": "hub", "hub_type": "warehouse", "factor_reference": TERMINAL}]}, "elements",
     'must contain at least one element with "type": "leg"'),
    ({"elements": [one_leg(), {"type": "hub", "hub_type": "warehouse"}]}, "elements[1].factor_reference",
     "is required"),
    ({"elements": [one_leg(), {"type": "hub", "hub_type": "dock", "factor_reference": "x"}]}, "elements[1].hub_type",
     "must be one of transshipment, storage_and_transshipment, warehouse, liquid_bulk_terminal, container_terminal"),
    ({"elements": [{**one_leg(), "colour": "red"}]}, "elements[0].colour", "is not an accepted field"),
    ({"elements": [{**one_leg(), "origin": {"country": "GB"}}]}, "elements[0].origin",
     "needs at least one of code, label, iata, locode or latitude"),
    ({"elements": [{**one_leg(), "origin": {"latitude": 10}}]}, "elements[0].origin.longitude",
     "is required with elements[0].origin.latitude"),
    ({"elements": [{**one_leg(), "origin": {"latitude": -91, "longitude": 0}}]}, "elements[0].origin.latitude",
     "must be at least -90"),
    ({"cargo": {"value": 2, "unit": "tonne", "tonnes_per_teu": 12}}, "cargo.tonnes_per_teu",
     'applies only when cargo.unit is "TEU"'),
    ({"cargo": {"value": 2, "unit": "pallet"}}, "cargo.unit", "must be one of tonne, kg, TEU"),
])
def test_a_body_the_schema_refuses_is_a_422_naming_the_field_and_what_to_do(client, acme, library, overrides,
                                                                           field, message):
    answer = post(client, acme, worked_example(**overrides), status=422)
    error = answer.json["error"]
    assert error["code"] == "INVALID_REQUEST"
    assert {"field": field, "message": message} in error["details"], answer.json
    assert f"{field} {message}" in error["message"]
    assert Shipment.select().count() == 0


def test_an_unknown_factor_or_customer_names_the_field_and_the_remedy(client, acme, library):
    body = worked_example()
    body["elements"][2]["factor_reference"] = "no-such-terminal"
    error = post(client, acme, body, status=404).json["error"]
    assert (error["code"], error["details"]) == (
        "FACTOR_NOT_FOUND", [{"field": "elements[2].factor_reference", "message": "names no active factor"}])
    assert error["message"] == ("No active governed factor no-such-terminal is available to this organization: "
                                "list the factors this key may use with `GET /v1/factors`.")
    error = post(client, acme, worked_example(customer_reference="nobody"), status=404).json["error"]
    assert (error["code"], error["details"]) == (
        "CUSTOMER_NOT_FOUND", [{"field": "customer_reference", "message": "names no customer"}])
    assert "create it with `emissions customer create` or in the workspace" in error["message"]


def test_a_place_without_anything_to_find_it_by_names_what_it_needs(client, acme, library):
    body = worked_example(elements=[{**one_leg(), "origin": {"country": "GB"}}])
    details = post(client, acme, body, status=422).json["error"]["details"]
    assert {"field": "elements[0].origin",
            "message": "needs at least one of code, label, iata, locode or latitude"} in details


@pytest.mark.on_both
def test_answers_match_the_openapi_document(client, acme, library):
    from helpers import check_response

    body = worked_example(cargo={"value": 1.25, "unit": "TEU", "tonnes_per_teu": 12.5})
    body["elements"][1]["origin"] = {"latitude": 31.2, "longitude": 121.6}  # off Shanghai, by coordinates
    created = post(client, acme, body, status=201)
    check_response(created, "/shipments", "POST")
    assert exact(created)["cargo"]["tonnes"] == Decimal("15.625")
    assert exact(created)["elements"][1]["distance"]["method"] == "sea_route"
    check_response(post(client, acme, body, status=200), "/shipments", "POST")
    shipment_id = created.json["id"]
    check_response(client.get(f"/v1/shipments/{shipment_id}", headers=acme.headers()), "/shipments/{id}", "GET")
    check_response(client.get("/v1/shipments", headers=acme.headers()), "/shipments", "GET")
    check_response(client.get("/v1/shipments?cursor=x", headers=acme.headers(), status=400), "/shipments", "GET")
    check_response(client.get("/v1/shipments?limit=1", headers=acme.headers()), "/shipments", "GET")
    leg = created.json["elements"][1]["calculation_id"]
    check_response(client.get(f"/v1/calculations/{leg}", headers=acme.headers()), "/calculations/{id}", "GET")
    check_response(client.get("/v1/customers/cust-1/emissions", headers=acme.headers()),
                   "/customers/{customerReference}/emissions", "GET")
    body["elements"][3]["factor_reference"] = "desnz-2025-rail-freight-train"
    check_response(post(client, acme, body, "other", status=422), "/shipments", "POST")


@pytest.mark.on_both
def test_analytics_verify_recounts_the_hubs_and_rebuild_repairs_them(client, acme, library, emissions):
    post(client, acme, worked_example(), status=201)
    assert emissions("analytics", "verify", "--json")[0] == 0
    hub_row = models.CustomerRollup.get(models.CustomerRollup.mode == "HUB")
    hub_row.emissions_kg += 1
    hub_row.save()
    status, out, _ = emissions("analytics", "verify", "--json")
    assert status != 0 and '"HUB"' in out
    assert emissions("analytics", "rebuild", "--json")[0] == 0
    assert recount.verify().drifted == []
    analytics = exact(client.get("/v1/customers/cust-1/emissions", headers=acme.headers()))["analytics"]
    assert analytics["hubs"]["emissions"]["value"] == 26
    assert analytics["emissions"]["value"] == sum(mode["emissions"]["value"] for mode in
                                                  analytics["by_mode"].values()) + analytics["hubs"]["emissions"]["value"]


@pytest.mark.on_both
def test_a_statement_counts_the_hubs_so_that_its_parts_add_up_to_its_totals(client, acme, library):
    client.post_json("/v1/shipments", worked_example(), headers=acme.headers("stmt"), status=201)
    statement = client.get("/v1/customers/cust-1/statement?from=2026-03-01&to=2026-03-31",
                           headers=acme.headers()).json
    from helpers import check_response
    check_response(client.get("/v1/customers/cust-1/statement", headers=acme.headers()),
                   "/customers/{customerReference}/statement", "GET")
    parts = [totals["emissions"]["value"] for totals in statement["by_mode"].values()]
    assert sum(Decimal(str(value)) for value in parts) + Decimal(str(statement["hubs"]["emissions"]["value"])) \
        == Decimal(str(statement["totals"]["emissions"]["value"]))
    terminal = [factor for factor in statement["factors"] if factor["reference"] == TERMINAL]
    assert terminal and terminal[0]["hub_count"] == 1 and terminal[0]["calculation_count"] == 0


@pytest.mark.on_both
def test_a_legs_calculation_keeps_the_place_codes_and_their_countries(client, acme, library):
    body = worked_example(elements=[
        {"type": "leg", "mode": "SEA", "origin": {"locode": "CNSHA", "label": "Shanghai"},
         "destination": {"locode": "gb fxt"}},
        {"type": "leg", "mode": "ROAD", "origin": {"code": "GBFXT", "label": "Felixstowe"},
         "destination": {"iata": "MAN"}, "distance": {"value": 150, "unit": "km"}},
        {"type": "leg", "mode": "AIR", "origin": {"iata": "man"}, "destination": {"iata": "JFK", "country": "us"}},
        {"type": "leg", "mode": "ROAD", "origin": {"iata": "JFK"},
         "destination": {"latitude": 40.7, "longitude": -74.0}, "distance": {"value": 30, "unit": "km"}}])
    answer = exact(post(client, acme, body, status=201))
    places = [(calculation["origin"], calculation["destination"]) for calculation in (
        exact(client.get(f"/v1/calculations/{element['calculation_id']}", headers=acme.headers()))
        for element in answer["elements"])]
    assert places == [
        ({"code": "CNSHA", "label": "Shanghai", "country": "CN"}, {"code": "GBFXT", "country": "GB"}),
        ({"code": "GBFXT", "label": "Felixstowe"}, {"code": "MAN", "country": "GB"}),
        ({"code": "MAN", "country": "GB"}, {"code": "JFK", "country": "US"}),
        ({"code": "JFK", "country": "US"}, {"label": "40.700000,-74.000000"})]
    # The shipment's own answer keeps the places as they were sent.
    assert answer["elements"][0]["origin"] == {"locode": "CNSHA", "label": "Shanghai"}


def chain_with_a_gap(**overrides) -> dict:
    """Shanghai to Rotterdam by sea, then a truck from Felixstowe: the crossing to Felixstowe is missing."""
    return worked_example(elements=[
        {"type": "leg", "mode": "SEA", "origin": {"locode": "CNSHA"}, "destination": {"locode": "NLRTM"}},
        {"type": "leg", "mode": "ROAD", "origin": {"locode": "GBFXT"}, "destination": {"label": "Trafford Park"},
         "distance": {"value": 372.4, "unit": "km"}}], **overrides)


@pytest.mark.on_both
def test_a_chain_with_a_gap_is_a_422_naming_both_ends(client, acme, library):
    response = post(client, acme, chain_with_a_gap(), status=422)
    check_response(response, "/shipments", "POST")
    error = response.json["error"]
    assert error["code"] == "INVALID_REQUEST"
    assert [detail["field"] for detail in error["details"]] == ["elements[1].origin", "elements[0].destination"]
    assert "elements[1].origin (GBFXT)" in error["message"] and "elements[0].destination (NLRTM)" in error["message"]
    assert "not_checked" in error["message"]
    assert Shipment.select().count() == 0 and models.Calculation.select().count() == 0
    assert WebhookEvent.select().count() == 0


@pytest.mark.on_both
@pytest.mark.parametrize("ended, starts", [
    ({"locode": "NLRTM"}, {"code": "nlrtm", "label": "Rotterdam"}),  # a free code compares with a LOCODE
    ({"locode": "NLRTM"}, {"iata": "AMS"}),  # a LOCODE and an IATA code cannot be compared
    ({"locode": "NLRTM"}, {"label": "Rotterdam"}),  # no code: nothing to compare
    ({"iata": "AMS", "code": "X1"}, {"code": "AMS"}),
])
def test_a_chain_whose_ends_meet_or_cannot_be_compared_is_accepted(client, acme, library, ended, starts):
    body = chain_with_a_gap()
    body["elements"][0]["destination"] = ended
    body["elements"][0]["distance"] = {"value": 19000, "unit": "km"}
    body["elements"][1]["origin"] = starts
    post(client, acme, body, status=201)


def test_continuity_checked_spelled_out_is_the_same_payload_as_left_out(client, acme, library):
    """The default spelled out replays: a retry that adds or drops `"continuity": "checked"` is not a 409."""
    first = post(client, acme, worked_example(), key="same", status=201)
    again = post(client, acme, worked_example(continuity="checked"), key="same", status=200)
    assert again.headers["Idempotent-Replayed"] == "true" and again.body == first.body
    spelled = post(client, acme, worked_example(continuity="checked"), key="spelled", status=201)
    assert post(client, acme, worked_example(), key="spelled", status=200).body == spelled.body
    assert post(client, acme, worked_example(continuity="not_checked"), key="same", status=409)


@pytest.mark.on_both
def test_a_hub_between_or_not_checked_lets_a_gap_through(client, acme, library):
    with_hub = chain_with_a_gap()
    with_hub["elements"].insert(1, {"type": "hub", "hub_type": "container_terminal", "factor_reference": TERMINAL})
    post(client, acme, with_hub, key="hub", status=201)
    post(client, acme, chain_with_a_gap(continuity="not_checked"), key="unchecked", status=201)
    warehouse_first = worked_example()  # an origin warehouse first: checked, and without a gap
    warehouse_first["elements"].insert(0, {"type": "hub", "hub_type": "container_terminal",
                                           "factor_reference": TERMINAL, "location": {"label": "Songjiang"}})
    post(client, acme, warehouse_first, key="warehouse", status=201)
    post(client, acme, chain_with_a_gap(continuity="checked"), key="checked", status=422)
    post(client, acme, chain_with_a_gap(continuity="sometimes"), key="bad", status=422)
    assert Shipment.select().count() == 3


def _paths(node, prefix=()):
    """Every (path) to a member or item of a JSON value."""
    if isinstance(node, dict):
        for name, value in node.items():
            yield (*prefix, name)
            yield from _paths(value, (*prefix, name))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield (*prefix, index)
            yield from _paths(value, (*prefix, index))


def test_every_schema_failure_of_a_shipment_is_explained_in_words_never_a_crash():
    """Each value put at each position of the worked example: the explanation of whatever fails names a
    field and says something other than "is invalid" (the explanations follow $refs and if/then)."""
    replacements = [None, {}, [], "x", -1, 0, True, {"latitude": 1}, {"type": "hub"}, [{}] * 11,
                    {"value": 1, "unit": "tonne", "tonnes_per_teu": 5}]
    for path in list(_paths(worked_example())):
        for replacement in replacements:
            body = jsoncodec.loads(jsoncodec.dumps(worked_example()).encode())
            target = body
            for part in path[:-1]:
                target = target[part]
            target[path[-1]] = jsoncodec.loads(jsoncodec.dumps(replacement).encode())
            for detail in schemas.validation_details("ShipmentRequest", body):
                assert detail["field"] and detail["message"] != "is invalid", (path, replacement, detail)
