"""Shipments: a transport chain of legs and hubs, counted as ISO 14083 counts it (docs/api.md, "Shipments").

Each leg is a calculation (tonnes x km x governed factor, rounded as a calculation is) whose body
names its shipment; each hub is tonnes handled x a HUB factor. The chain's totals are the exact sums
of its elements. The shipment, its legs, hubs, rollups, usage and one `shipment.succeeded` event
commit in one transaction, or nothing does.
"""
from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from decimal import Decimal, localcontext

import peewee as pw

from . import distances
from . import factors
from . import jsoncodec
from . import limits
from . import rollups
from . import store
from . import voids
from .auth import Principal
from .webhooks import events as webhook_events
from .calculations import Outcome, compute, factor_of_row, fingerprint, round6
from .exports import json as views
from .config import DEFAULT_TEST_CAPACITY
from .errors import (CalculationFailed, IdempotencyError, InvalidRequest, NotFound, PermissionError_,
                     customer_not_found, factor_not_found)
from .db import EXACT_SUM
from .models import HUB, VOID_COLUMNS, Factor, Shipment, ShipmentHub, new_id, utcnow
from .sql import Insert, Joined

TONNES_PER_TEU = Decimal(10)  # IMO guidance's and Searoutes' convention for a loaded TEU
# The default factor of a leg without factor_reference (docs/methodology.md, "Default factors").
DEFAULT_FACTORS = {
    "ROAD": "desnz-2025-road-hgv-diesel-average-laden",
    "RAIL": "desnz-2025-rail-freight-train",
    "SEA": "desnz-2025-sea-container-ship-average",
}
# DESNZ's haul bands for freight flights: within the UK, to or from the UK under or over 3,700 km,
# and between two places outside the UK (the long-haul values, published as "International").
SHORT_HAUL_LIMIT_KM = Decimal(3700)


@dataclass
class Element:
    """One element, worked out: its view for the answer and what its rows need."""

    index: int
    view: dict
    factor: Factor
    activity: Decimal  # tkm for a leg, tonnes for a hub
    emissions: Decimal
    parts: tuple[Decimal, Decimal] | None
    leg: store.NewCalculation | None = None
    hub_type: str | None = None


def with_defaults(payload: dict) -> dict:
    """The validated body with documented defaults applied (the material payload)."""
    cargo = payload["cargo"]
    if cargo["unit"] == "TEU":
        cargo = {**cargo, "tonnes_per_teu": cargo.get("tonnes_per_teu", TONNES_PER_TEU)}
    # "continuity": "checked" is the default spelled out: the same material payload as leaving it out
    # (left out rather than added, so that the shipments stored before it existed keep their fingerprints).
    material = {name: value for name, value in payload.items() if (name, value) != ("continuity", "checked")}
    return {**material, "business_context": payload.get("business_context", "upstream"), "cargo": cargo}


def cargo_tonnes(cargo: dict) -> Decimal:
    """The cargo in tonnes, exactly: kg / 1000, or TEU x tonnes per TEU."""
    value = cargo["value"]
    per_teu = cargo.get("tonnes_per_teu", Decimal(1))
    with localcontext() as context:
        # Wide enough for the exact product: the schema bounds both numbers' digits.
        context.prec = 10 + len(value.as_tuple().digits) + len(per_teu.as_tuple().digits)
        if cargo["unit"] == "kg":
            return value.scaleb(-3)
        if cargo["unit"] == "TEU":
            return value * per_teu
    return value


def air_band(leg: dict, distance: Decimal) -> str:
    """The DESNZ haul band of an AIR leg: domestic, short-haul, long-haul or international."""
    countries = [_country(leg[end]) for end in ("origin", "destination")]
    if countries == ["GB", "GB"]:
        return "domestic"
    if "GB" in countries:
        return "short-haul" if distance < SHORT_HAUL_LIMIT_KM else "long-haul"
    return "international"


def _country(place: dict) -> str | None:
    """The place's country: the one given, else the one its UN/LOCODE names, else its airport's."""
    if "country" in place:
        return place["country"].upper()
    if "locode" in place:
        return place["locode"][:2].upper()
    if "iata" in place:
        found = distances._airports().get(place["iata"].upper())
        return found["country"] if found else None
    return None


def default_factor(leg: dict, distance: Decimal) -> str:
    """The reference of the documented default factor for a leg's mode (AIR by DESNZ haul band)."""
    if leg["mode"] == "AIR":
        return f"desnz-2025-air-freight-{air_band(leg, distance)}"
    return DEFAULT_FACTORS[leg["mode"]]


# --- the statements a shipment sends, written by hand as store.py's are (the query builder would
# cost more than the rest of the request); the reads run through store.run, the inserts go into a store.Write

# What the key already made, and the customer, in one statement (as store.LOOKUP is for a calculation).
LOOKED_UP = Joined(s=store.Stored, c=store.CustomerRow)
LOOKUP = (
    f"SELECT {LOOKED_UP.columns}"
    " FROM (SELECT 1 AS one) AS base"
    " LEFT JOIN shipment AS s ON s.organization_id = ? AND s.environment = ? AND s.idempotency_key = ?"
    " LEFT JOIN customer AS c ON c.organization_id = ? AND c.environment = ? AND c.reference = ?"
)
FACTORS = (
    f"SELECT {', '.join(store.FactorRow._fields)} FROM factor"
    " WHERE status = 'active' AND (organization_id IS NULL OR organization_id = ?) AND reference IN ({})"
)
SHIPMENT = Insert(Shipment, "NewShipment", "A shipment's row, ready to be written: the columns of models.Shipment.",
                  optional=VOID_COLUMNS)
HUB_ROW = Insert(ShipmentHub, "NewHub", "A hub element's row, ready to be written: the columns of models.ShipmentHub.",
                 optional=("voided_at",))


@dataclass(frozen=True)
class Found:
    """What the key already made, or else the customer; None where there is none."""

    existing: store.Stored | None
    customer: store.CustomerRow | None


def _lookup(organization_id: int, environment: str, idempotency_key: str, customer_reference: str) -> Found:
    row = LOOKED_UP.row(store.run(LOOKUP, (organization_id, environment, idempotency_key, organization_id,
                                           environment, customer_reference)).fetchone())
    return Found(LOOKED_UP.part(row, "s"), LOOKED_UP.part(row, "c"))


def _active_factors(organization_id: int, references: set[str]) -> dict[str, Factor]:
    """The active version of each reference visible to the organization (global or its own)."""
    ordered = sorted(references)
    rows = store.run(FACTORS.format(", ".join("?" * len(ordered))), (organization_id, *ordered)).fetchall()
    found = [store.FactorRow._make(row) for row in rows]
    return {row.reference: factor_of_row(row) for row in found}


def place_code(place: dict) -> str | None:
    """The place's code as a leg's calculation keeps it: its own code, else its UN/LOCODE or IATA code."""
    if "code" in place:
        return place["code"]
    if "locode" in place:
        return place["locode"].upper().replace(" ", "")
    if "iata" in place:
        return place["iata"].upper()
    return None


def v1_place(place: dict) -> dict:
    """A shipment's place as the v1 Place a leg's calculation shows: code, label, country. The LOCODE or
    IATA code is kept as code and its country (a LOCODE's first two letters, an airport's country from
    airportsdata) as country, so that leg rows can be grouped by lane."""
    found = {name: place[name] for name in ("label", "country") if name in place}
    code = place_code(place)
    if code:
        found["code"] = code
    country = _country(place)
    if country:
        found["country"] = country
    if "code" not in found and "label" not in found:
        found["label"] = f"{place['latitude']:.6f},{place['longitude']:.6f}"
    return {name: found[name] for name in ("code", "label", "country") if name in found}


def _codes(place: dict) -> dict[str, str]:
    """The codes a place is known by, per system (locode, iata, code), normalised for comparing."""
    return {name: place[name].upper().replace(" ", "") for name in ("locode", "iata", "code") if name in place}


def _same_place(left: dict, right: dict) -> bool | None:
    """Whether two places are one by their codes: None when no code of one can be compared with the
    other's (a free `code` compares with any system, a LOCODE only with a LOCODE, an IATA code with an IATA code)."""
    pairs = [(a, b) for kind_a, a in _codes(left).items() for kind_b, b in _codes(right).items()
             if kind_a == kind_b or "code" in (kind_a, kind_b)]
    if not pairs:
        return None
    return any(a == b for a, b in pairs)


def check_continuity(payload: dict) -> None:
    """Refuse a chain whose leg starts where the leg before it did not end, when both ends are known by
    comparable codes; a hub between them, or "continuity": "not_checked", lets it through."""
    if payload.get("continuity", "checked") == "not_checked":
        return
    elements = payload["elements"]
    gaps = []
    for index in range(1, len(elements)):
        before, element = elements[index - 1], elements[index]
        if before["type"] != "leg" or element["type"] != "leg":
            continue
        if _same_place(before["destination"], element["origin"]) is False:
            gaps.append((index, _codes(before["destination"]), _codes(element["origin"])))
    if not gaps:
        return
    details, named = [], []
    for index, ended, starts in gaps:
        ended_text, starts_text = "/".join(ended.values()), "/".join(starts.values())
        details += [{"field": f"elements[{index}].origin",
                     "message": f"starts at {starts_text}, not where elements[{index - 1}] ends ({ended_text})"},
                    {"field": f"elements[{index - 1}].destination",
                     "message": f"ends at {ended_text}, not where elements[{index}] starts ({starts_text})"}]
        named.append(f"elements[{index}].origin ({starts_text}) is not elements[{index - 1}].destination "
                     f"({ended_text})")
    raise InvalidRequest(f"The request body is invalid: the chain has a gap: {'; '.join(named)}. Add the leg "
                         "between them or the hub where the cargo changes hands, or send \"continuity\": "
                         "\"not_checked\" if the chain is meant to be incomplete.", status=422, details=details)


def _failure(index: int, message: str) -> CalculationFailed:
    return CalculationFailed(f"Element {index} cannot be calculated: {message}.",
                             details=[{"field": f"elements[{index}]", "message": message}])


def _refuse_zero(index: int, activity: Decimal, emissions: Decimal) -> None:
    if activity == 0 or emissions == 0:
        what = "activity" if activity == 0 else "emissions"
        raise InvalidRequest(f"The request body is invalid: element {index}'s {what} rounds to 0.", status=422,
                             details=[{"field": f"elements[{index}]", "message": f"its {what} rounds to 0"}])


class Chain:
    """A validated request being worked out, element by element."""

    def __init__(self, principal: Principal, payload: dict, idempotency_key: str, request_id: str,
                 customer, shipment_id: str, created_at: dt.datetime):
        self.principal, self.payload, self.key, self.request_id = principal, payload, idempotency_key, request_id
        self.customer, self.shipment_id, self.created_at = customer, shipment_id, created_at
        self.tonnes = cargo_tonnes(payload["cargo"])
        self.activity_date = dt.date.fromisoformat(payload["activity_date"])

    def elements(self) -> list[Element]:
        """Every element worked out, or the error of the first that cannot be."""
        elements = self.payload["elements"]
        found_distances = {index: distances.leg_distance(element, f"elements[{index}]")
                           for index, element in enumerate(elements) if element["type"] == "leg"}
        # After the distances: a code the service does not know is said first, then a gap between known ones.
        check_continuity(self.payload)
        references = {index: element.get("factor_reference") or default_factor(element, found_distances[index].value)
                      for index, element in enumerate(elements)}
        active = _active_factors(self.principal.organization_id, set(references.values()))
        # Lists read newest first, then by id descending: the legs' ids, made descending in chain order,
        # list a shipment's legs together and in chain order at the moment they share.
        leg_ids = iter(sorted((new_id() for element in elements if element["type"] == "leg"), reverse=True))
        worked = []
        for index, element in enumerate(elements):
            factor = active.get(references[index])
            if factor is None:
                raise factor_not_found(f"elements[{index}].factor_reference", references[index])
            if element["type"] == "leg":
                worked.append(self._leg(index, element, found_distances[index], factor,
                                        "factor_reference" not in element, next(leg_ids)))
            else:
                worked.append(self._hub(index, element, factor))
        return worked

    def _leg(self, index: int, leg: dict, distance: distances.Distance, factor: Factor, by_default: bool,
             calculation_id: str) -> Element:
        reason = factor.applies_to(leg["mode"], self.activity_date)
        if reason is not None:
            raise _failure(index, reason)
        activity, emissions = compute(self.tonnes, distance.value, factor.value)
        _refuse_zero(index, activity, emissions)
        parts = factors.breakdown(activity, emissions, factor.ttw_value)
        leg_payload = {"external_reference": self.payload["external_reference"],
                       "customer_reference": self.payload["customer_reference"], "mode": leg["mode"],
                       "activity_date": self.payload["activity_date"], "origin": v1_place(leg["origin"]),
                       "destination": v1_place(leg["destination"]), "cargo": {"value": self.tonnes, "unit": "tonne"},
                       "distance": {"value": distance.value, "unit": "km"}, "factor_reference": factor.reference,
                       "business_context": self.payload["business_context"]}
        environment = self.principal.environment
        body = views.calculation(calculation_id, environment, leg_payload, self.customer.reference, activity,
                                 emissions, factor, self.created_at, parts)
        body["shipment"] = {"id": self.shipment_id, "element_index": index}
        ttw, wtt = parts or (None, None)
        row = store.NewCalculation(
            id=calculation_id, organization_id=self.principal.organization_id, environment=environment,
            customer_id=self.customer.id, external_reference=self.payload["external_reference"],
            idempotency_key=f"shipment/{self.shipment_id}/{index}", fingerprint=fingerprint(leg_payload),
            mode=leg["mode"], business_context=self.payload["business_context"], activity_date=self.activity_date,
            cargo_tonnes=self.tonnes, distance_km=distance.value, activity_tkm=activity, emissions_kg=emissions,
            factor_id=factor.id, factor_version=factor.version, factor_value=factor.value, body=jsoncodec.dumps(body),
            created_at=self.created_at, emissions_ttw_kg=ttw, emissions_wtt_kg=wtt)
        view = views.leg(index, leg, distance.to_dict(), activity, emissions, parts, factor, by_default,
                         calculation_id)
        return Element(index, view, factor, activity, emissions, parts, leg=row)

    def _hub(self, index: int, hub: dict, factor: Factor) -> Element:
        reason = factor.applies_to(HUB, self.activity_date)
        if reason is None and factor.hub_type != hub["hub_type"]:
            reason = f"factor {factor.reference} is for hub type {factor.hub_type}, not {hub['hub_type']}"
        if reason is not None:
            raise _failure(index, reason)
        # A hub's activity is the tonnes handled: compute() with a distance of 1 rounds as a leg does.
        tonnes, emissions = compute(self.tonnes, Decimal(1), factor.value)
        _refuse_zero(index, tonnes, emissions)
        parts = factors.breakdown(tonnes, emissions, factor.ttw_value)
        view = views.hub(index, hub, tonnes, emissions, parts, factor)
        return Element(index, view, factor, tonnes, emissions, parts, hub_type=hub["hub_type"])

    def view(self, elements: list[Element]) -> tuple[dict, dict]:
        """(the Shipment the API answers, its totals as numbers for the row)."""
        activity = sum((element.activity for element in elements if element.leg), Decimal(0))
        emissions = sum((element.emissions for element in elements), Decimal(0))
        parts = [element.parts for element in elements if element.parts]
        ttw = sum((ttw for ttw, _ in parts), Decimal(0))
        wtt = sum((wtt for _, wtt in parts), Decimal(0))
        with localcontext(EXACT_SUM):
            unattributed = emissions - ttw - wtt
        with localcontext() as context:
            context.prec = 100
            intensity = round6(emissions / activity)
        totals = {"activity": {"value": activity, "unit": "tkm"},
                  "emissions": {"value": emissions, "unit": "kgCO2e",
                                "breakdown": {"ttw": ttw, "wtt": wtt, "unattributed": unattributed}},
                  "intensity": {"value": intensity, "unit": "kgCO2e/tkm"}}
        body = views.shipment(self.shipment_id, self.principal.environment, self.payload, self.customer.reference,
                              self.tonnes, [element.view for element in elements], totals, self.created_at)
        return body, {"activity_tkm": activity, "emissions_kg": emissions, "emissions_ttw_kg": ttw,
                      "emissions_wtt_kg": wtt}


def _replay(existing: store.Stored, payload_fingerprint: str) -> Outcome:
    if existing.fingerprint != payload_fingerprint:
        raise IdempotencyError("This Idempotency-Key was already used with a different request body; "
                               "use a new key for a new shipment.")
    return Outcome(existing.id, existing.body, replayed=True)


def create(principal: Principal, payload: dict, idempotency_key: str, *, request_id: str | None = None,
           test_capacity: int = DEFAULT_TEST_CAPACITY) -> Outcome:
    """Create a shipment for a validated payload, or replay the one its idempotency key made."""
    organization_id, environment = principal.organization_id, principal.environment
    request_id = request_id or str(uuid.uuid4())
    payload = with_defaults(payload)
    payload_fingerprint = fingerprint(payload)
    found = _lookup(organization_id, environment, idempotency_key, payload["customer_reference"])
    if found.existing is not None:
        return _replay(found.existing, payload_fingerprint)
    if found.customer is None:
        raise customer_not_found("customer_reference")
    customer = found.customer
    if customer.status != "active":
        raise PermissionError_(f"The customer is {customer.status}; only active customers can be charged "
                               "with new shipments.", code="CUSTOMER_ACCESS_DENIED")
    replacing = None
    if "replaces" in payload:
        replacing = voids.replaced(voids.SHIPMENT, principal, payload["replaces"], customer.id)
    chain = Chain(principal, payload, idempotency_key, request_id, customer, new_id(), utcnow())
    try:
        elements = chain.elements()
    except CalculationFailed as error:
        _fail(principal, payload, request_id, error)
    body, totals = chain.view(elements)
    body_text = jsoncodec.dumps(voids.linked(body, replaces=replacing.id) if replacing else body)
    event = webhook_events.new_event(organization_id, environment, "shipment.succeeded", body_text, chain.created_at)
    try:
        changed = _write(chain, elements, payload_fingerprint, body_text, totals, test_capacity, event, replacing)
    except voids.VoidRefused:
        raise voids.already_voided(voids.SHIPMENT, replacing.id, "replaces") from None
    except limits.CapacityUsedUp:
        limits.capacity_used_up(chain.created_at)
    except pw.IntegrityError:
        # A concurrent request with the same key committed first: answer as its replay.
        existing = _lookup(organization_id, environment, idempotency_key, "").existing
        if existing is None:
            raise
        return _replay(existing, payload_fingerprint)
    return Outcome(chain.shipment_id, body_text, replayed=False, changed=changed)


def _write(chain: Chain, elements: list[Element], payload_fingerprint: str, body: str, totals: dict,
           test_capacity: int, event, replacing: Shipment | None = None) -> tuple[str, ...]:
    """The shipment, its legs (each a billable calculation), hubs, rollups and event, and the void of
    the shipment it replaces: all or nothing. Returns the ids of the calculations the void changed."""
    payload, customer, environment = chain.payload, chain.customer, chain.principal.environment
    organization_id, context = chain.principal.organization_id, payload["business_context"]
    write = store.Write(organization_id, environment)
    # First, so that a concurrent request with the same key stops here, on the unique index.
    write.add(SHIPMENT.text, SHIPMENT.params(SHIPMENT.Row(
        id=chain.shipment_id, organization_id=organization_id, environment=environment, customer_id=customer.id,
        external_reference=payload["external_reference"], idempotency_key=chain.key, fingerprint=payload_fingerprint,
        business_context=context, activity_date=chain.activity_date, cargo_tonnes=chain.tonnes,
        element_count=len(elements), request_id=chain.request_id, body=body, created_at=chain.created_at,
        replaces=replacing.id if replacing else None, **totals)))
    period = limits.period_of(chain.created_at)
    for element in elements:
        if element.leg is not None:
            write.calculation(element.leg, test_capacity, period)
            continue
        ttw, wtt = element.parts or (None, None)
        write.add(HUB_ROW.text, HUB_ROW.params(HUB_ROW.Row(
            shipment_id=chain.shipment_id, element_index=element.index, customer_id=customer.id,
            environment=environment, hub_type=element.hub_type, business_context=context,
            activity_date=chain.activity_date, tonnes=element.activity, emissions_kg=element.emissions,
            emissions_ttw_kg=ttw, emissions_wtt_kg=wtt, factor_id=element.factor.id,
            factor_version=element.factor.version, factor_value=element.factor.value)))
        # A hub's rollup row is mode HUB, its activity the tonnes handled (analytics.summarize).
        write.rollups(rollups.Addition(
            customer_id=customer.id, environment=environment, mode=HUB, business_context=context,
            activity_date=chain.activity_date, activity_tkm=element.activity, emissions_kg=element.emissions,
            emissions_ttw_kg=ttw, emissions_wtt_kg=wtt))
    changed = ()
    if replacing is not None:
        changed = voids.replace_in(write, voids.SHIPMENT, chain.principal, replacing, chain.shipment_id,
                                   chain.created_at)
    write.event(event)
    write.commit()
    return changed


def _fail(principal: Principal, payload: dict, request_id: str, error: CalculationFailed):
    """Commit a shipment.failed event for this outcome, then raise the error."""
    data = jsoncodec.dumps({
        "external_reference": payload["external_reference"],
        "customer": {"reference": payload["customer_reference"]},
        "error": {"code": error.code, "message": error.message, "request_id": request_id,
                  "details": error.details},
    })
    store.insert_event(webhook_events.new_event(principal.organization_id, principal.environment, "shipment.failed",
                                                data))
    raise error


def get(principal: Principal, shipment_id: str) -> str:
    """The stored body of a shipment of the principal's organization and environment, or a tenant-safe 404."""
    found = (Shipment.select(Shipment.body)
             .where((Shipment.id == shipment_id) & (Shipment.organization == principal.organization_id)
                    & (Shipment.environment == principal.environment)).first())
    if found is None:
        raise NotFound("No shipment with this id exists.")
    return found.body
