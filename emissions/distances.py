"""Distances the service works out itself for a shipment's legs, offline (docs/methodology.md, "Distances").

AIR: the great-circle distance between two airports (IATA codes, coordinates from `airportsdata`)
or two coordinates. SEA: the sea-route distance on Eurostat's maritime network (`searoute`)
between two ports (UN/LOCODE, from searoute's port list) or coordinates, plus GLEC's 15%.
ROAD and RAIL need the client's distance: no road or rail network ships offline.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from functools import lru_cache

from .errors import InvalidRequest

# The IUGG mean Earth radius, the one great-circle calculators (GLEC, ICAO's) use.
EARTH_RADIUS_KM = 6371.0088
THREE_PLACES = Decimal("0.001")
# GLEC Framework v3 (and ISO 14083's guidance it carries): a modelled shortest sea route is
# lengthened by 15% for the deviations real voyages make.
SEA_ROUTE_UPLIFT = Decimal("1.15")
# A sea route runs between the network's nodes nearest the two places; a place farther than this
# from its node is not at sea or a port (Ulaanbaatar is 1,334 km from it, Rotterdam 1 km, Shanghai
# 14 km; half of searoute's own port list is within 32 km, and what lies past 500 km is inland:
# Denver, Timbuktu, Laredo).
MAX_SEA_SNAP_KM = Decimal(500)


@dataclass(frozen=True)
class Distance:
    """A leg's distance in km as used, how it was found, and the adjustment applied to it."""

    value: Decimal
    method: str  # given | great_circle | sea_route
    raw: Decimal | None = None  # before the adjustment, when one was applied
    adjustment: str | None = None
    snapped: tuple[Decimal, Decimal] | None = None  # sea_route: km from each place to the network

    def to_dict(self) -> dict:
        found = {"value": self.value, "unit": "km", "method": self.method}
        if self.adjustment is not None:
            found["adjustment"] = {"rule": self.adjustment, "unadjusted": self.raw}
        if self.snapped is not None:
            found["snapped"] = {"origin_km": self.snapped[0], "destination_km": self.snapped[1]}
        return found


def unknown(field: str, message: str) -> InvalidRequest:
    """The 422 naming the field the service could not use."""
    return InvalidRequest(f"The request body is invalid: {field} {message}.", status=422,
                          details=[{"field": field, "message": message}])


@lru_cache(maxsize=1)
def _airports() -> dict:
    import airportsdata  # loaded on the first AIR leg, not with the service

    return airportsdata.load("IATA")


@lru_cache(maxsize=1)
def _ports() -> dict[str, tuple[float, float]]:
    """UN/LOCODE -> (longitude, latitude) of every port in searoute's port list."""
    from searoute.data.ports_dict import node_list  # a large module: imported on the first SEA leg

    return {properties["port"].upper(): (properties["x"], properties["y"])
            for properties in node_list.values() if properties.get("port")}


def airport(code: str, field: str) -> tuple[float, float]:
    """(latitude, longitude) of an airport by IATA code, or the 422 naming `field`."""
    found = _airports().get(code.upper())
    if found is None:
        raise unknown(field, f"is not an IATA airport code the service knows ({code!r})")
    return float(found["lat"]), float(found["lon"])


def port(locode: str, field: str) -> tuple[float, float]:
    """(latitude, longitude) of a port by UN/LOCODE, or the 422 naming `field`."""
    found = _ports().get(locode.upper().replace(" ", ""))
    if found is None:
        raise unknown(field, f"is not a UN/LOCODE of a port in the service's port list ({locode!r})")
    return found[1], found[0]


def great_circle_km(origin: tuple[float, float], destination: tuple[float, float]) -> Decimal:
    """The haversine distance in km between two (latitude, longitude) points, to the metre."""
    lat1, lon1, lat2, lon2 = map(math.radians, (*origin, *destination))
    half = (math.sin((lat2 - lat1) / 2) ** 2
            + math.cos(lat1) * math.cos(lat2) * math.sin((lon2 - lon1) / 2) ** 2)
    kilometres = 2 * EARTH_RADIUS_KM * math.asin(min(1.0, math.sqrt(half)))
    return Decimal(repr(kilometres)).quantize(THREE_PLACES, rounding=ROUND_HALF_EVEN)


# A shortest-path search over the whole maritime network: kept per lane, since shippers repeat lanes.
@lru_cache(maxsize=4096)
def sea_route(origin: tuple[float, float], destination: tuple[float, float]) -> tuple[Decimal, Decimal, Decimal]:
    """The shortest sea route in km between two (latitude, longitude) points, to the metre, and the
    great-circle km from each point to the network node the route starts or ends at."""
    import searoute  # networkx and the network load on the first SEA leg

    route = searoute.searoute([origin[1], origin[0]], [destination[1], destination[0]], units="km")
    length = Decimal(repr(float(route["properties"]["length"]))).quantize(THREE_PLACES, rounding=ROUND_HALF_EVEN)
    points = route["geometry"]["coordinates"]
    if not points:  # no route at all: both places snap to one node
        return length, Decimal(0), Decimal(0)
    (first_longitude, first_latitude), (last_longitude, last_latitude) = points[0][:2], points[-1][:2]
    return (length, great_circle_km(origin, (first_latitude, first_longitude)),
            great_circle_km(destination, (last_latitude, last_longitude)))


def _coordinates(place: dict) -> tuple[float, float] | None:
    if "latitude" in place and "longitude" in place:
        return float(place["latitude"]), float(place["longitude"])
    return None


def _point(mode: str, place: dict, field: str) -> tuple[float, float] | None:
    """The place's position for a leg of `mode`: its airport or port code first, then its coordinates."""
    if mode == "AIR" and "iata" in place:
        return airport(place["iata"], f"{field}.iata")
    if mode == "SEA" and "locode" in place:
        return port(place["locode"], f"{field}.locode")
    return _coordinates(place)


HOW = {"AIR": "two places with an iata code or coordinates", "SEA": "two places with a locode or coordinates"}


def leg_distance(leg: dict, field: str) -> Distance:
    """The distance of a leg at `field` (e.g. "elements[1]"): the one given, or the one worked out."""
    if "distance" in leg:
        return Distance(leg["distance"]["value"], "given")
    mode = leg["mode"]
    if mode not in HOW:
        raise unknown(f"{field}.distance", f"is required for a {mode} leg (no {mode.lower()} network ships "
                                           "with the service)")
    origin = _point(mode, leg["origin"], f"{field}.origin")
    destination = _point(mode, leg["destination"], f"{field}.destination")
    if origin is None or destination is None:
        raise unknown(f"{field}.distance", f"is required unless the leg has {HOW[mode]}")
    if mode == "AIR":
        # No +95 km here: the DESNZ air factors are built for great-circle distances (methodology.md).
        return Distance(great_circle_km(origin, destination), "great_circle")
    raw, origin_gap, destination_gap = sea_route(origin, destination)
    for end, gap in (("origin", origin_gap), ("destination", destination_gap)):
        if gap > MAX_SEA_SNAP_KM:
            raise unknown(f"{field}.{end}", f"is {gap:,.0f} km from the sea network (a SEA leg's places may be at "
                                            f"most {MAX_SEA_SNAP_KM:,.0f} km from it)")
    adjusted = (raw * SEA_ROUTE_UPLIFT).quantize(THREE_PLACES, rounding=ROUND_HALF_EVEN)
    return Distance(adjusted, "sea_route", raw, "GLEC: shortest sea route + 15%", (origin_gap, destination_gap))
