"""GET /v1/customers/{ref}/lanes: a customer's lanes add up to its analytics (docs/api.md, "Lanes")."""
from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal

import pytest

from emissions import jsoncodec
from emissions import lanes as lanes_module
from emissions import statements
from emissions import workspace
from emissions.workspace import session as workspace_session
from conftest import TERMINAL, logistics_body, make_customer, make_key, post_calculation, workspace_of
from helpers import check_response, post, worked_example

MARCH = "from=2026-03-01&to=2026-03-31"


def lanes(client, persona, query: str = MARCH, reference: str = "cust-1", status: int = 200, headers=None):
    response = client.get(f"/v1/customers/{reference}/lanes" + (f"?{query}" if query else ""),
                          headers=headers or persona.headers(), status=status)
    return response if status != 200 else jsoncodec.loads(response.body)


def hamburg_to_rotterdam(reference: str, day: str = "2026-03-05", **overrides) -> dict:
    """A truck Hamburg to Rotterdam through a terminal, then a train on to Venlo: LOCODEs at both ends."""
    return worked_example(external_reference=reference, activity_date=day, cargo={"value": 8000, "unit": "kg"},
                          elements=[
                              {"type": "leg", "mode": "ROAD", "origin": {"locode": "DE HAM"},
                               "destination": {"locode": "NLRTM"}, "distance": {"value": 495, "unit": "km"}},
                              {"type": "hub", "hub_type": "container_terminal", "location": {"locode": "NLRTM"},
                               "factor_reference": TERMINAL},
                              {"type": "leg", "mode": "RAIL", "origin": {"locode": "NLRTM"},
                               "destination": {"locode": "NLVEN"}, "distance": {"value": 150, "unit": "km"}},
                          ], **overrides)


@pytest.fixture
def recorded(client, acme, library):  # noqa: F811
    """acme's cust-1 in March with two shipments on the Hamburg lane, the worked example (country to
    country, with a hub), and single calculations: two on GBLON to an unknown place, one on GBLON to GB
    by country; one shipment and one calculation in April."""
    shipped = [post(client, acme, body, key=f"ship-{n}", status=201).json for n, body in enumerate([
        worked_example(), hamburg_to_rotterdam("HH-1"), hamburg_to_rotterdam("HH-2", "2026-03-31"),
        hamburg_to_rotterdam("HH-3", "2026-04-01")])]
    singles = [jsoncodec.loads(post_calculation(client, acme, f"single-{n}", status=201, external_reference=f"c-{n}",
                                                 **fields).body)
               for n, fields in enumerate([
                   {}, {"cargo": {"value": 3, "unit": "tonne"}, "activity_date": "2026-03-01"},
                   {"destination": {"label": "Leeds", "country": "gb"}, "mode": "ROAD"},
                   {"activity_date": "2026-04-02"}])]
    return shipped, singles


def analytics(client, persona, query: str = MARCH) -> dict:
    return jsoncodec.loads(client.get(f"/v1/customers/cust-1/emissions?{query}", headers=persona.headers(),
                                      status=200).body)["analytics"]


def total(lanes_found: list[dict], *path) -> Decimal:
    found = Decimal(0)
    for lane in lanes_found:
        for name in path:
            lane = lane.get(name, {}) if isinstance(lane, dict) else {}
        found += lane if isinstance(lane, Decimal) else Decimal(0)
    return found


@pytest.mark.on_both
@pytest.mark.parametrize("query", [MARCH, "", "from=2026-04-01", "to=2026-03-05"])
def test_the_lanes_add_up_to_the_analytics_with_hubs(client, acme, recorded, query):
    assert_the_lanes_add_up(client, acme, query)


def void(client, persona, kind: str, record_id: str, key: str) -> None:
    client.post_json(f"/v1/{kind}/{record_id}/void", {"reason": "Booked twice"}, headers=persona.headers(key),
                     status=200)


@pytest.mark.on_both
@pytest.mark.parametrize("query", [MARCH, ""])
def test_a_voided_shipment_and_calculation_are_in_no_lane_and_the_lanes_still_add_up(client, acme, recorded, query):
    shipped, singles = recorded
    void(client, acme, "shipments", shipped[1]["id"], "void-ship")
    void(client, acme, "calculations", singles[0]["id"], "void-single")
    assert_the_lanes_add_up(client, acme, query)
    by_key = {(lane["origin"]["key"], lane["destination"]["key"]): lane for lane in lanes(client, acme, query)["lanes"]}
    assert by_key[("code:DEHAM", "code:NLVEN")]["shipment_count"] == (1 if query else 2)  # HH-2 (and April's HH-3)
    assert by_key[("code:GBLON", "unknown")]["calculation_count"] == (1 if query else 2)


def test_a_record_voided_after_the_voided_ids_were_read_is_left_out_by_its_body(client, acme, recorded, monkeypatch):
    shipped, singles = recorded
    void(client, acme, "shipments", shipped[1]["id"], "void-ship")
    void(client, acme, "calculations", singles[0]["id"], "void-single")
    monkeypatch.setattr(statements, "voided_ids", lambda *args: set())
    assert shipped[1]["id"] not in [body["id"] for body in lanes_module._shipment_bodies(acme.customer.id, None, None)]
    assert sorted(body["id"] for body in lanes_module._single_bodies(acme.customer.id, None, None, set())) == sorted(
        single["id"] for single in singles[1:])


def assert_the_lanes_add_up(client, acme, query: str) -> None:
    """Over all lanes, the period's analytics and the statement's counts; each lane's modes and hubs, its totals."""
    found = lanes(client, acme, query)
    expected = analytics(client, acme, query)
    statement = jsoncodec.loads(client.get(f"/v1/customers/cust-1/statement?{query}", headers=acme.headers(),
                                           status=200).body)["totals"]
    every = found["lanes"]
    assert total(every, "emissions", "value") == expected["emissions"]["value"]
    for part in ("ttw", "wtt", "unattributed"):
        assert total(every, "emissions", "breakdown", part) == expected["emissions"]["breakdown"][part]
    assert total(every, "activity", "value") == expected["activity"]["value"]
    assert sum(lane["shipment_count"] for lane in every) == statement["shipment_count"]
    assert sum(lane["calculation_count"] for lane in every) == statement["single_calculation_count"]
    for mode, numbers in expected["by_mode"].items():
        of_mode = [lane["by_mode"][mode] for lane in every if mode in lane["by_mode"]]
        assert total(of_mode, "emissions", "value") == numbers["emissions"]["value"]
        assert total(of_mode, "activity", "value") == numbers["activity"]["value"]
    hubs = [lane["hubs"] for lane in every if "hubs" in lane]
    assert sum(hub["count"] for hub in hubs) == expected.get("hubs", {}).get("count", 0)
    assert total(hubs, "emissions", "value") == expected.get("hubs", {}).get("emissions", {}).get("value", 0)
    # Each lane's modes and hubs add up to its own totals.
    for lane in every:
        assert total(list(lane["by_mode"].values()), "emissions", "value") + lane.get("hubs", {}).get(
            "emissions", {}).get("value", 0) == lane["emissions"]["value"]


@pytest.mark.on_both
def test_the_lanes_are_grouped_by_code_else_country_and_ordered_by_emissions(client, acme, recorded):
    shipped, singles = recorded
    response = client.get(f"/v1/customers/cust-1/lanes?{MARCH}", headers=acme.headers(), status=200)
    check_response(response, "/customers/{customerReference}/lanes", "get")
    found = jsoncodec.loads(response.body)
    assert (found["object"], found["customer"], found["environment"], found["period"]) == (
        "lanes", {"reference": "cust-1"}, "test", {"from": "2026-03-01", "to": "2026-03-31"})
    keys = [(lane["origin"]["key"], lane["destination"]["key"]) for lane in found["lanes"]]
    assert sorted(keys) == sorted([("country:CN", "country:GB"), ("code:DEHAM", "code:NLVEN"),
                                   ("code:GBLON", "unknown"), ("code:GBLON", "country:GB")])
    assert found["lane_count"] == 4
    emissions = [lane["emissions"]["value"] for lane in found["lanes"]]
    assert emissions == sorted(emissions, reverse=True)
    by_key = {key: lane for key, lane in zip(keys, found["lanes"])}

    hamburg = by_key[("code:DEHAM", "code:NLVEN")]
    assert (hamburg["origin"], hamburg["destination"]) == ({"key": "code:DEHAM", "code": "DEHAM", "country": "DE"},
                                                           {"key": "code:NLVEN", "code": "NLVEN", "country": "NL"})
    march = shipped[1:3]
    assert (hamburg["shipment_count"], hamburg["calculation_count"]) == (2, 0)
    assert hamburg["cargo"] == {"value": Decimal(16), "unit": "tonne"}
    legs = [[element for element in jsoncodec.loads(client.get(f"/v1/shipments/{shipment['id']}",
                                                                headers=acme.headers()).body)["elements"]]
            for shipment in march]
    road = sum((elements[0]["emissions"]["value"] for elements in legs), Decimal(0))
    road_tkm = sum((elements[0]["activity"]["value"] for elements in legs), Decimal(0))
    rail = sum((elements[2]["emissions"]["value"] for elements in legs), Decimal(0))
    hub = sum((elements[1]["emissions"]["value"] for elements in legs), Decimal(0))
    assert list(hamburg["by_mode"]) == ["ROAD", "RAIL"]
    assert hamburg["by_mode"]["ROAD"]["emissions"]["value"] == road
    assert hamburg["by_mode"]["ROAD"]["activity"] == {"value": road_tkm, "unit": "tkm"}
    assert hamburg["by_mode"]["ROAD"]["intensity"] == {
        "value": (road * 1000 / road_tkm).quantize(Decimal("0.001"), rounding=ROUND_HALF_EVEN), "unit": "gCO2e/tkm"}
    assert (hamburg["by_mode"]["ROAD"]["shipment_count"], hamburg["by_mode"]["ROAD"]["cargo"]["value"]) == (2, 16)
    assert hamburg["by_mode"]["RAIL"]["emissions"]["value"] == rail
    assert hamburg["hubs"]["count"] == 2 and hamburg["hubs"]["emissions"]["value"] == hub
    assert hamburg["hubs"]["activity"] == {"value": Decimal(16), "unit": "tonne"}
    assert hamburg["emissions"]["value"] == road + rail + hub
    assert hamburg["intensity"]["value"] == ((road + rail + hub) * 1000 / hamburg["activity"]["value"]).quantize(
        Decimal("0.001"), rounding=ROUND_HALF_EVEN)

    unknown = by_key[("code:GBLON", "unknown")]
    assert unknown["destination"] == {"key": "unknown", "code": None, "country": None}
    assert (unknown["shipment_count"], unknown["calculation_count"]) == (0, 2)
    assert unknown["cargo"]["value"] == Decimal("15.5")
    assert unknown["emissions"]["value"] == singles[0]["emissions"]["value"] + singles[1]["emissions"]["value"]
    assert by_key[("code:GBLON", "country:GB")]["destination"] == {"key": "country:GB", "code": None, "country": "GB"}


def test_ties_are_ordered_by_the_lanes_key(client, acme):
    for number, destination in enumerate(["ZZZ", "AAA", "MMM"]):
        post_calculation(client, acme, f"tie-{number}", status=201, destination={"code": destination})
    found = lanes(client, acme)
    assert [lane["destination"]["key"] for lane in found["lanes"]] == ["code:AAA", "code:MMM", "code:ZZZ"]


@pytest.mark.on_both
def test_the_lanes_are_the_same_read_one_body_at_a_time(client, acme, recorded, monkeypatch):
    """Batches cut between a shipment's legs and between shipments change nothing."""
    whole = lanes(client, acme, "")
    monkeypatch.setattr(statements, "BODY_BATCH", 1)
    assert lanes(client, acme, "") == whole


def test_a_leg_is_never_read_as_a_single_calculation(acme, recorded):
    """A shipment's leg found among the calculations (its shipment written after the shipments were read)
    belongs to no lane of its own."""
    shipped, singles = recorded
    found = list(lanes_module._single_bodies(acme.customer.id, None, None, set()))
    assert sorted(body["id"] for body in found) == sorted(single["id"] for single in singles)


def test_codes_group_whatever_their_case_and_a_code_named_in_two_countries_has_none(client, acme):
    post_calculation(client, acme, "case-1", status=201, destination={"code": "nlrtm", "country": "NL"})
    post_calculation(client, acme, "case-2", status=201, destination={"code": "NL RTM", "country": "BE"})
    post_calculation(client, acme, "case-3", status=201, origin={"label": "Depot"}, destination={"code": "X1"})
    found = lanes(client, acme)["lanes"]
    assert [(lane["origin"], lane["destination"], lane["calculation_count"]) for lane in found] == [
        ({"key": "code:GBLON", "code": "GBLON", "country": "GB"}, {"key": "code:NLRTM", "code": "NLRTM",
                                                                     "country": None}, 2),
        ({"key": "unknown", "code": None, "country": None}, {"key": "code:X1", "code": "X1", "country": None}, 1)]


def test_an_empty_period_has_no_lanes(client, acme, recorded):
    assert lanes(client, acme, "from=2025-01-01&to=2025-12-31")["lanes"] == []


@pytest.mark.parametrize("query, field", [
    ("from=2026-13-01", "from"), ("to=yesterday", "to"), ("period=2026-03", "period"), ("limit=5", "limit"),
    ("from=2026-03-31&to=2026-03-01", "from"), ("from=2026-03-01&from=2026-03-02", "from")])
def test_bad_parameters_are_refused_as_the_other_period_reads_refuse_them(client, acme, query, field):
    error = lanes(client, acme, query, status=400).json["error"]
    assert error["code"] == "INVALID_REQUEST" and error["details"][0]["field"] == field


def test_an_unknown_customer_another_tenants_and_another_environments_are_not_found(client, acme, globex, secret):
    assert lanes(client, acme, reference="nobody", status=404).json["error"]["code"] == "CUSTOMER_NOT_FOUND"
    make_customer(globex.org, "only-globex")
    assert lanes(client, acme, reference="only-globex", status=404).json["error"]["code"] == "CUSTOMER_NOT_FOUND"
    make_customer(acme.org, "only-live", environment="live")
    assert lanes(client, acme, reference="only-live", status=404).json["error"]["code"] == "CUSTOMER_NOT_FOUND"
    reader = make_key(acme.org, secret, scopes=["customers:read"])
    assert lanes(client, acme, headers={"Authorization": f"Bearer {reader}"}, status=403).json["error"][
        "code"] == "INSUFFICIENT_SCOPE"


@pytest.mark.on_both
def test_each_environment_and_tenant_sees_its_own_lanes(client, acme, globex, secret):
    post_calculation(client, acme, "test-1", status=201)
    live = make_key(acme.org, secret, environment="live")
    make_customer(acme.org, "cust-1", environment="live")
    client.post_json("/v1/emissions/logistics", {**logistics_body(), "destination": {"code": "FRPAR"}},
                     headers={"Authorization": f"Bearer {live}", "Idempotency-Key": "live-1"}, status=201)
    post_calculation(client, globex, "globex-1", status=201, destination={"code": "ITMIL"})
    assert [lane["destination"]["key"] for lane in lanes(client, acme)["lanes"]] == ["unknown"]
    assert [lane["destination"]["key"] for lane in lanes(client, acme, headers={
        "Authorization": f"Bearer {live}"})["lanes"]] == ["code:FRPAR"]
    assert [lane["destination"]["key"] for lane in lanes(client, globex)["lanes"]] == ["code:ITMIL"]


@pytest.fixture
def signed_in(app, client, acme):
    user = workspace.create_user(acme.org, "ops@acme.example", "a long enough password", actor="cli")
    client.set_cookie(workspace_session.COOKIE, workspace_of(app).sessions.issue(user))


@pytest.mark.on_both
def test_the_customer_page_shows_the_top_lanes_of_the_period(client, acme, recorded, signed_in):
    for number in range(5):  # six lanes in March: the page shows the top five
        post_calculation(client, acme, f"more-{number}", status=201, destination={"code": f"<i>X{number}"},
                         cargo={"value": 1, "unit": "tonne"})
    page = client.get("/workspace/customers/cust-1?period=custom&from=2026-03-01&to=2026-03-31", status=200)
    found = lanes(client, acme)
    table = page.html.find("table", id="lanes")
    rows = table.find("tbody").find_all("tr")
    assert [row["data-lane"] for row in rows] == [
        f"{lane['origin']['key']} {lane['destination']['key']}" for lane in found["lanes"][:5]]
    assert "the top 5 of 9" in page.text
    header = " ".join(table.find("thead").get_text(" ").split())
    unit = "t CO2e" if max(lane["emissions"]["value"] for lane in found["lanes"][:5]) >= 1000 else "kgCO2e"
    assert f"Emissions {unit}" in header
    first = rows[0].find_all("td")
    assert [cell.find("bdi").get_text() for cell in first[:2]] == [
        found["lanes"][0]["origin"]["code"] or found["lanes"][0]["origin"]["country"],
        found["lanes"][0]["destination"]["code"] or found["lanes"][0]["destination"]["country"]]
    assert "/v1/customers/cust-1/lanes?from=2026-03-01&amp;to=2026-03-31" in page.text
    all_lanes = client.get("/workspace/customers/cust-1?period=all", status=200)
    assert "&lt;I&gt;X0" in all_lanes.text and all_lanes.html.find("table", id="lanes").find("i") is None
    nothing = client.get("/workspace/customers/cust-1?period=custom&from=2025-01-01&to=2025-01-31", status=200)
    assert nothing.html.find("table", id="lanes") is None and "No lanes in this period." in nothing.text
