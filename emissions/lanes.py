"""A customer's lanes for a period: where its freight went, and what each lane emitted (docs/api.md, "Lanes").

A shipment's lane runs from its first leg's origin to its last leg's destination; a single calculation's
from its own origin to its own destination. Each end is grouped by its code where known (the LOCODE,
IATA code or the place's own `code`, as the leg's calculation keeps it), else by its country, else it
is "unknown". The numbers are the stored calculations' and hubs', added exactly as the analytics add
them, so that the lanes add up to the customer's analytics for the same period to the decimal; a voided
shipment or calculation (docs/api.md, "Corrections") counts in no lane, as it counts in no analytics.

The period's shipments and calculations are found through the customer's indexes, unsorted, and their
bodies read a batch at a time; the lanes are added up and ordered here, so no read sorts the
customer's history (tests/test_page_plans.py).
"""
from __future__ import annotations

import datetime as dt
import itertools
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Iterator

from . import customers
from . import jsoncodec
from . import shipments
from . import statements
from .db import EXACT_SUM
from .models import MODES, Calculation, Shipment

GRAMS_PER_KG = Decimal(1000)
THREE_PLACES = Decimal("0.001")  # gCO2e/tkm to 3 places: the 6 places of kgCO2e/tkm the statement gives
UNKNOWN = "unknown"
ZERO = Decimal(0)


@dataclass(frozen=True, order=True)
class End:
    """One end of a lane as it is grouped: by code, else by country, else unknown."""

    key: str  # "code:DEHAM", "country:DE" or "unknown"
    code: str | None = None
    country: str | None = None


def end_of(place: dict) -> End:
    """The lane end of a place as a calculation shows it (code, label, country)."""
    country = place.get("country")
    country = country.upper() if country else None
    code = place.get("code")
    if code:
        code = code.upper().replace(" ", "")  # as shipments compare codes: DE HAM is DEHAM
        return End(f"code:{code}", code=code)
    if country:
        return End(f"country:{country}", country=country)
    return End(UNKNOWN)


@dataclass
class Amounts:
    """Exact sums of what a lane, or one mode of it, holds; TTW and WTT over what has them."""

    shipment_count: int = 0
    calculation_count: int = 0
    cargo_tonnes: Decimal = ZERO
    activity_tkm: Decimal = ZERO
    emissions_kg: Decimal = ZERO
    emissions_ttw_kg: Decimal = ZERO
    emissions_wtt_kg: Decimal = ZERO

    def add_emissions(self, emissions: dict) -> None:
        """A calculation's, a leg's or a hub's emissions (with its breakdown when it has one)."""
        self.emissions_kg = EXACT_SUM.add(self.emissions_kg, emissions["value"])
        breakdown = emissions.get("breakdown")
        if breakdown:
            self.emissions_ttw_kg = EXACT_SUM.add(self.emissions_ttw_kg, breakdown["ttw"])
            self.emissions_wtt_kg = EXACT_SUM.add(self.emissions_wtt_kg, breakdown["wtt"])

    def add_moved(self, tonnes: Decimal | None, tkm: Decimal, emissions: dict) -> None:
        """A leg or a single calculation: its tkm and emissions, and its tonnes when they are counted here."""
        if tonnes is not None:
            self.cargo_tonnes = EXACT_SUM.add(self.cargo_tonnes, tonnes)
        self.activity_tkm = EXACT_SUM.add(self.activity_tkm, tkm)
        self.add_emissions(emissions)

    def emissions(self) -> dict:
        """As the analytics write emissions: value, and ttw, wtt and unattributed adding up to it."""
        unattributed = EXACT_SUM.subtract(EXACT_SUM.subtract(self.emissions_kg, self.emissions_ttw_kg),
                                          self.emissions_wtt_kg)
        return {"value": self.emissions_kg, "unit": "kgCO2e",
                "breakdown": {"ttw": self.emissions_ttw_kg, "wtt": self.emissions_wtt_kg,
                              "unattributed": unattributed}}

    def to_dict(self) -> dict:
        return {"shipment_count": self.shipment_count, "calculation_count": self.calculation_count,
                "cargo": {"value": self.cargo_tonnes, "unit": "tonne"},
                "activity": {"value": self.activity_tkm, "unit": "tkm"},
                "emissions": self.emissions(), "intensity": intensity(self.emissions_kg, self.activity_tkm)}


def intensity(emissions_kg: Decimal, activity_tkm: Decimal) -> dict:
    """gCO2e per tkm, rounded half-even to 3 places; null without activity."""
    value = None
    if activity_tkm:
        value = (EXACT_SUM.multiply(emissions_kg, GRAMS_PER_KG) / activity_tkm).quantize(
            THREE_PLACES, rounding=ROUND_HALF_EVEN)
    return {"value": value, "unit": "gCO2e/tkm"}


@dataclass
class Lane:
    """A lane being added up: its totals, its modes and its shipments' hubs."""

    origin: End
    destination: End
    countries: tuple[set, set] = field(default_factory=lambda: (set(), set()))
    total: Amounts = field(default_factory=Amounts)
    by_mode: dict[str, Amounts] = field(default_factory=dict)
    hubs: Amounts = field(default_factory=Amounts)
    hub_count: int = 0

    def seen_at(self, origin: dict, destination: dict) -> None:
        """The countries the ends' places name, kept for a code's end (a LOCODE's, an airport's or the given one)."""
        for found, place in zip(self.countries, (origin, destination)):
            if place.get("country"):
                found.add(place["country"].upper())

    def mode(self, mode: str) -> Amounts:
        return self.by_mode.setdefault(mode, Amounts())

    def to_dict(self) -> dict:
        ends = []
        for end, countries in zip((self.origin, self.destination), self.countries):
            # A code's country is shown when its records name one country (a free code may be named twice).
            country = end.country or (next(iter(countries)) if len(countries) == 1 else None)
            ends.append({"key": end.key, "code": end.code, "country": country})
        found = {"origin": ends[0], "destination": ends[1], **self.total.to_dict(),
                 "by_mode": {mode: self.by_mode[mode].to_dict() for mode in MODES if mode in self.by_mode}}
        if self.hub_count:
            found["hubs"] = {"count": self.hub_count, "activity": {"value": self.hubs.cargo_tonnes, "unit": "tonne"},
                             "emissions": self.hubs.emissions()}
        return found


class Lanes:
    """The period's lanes being added up, a shipment or a calculation at a time."""

    def __init__(self):
        self.lanes: dict[tuple[End, End], Lane] = {}

    def lane(self, origin: dict, destination: dict) -> Lane:
        key = (end_of(origin), end_of(destination))
        found = self.lanes.get(key)
        if found is None:
            found = self.lanes[key] = Lane(*key)
        found.seen_at(origin, destination)
        return found

    def add_shipment(self, body: dict) -> None:
        """A shipment on its lane: its legs by mode (its tonnes once per mode it uses), its hubs apart,
        and its tonnes and emissions in the lane's totals."""
        legs = [element for element in body["elements"] if element["type"] == "leg"]
        lane = self.lane(shipments.v1_place(legs[0]["origin"]), shipments.v1_place(legs[-1]["destination"]))
        tonnes = body["cargo"]["tonnes"]
        lane.total.shipment_count += 1
        lane.total.cargo_tonnes = EXACT_SUM.add(lane.total.cargo_tonnes, tonnes)
        for mode, of_mode in itertools.groupby(sorted(legs, key=lambda leg: leg["mode"]), key=lambda leg: leg["mode"]):
            amounts = lane.mode(mode)
            amounts.shipment_count += 1
            amounts.cargo_tonnes = EXACT_SUM.add(amounts.cargo_tonnes, tonnes)
            for leg in of_mode:
                amounts.add_moved(None, leg["activity"]["value"], leg["emissions"])
                lane.total.add_moved(None, leg["activity"]["value"], leg["emissions"])
        for hub in (element for element in body["elements"] if element["type"] == "hub"):
            lane.hub_count += 1
            lane.hubs.add_moved(hub["activity"]["value"], ZERO, hub["emissions"])
            lane.total.add_emissions(hub["emissions"])

    def add_calculation(self, body: dict) -> None:
        """A single calculation: its own one-leg lane, counted in calculation_count."""
        lane = self.lane(body["origin"], body["destination"])
        tonnes, tkm = body["cargo"]["value"], body["activity"]["value"]
        for amounts in (lane.total, lane.mode(body["mode"])):
            amounts.calculation_count += 1
            amounts.add_moved(tonnes, tkm, body["emissions"])

    def ordered(self) -> list[Lane]:
        """By emissions, most first; ties by the lane's key (origin's, then destination's)."""
        return sorted(self.lanes.values(),
                      key=lambda lane: (-lane.total.emissions_kg, lane.origin.key, lane.destination.key))


def _counted(body: str) -> dict | None:
    """A stored body, unless it was voided after the voided ids were read."""
    found = jsoncodec.loads(body)
    return None if found["status"] == "voided" else found


def _shipment_bodies(customer_id: int, start: dt.date | None, end: dt.date | None) -> Iterator[dict]:
    """The period's shipments that are not voided, read a batch at a time (found through
    shipment_customer_created)."""
    voided = statements.voided_ids(Shipment, customer_id, start, end)
    ids = (Shipment.select(Shipment.id).where(statements.in_period(Shipment, customer_id, start, end, counted=False))
           .tuples().iterator())
    for batch in statements.batches(shipment_id for shipment_id, in ids if shipment_id not in voided):
        for body, in Shipment.select(Shipment.body).where(Shipment.id.in_(batch)).tuples():
            found = _counted(body)
            if found is not None:
                yield found


def _single_bodies(customer_id: int, start: dt.date | None, end: dt.date | None, legs: set[str]) -> Iterator[dict]:
    """The period's calculations that are no shipment's leg and not voided, read a batch at a time (found
    through calculation_customer_created, which carries activity_date)."""
    voided = statements.voided_ids(Calculation, customer_id, start, end)
    ids = (Calculation.select(Calculation.id)
           .where(statements.in_period(Calculation, customer_id, start, end, counted=False))
           .tuples().iterator())
    for batch in statements.batches(calculation_id for calculation_id, in ids
                                    if calculation_id not in legs and calculation_id not in voided):
        for body, in Calculation.select(Calculation.body).where(Calculation.id.in_(batch)).tuples():
            found = _counted(body)
            # A leg of a shipment written after the shipments were read belongs to none read here.
            if found is not None and "shipment" not in found:
                yield found


def lanes(organization_id: int, environment: str, reference: str, start: dt.date | None = None,
          end: dt.date | None = None) -> dict | None:
    """The customer's lanes over activity dates start..end (inclusive; None is open), or None when there is
    no such customer."""
    customer = customers.find(organization_id, environment, reference)
    if customer is None:
        return None
    found = Lanes()
    legs: set[str] = set()
    for body in _shipment_bodies(customer.id, start, end):
        found.add_shipment(body)
        legs.update(element["calculation_id"] for element in body["elements"] if element["type"] == "leg")
    for body in _single_bodies(customer.id, start, end, legs):
        found.add_calculation(body)
    ordered = found.ordered()
    return {"object": "lanes", "customer": {"reference": customer.reference}, "environment": environment,
            "period": {"from": start.isoformat() if start else None, "to": end.isoformat() if end else None},
            "lane_count": len(ordered), "lanes": [lane.to_dict() for lane in ordered]}
