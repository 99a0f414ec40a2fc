"""GET /v1/factors: the active factors a key may use, its organization's and the shared library's, listed
by the rules of GET /v1/calculations (filters, limit, starting_after, has_more, 400 on what it cannot use)."""
from __future__ import annotations

import datetime as dt

import pytest

from emissions import factors, jsoncodec
from conftest import make_factor, make_key, make_org, post_calculation
from helpers import check_response

URL = "/v1/factors"


def listed(client, persona, query: str = "", status: int = 200):
    response = client.get(f"{URL}?{query}" if query else URL, headers=persona.headers(), status=status)
    assert response.content_type == "application/json"
    return response


def references(response) -> list[str]:
    return [item["reference"] for item in response.json["data"]]


def retire(reference: str) -> None:
    factors.retire(reference, actor="test")


@pytest.fixture
def catalogue(acme, globex):
    """road-default (shared, from acme's fixture) and: a shared AIR factor with parts in its second version,
    a shared hub factor, acme's own SEA factor, globex's own ROAD factor, a draft and a retired one."""
    make_factor("air-freight", mode="AIR", value="1.1", name="Freight flight v1", radiative_forcing=False)
    make_factor("air-freight", mode="AIR", value=None, ttw_value="0.89939", wtt_value="0.13516",
                name="Freight flight", source="DESNZ 2025", region="GB", radiative_forcing=True,
                valid_to=dt.date(2026, 12, 31), ttw_id="air-ttw-1", wtt_id="air-wtt-1",
                publication_title="GHG conversion factors", publication_publisher="DESNZ", publication_year=2025,
                publication_licence="OGL v3")
    make_factor("terminal", mode="HUB", value="1.3", name="Container terminal", hub_type="container_terminal")
    make_factor("acme-sea", mode="SEA", value="0.016", name="Acme's own ship", organization=acme.org)
    make_factor("globex-road", mode="ROAD", value="0.2", name="Globex's own truck", organization=globex.org)
    make_factor("draft-only", mode="ROAD", value="0.3", name="Not yet", draft=True)
    make_factor("old-road", mode="ROAD", value="0.4", name="Gone")
    retire("old-road")


@pytest.mark.on_both
def test_the_list_holds_the_active_factors_of_the_organization_and_the_shared_library(client, acme, globex,
                                                                                      catalogue):
    answer = listed(client, acme)
    assert references(answer) == sorted(["acme-sea", "air-freight", "road-default", "terminal"])
    assert answer.json["object"] == "list" and answer.json["has_more"] is False
    air = jsoncodec.loads(answer.body)["data"][references(answer).index("air-freight")]
    assert air == {
        "object": "factor", "reference": "air-freight", "version": 2, "name": "Freight flight", "mode": "AIR",
        "hub_type": None, "unit": "kgCO2e/tkm", "wtw": jsoncodec.loads(b"1.03455"),
        "ttw": jsoncodec.loads(b"0.89939"), "wtt": jsoncodec.loads(b"0.13516"), "region": "GB",
        "valid_from": "2025-01-01", "valid_to": "2026-12-31", "source": "DESNZ 2025",
        "source_row": {"ttw_id": "air-ttw-1", "wtt_id": "air-wtt-1"},
        "publication": {"title": "GHG conversion factors", "publisher": "DESNZ", "year": 2025, "licence": "OGL v3"},
        "radiative_forcing": True, "owner": "shared"}
    by_reference = {item["reference"]: item for item in answer.json["data"]}
    assert by_reference["acme-sea"]["owner"] == "organization"
    assert (by_reference["terminal"]["hub_type"], by_reference["terminal"]["unit"]) == ("container_terminal",
                                                                                        "kgCO2e/t")
    assert by_reference["road-default"]["ttw"] is None and by_reference["road-default"]["wtt"] is None
    check_response(answer, "/factors", "get")
    # Another organization never sees acme's own factor, and acme never sees globex's.
    assert references(listed(client, globex)) == sorted(["air-freight", "globex-road", "road-default", "terminal"])
    assert references(listed(client, globex, "reference=acme-sea")) == []
    assert references(listed(client, acme, "reference=globex-road")) == []


@pytest.mark.on_both
@pytest.mark.parametrize("query, expected", [
    ("mode=ROAD", ["road-default"]),
    ("mode=AIR", ["air-freight"]),
    ("mode=HUB", ["terminal"]),
    ("mode=RAIL", []),
    ("hub_type=container_terminal", ["terminal"]),
    ("hub_type=warehouse", []),
    ("reference=acme-sea", ["acme-sea"]),
    ("reference=old-road", []),
    ("reference=draft-only", []),
    ("mode=SEA&reference=acme-sea", ["acme-sea"]),
    ("mode=ROAD&reference=acme-sea", []),
])
def test_the_filters_combine(client, acme, catalogue, query, expected):
    assert references(listed(client, acme, query)) == expected


@pytest.mark.on_both
def test_pages_follow_one_another_by_reference_with_has_more(client, acme, catalogue):
    for index in range(5):
        make_factor(f"acme-road-{index}", organization=acme.org)
    everything = references(listed(client, acme, "limit=100"))
    assert len(everything) == 9
    seen, query = [], "limit=2"
    while True:
        page = listed(client, acme, query)
        assert len(page.json["data"]) <= 2
        seen += references(page)
        if not page.json["has_more"]:
            break
        query = f"limit=2&starting_after={seen[-1]}"
    assert seen == everything
    assert len(set(seen)) == 9
    # A page after a reference that was retired meanwhile starts where that reference stood.
    retire(everything[3])
    assert references(listed(client, acme, f"starting_after={everything[3]}")) == everything[4:]
    assert references(listed(client, acme, "limit=20")) == everything[:3] + everything[4:]


@pytest.mark.parametrize("query, details", [
    ("x=1", [{"field": "x", "message": "is not an accepted query parameter"}]),
    ("mode=BIKE", [{"field": "mode", "message": "must be one of ROAD, SEA, AIR, RAIL, HUB"}]),
    ("hub_type=dock", [{"field": "hub_type", "message": "must be one of transshipment, storage_and_transshipment, "
                                                       "warehouse, liquid_bulk_terminal, container_terminal"}]),
    ("limit=0", [{"field": "limit", "message": "must be an integer from 1 to 100"}]),
    ("limit=101", [{"field": "limit", "message": "must be an integer from 1 to 100"}]),
    ("reference=", [{"field": "reference", "message": "must not be empty"}]),
    ("mode=ROAD&mode=SEA", [{"field": "mode", "message": "is given more than once"}]),
    ("customer_reference=cust-1", [{"field": "customer_reference", "message": "is not an accepted query parameter"}]),
])
def test_a_query_the_list_cannot_use_is_a_400_naming_it(client, acme, query, details):
    answer = listed(client, acme, query, status=400)
    assert answer.json["error"]["code"] == "INVALID_REQUEST"
    assert answer.json["error"]["details"] == details
    check_response(answer, "/factors", "get")


def test_a_key_with_emissions_read_or_calculate_may_list_and_others_may_not(client, acme, secret):
    for scopes, status in ((["emissions:read"], 200), (["emissions:calculate"], 200),
                           (["customers:read"], 403)):
        key = make_key(acme.org, secret, scopes=scopes)
        answer = client.get(URL, headers={"Authorization": f"Bearer {key}"}, status=status)
        check_response(answer, "/factors", "get")
    assert client.get(URL, status=401).json["error"]["code"] == "INVALID_API_KEY"


def test_a_suspended_organization_lists_nothing(client, secret):
    org = make_org("paused", status="suspended")
    key = make_key(org, secret)
    answer = client.get(URL, headers={"Authorization": f"Bearer {key}"}, status=403)
    assert answer.json["error"]["code"] == "ORGANIZATION_NOT_ACTIVE"


def test_a_factor_not_found_is_one_the_list_does_not_hold(client, acme, globex, catalogue):
    """The remedy FACTOR_NOT_FOUND names: what the list holds calculates, what it lacks does not."""
    assert "globex-road" not in references(listed(client, acme))
    refused = post_calculation(client, acme, factor_reference="globex-road", status=404)
    assert "`GET /v1/factors`" in refused.json["error"]["message"]
    assert "road-default" in references(listed(client, acme, "mode=ROAD"))
    post_calculation(client, acme, "idem-2", factor_reference="road-default", status=201)
