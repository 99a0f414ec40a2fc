"""Distances a shipment's legs get from the service: great circle for AIR, sea route + 15% for SEA, offline."""
from __future__ import annotations

import re
import subprocess
import sys
from decimal import Decimal

import pytest

from emissions import distances
from emissions.errors import InvalidRequest


def leg(mode: str, origin: dict, destination: dict, **fields) -> dict:
    return {"type": "leg", "mode": mode, "origin": origin, "destination": destination, **fields}


def test_air_is_the_great_circle_between_two_airports_without_an_uplift():
    found = distances.leg_distance(leg("AIR", {"iata": "LHR"}, {"iata": "jfk"}), "elements[0]")
    # Heathrow to JFK is 5,540 km on the sphere (ICAO's calculator: 5,539 to 5,555 km by method).
    assert found.method == "great_circle" and Decimal(5530) < found.value < Decimal(5550)
    assert found.to_dict() == {"value": found.value, "unit": "km", "method": "great_circle"}


def test_coordinates_serve_where_there_is_no_code():
    found = distances.leg_distance(leg("AIR", {"latitude": 0, "longitude": 0}, {"latitude": 0, "longitude": 1}),
                                   "elements[0]")
    assert found.value == Decimal("111.195")  # one degree of the equator on the IUGG mean sphere


def test_sea_is_the_sea_route_between_two_ports_plus_fifteen_percent():
    found = distances.leg_distance(leg("SEA", {"locode": "NLRTM"}, {"locode": "GB FXT"}), "elements[2]")
    assert found.method == "sea_route" and found.adjustment == "GLEC: shortest sea route + 15%"
    assert found.value == (found.raw * Decimal("1.15")).quantize(Decimal("0.001"))
    assert Decimal(150) < found.raw < Decimal(350)  # Rotterdam to Felixstowe, across the North Sea
    assert found.to_dict()["adjustment"] == {"rule": found.adjustment, "unadjusted": found.raw}
    assert Decimal(0) <= found.snapped[0] < Decimal(10) and Decimal(0) <= found.snapped[1] < Decimal(10)
    assert found.to_dict()["snapped"] == {"origin_km": found.snapped[0], "destination_km": found.snapped[1]}


@pytest.mark.parametrize("origin, destination, field", [
    ({"latitude": 47.92, "longitude": 106.92}, {"locode": "CNSHA"}, "elements[1].origin"),  # Ulaanbaatar
    ({"locode": "NLRTM"}, {"latitude": 39.74, "longitude": -104.99}, "elements[1].destination"),  # Denver
    ({"locode": "NLRTM"}, {"locode": "USDEN"}, "elements[1].destination"),  # an inland "port" of searoute's list
])
def test_a_sea_leg_from_inland_is_refused_saying_how_far_the_sea_is(origin, destination, field):
    with pytest.raises(InvalidRequest) as raised:
        distances.leg_distance(leg("SEA", origin, destination), "elements[1]")
    [detail] = raised.value.details
    assert raised.value.status == 422 and detail["field"] == field
    assert re.fullmatch(r"is [0-9,]+ km from the sea network \(a SEA leg's places may be at most 500 km from it\)",
                        detail["message"]), detail["message"]
    kilometres = int(detail["message"].split()[1].replace(",", ""))
    assert kilometres > distances.MAX_SEA_SNAP_KM


def test_a_sea_leg_just_inside_the_limit_is_measured_and_says_how_far_it_snapped():
    # Shanghai's city centre (14 km from the network's node) to Rotterdam's port
    found = distances.leg_distance(leg("SEA", {"latitude": 31.23, "longitude": 121.47}, {"locode": "NLRTM"}),
                                   "elements[0]")
    assert found.method == "sea_route" and Decimal(0) < found.snapped[0] < distances.MAX_SEA_SNAP_KM


def test_a_given_distance_is_used_as_given():
    found = distances.leg_distance(leg("SEA", {"locode": "NLRTM"}, {"locode": "GBFXT"},
                                       distance={"value": Decimal("250.5"), "unit": "km"}), "elements[0]")
    assert (found.value, found.method, found.adjustment) == (Decimal("250.5"), "given", None)


@pytest.mark.parametrize("element, field", [
    (leg("AIR", {"iata": "XQX"}, {"iata": "MAN"}), "elements[3].origin.iata"),
    (leg("SEA", {"locode": "GBFXT"}, {"locode": "GBZZZ"}), "elements[3].destination.locode"),
    (leg("ROAD", {"label": "a"}, {"label": "b"}), "elements[3].distance"),
    (leg("RAIL", {"latitude": 1, "longitude": 2}, {"latitude": 3, "longitude": 4}), "elements[3].distance"),
    (leg("SEA", {"iata": "PVG"}, {"locode": "GBFXT"}), "elements[3].distance"),
])
def test_what_cannot_be_measured_is_a_422_naming_the_field(element, field):
    with pytest.raises(InvalidRequest) as raised:
        distances.leg_distance(element, "elements[3]")
    assert raised.value.status == 422 and [detail["field"] for detail in raised.value.details] == [field]


def test_distances_are_worked_out_with_no_network_access():
    program = (
        "import socket\n"
        "def refuse(*args, **kwargs):\n"
        "    raise OSError('no network in this test')\n"
        "socket.socket.connect = socket.create_connection = socket.getaddrinfo = refuse\n"
        "from emissions import distances\n"
        "sea = distances.leg_distance({'mode': 'SEA', 'origin': {'locode': 'CNSHA'},"
        " 'destination': {'locode': 'GBFXT'}}, 'e')\n"
        "air = distances.leg_distance({'mode': 'AIR', 'origin': {'iata': 'PVG'}, 'destination': {'iata': 'MAN'}}, 'e')\n"
        "print(sea.raw, air.value)\n")
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    sea, air = (Decimal(part) for part in result.stdout.split())
    assert Decimal(18000) < sea < Decimal(21000) and Decimal(9000) < air < Decimal(9400)


def test_the_api_refuses_a_sea_leg_from_ulaanbaatar_naming_the_place(client, acme):
    from emissions.models import Shipment

    body = {"customer_reference": "cust-1", "external_reference": "PO-UB", "activity_date": "2026-03-01",
            "cargo": {"value": 10, "unit": "tonne"},
            "elements": [{"type": "leg", "mode": "SEA", "origin": {"latitude": 47.92, "longitude": 106.92},
                          "destination": {"locode": "CNSHA"}}]}
    response = client.post_json("/v1/shipments", body, headers=acme.headers("idem-1"), status=422)
    [detail] = response.json["error"]["details"]
    assert detail["field"] == "elements[0].origin" and "km from the sea network" in detail["message"]
    assert Shipment.select().count() == 0
