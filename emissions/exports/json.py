"""The JSON bodies of a calculation and a shipment, built here only: the API answers and stores them,
webhooks send them (test events too), a shipment's legs are calculations of the same shape."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

from .. import jsoncodec
from ..models import isoformat

STANDARD = "ISO 14083:2023"
SCOPE3_CATEGORY = {"upstream": 4, "downstream": 9}


def methodology(business_context: str) -> dict:
    """The methodology block of a calculation or a shipment."""
    return {"standard": STANDARD, "boundary": "WTW", "business_context": business_context,
            "scope3_category": SCOPE3_CATEGORY[business_context]}


def emissions(value: Decimal, breakdown: tuple[Decimal, Decimal] | None = None) -> dict:
    """Emissions in kgCO2e and, where the factor gives them, their (ttw, wtt) parts."""
    found = {"value": value, "unit": "kgCO2e"}
    if breakdown:
        ttw, wtt = breakdown
        found["breakdown"] = {"ttw": ttw, "wtt": wtt}
    return found


def _opening(object_id: str, payload: dict, environment: str, customer_reference: str) -> dict:
    """The fields a calculation and a shipment open with, in the API's order."""
    return {"id": object_id, "external_reference": payload["external_reference"], "status": "succeeded",
            "environment": environment, "customer": {"reference": customer_reference}}


def calculation(calculation_id: str, environment: str, payload: dict, customer_reference: str, activity: Decimal,
                emissions_kg: Decimal, factor, created_at: dt.datetime,
                breakdown: tuple[Decimal, Decimal] | None = None) -> dict:
    """The Calculation the API answers and stores for a validated payload (with its defaults) and what
    was worked out; `factor` is a models.Factor, `breakdown` the emissions' (ttw, wtt), if any."""
    return {
        **_opening(calculation_id, payload, environment, customer_reference),
        "mode": payload["mode"],
        "activity_date": payload["activity_date"],
        "origin": payload["origin"],
        "destination": payload["destination"],
        "cargo": {"value": payload["cargo"]["value"], "unit": "tonne"},
        "distance": {"value": payload["distance"]["value"], "unit": "km"},
        "activity": {"value": activity, "unit": "tkm"},
        "emissions": emissions(emissions_kg, breakdown),
        "methodology": methodology(payload["business_context"]),
        "factor": factor.lineage(),
        "created_at": isoformat(created_at),
    }


def shipment(shipment_id: str, environment: str, payload: dict, customer_reference: str, tonnes: Decimal,
             elements: list[dict], totals: dict, created_at: dt.datetime) -> dict:
    """The Shipment the API answers and stores: its elements' views (legs and hubs) and its totals."""
    return {
        **_opening(shipment_id, payload, environment, customer_reference),
        "activity_date": payload["activity_date"],
        "cargo": {**payload["cargo"], "tonnes": tonnes},
        "elements": elements,
        "totals": totals,
        "methodology": methodology(payload["business_context"]),
        "created_at": isoformat(created_at),
    }


def leg(index: int, element: dict, distance: dict, activity: Decimal, emissions_kg: Decimal,
        breakdown: tuple[Decimal, Decimal] | None, factor, by_default: bool, calculation_id: str) -> dict:
    """A shipment's leg as the Shipment lists it: the request's leg, what was worked out, and the id of
    the calculation it is stored as."""
    return {"index": index, "type": "leg", "mode": element["mode"], "origin": element["origin"],
            "destination": element["destination"], "distance": distance, "activity": {"value": activity, "unit": "tkm"},
            "emissions": emissions(emissions_kg, breakdown), "factor": factor.lineage(), "factor_default": by_default,
            "calculation_id": calculation_id}


def hub(index: int, element: dict, tonnes: Decimal, emissions_kg: Decimal, breakdown: tuple[Decimal, Decimal] | None,
        factor) -> dict:
    """A shipment's hub as the Shipment lists it: its activity is the tonnes it handled."""
    return {"index": index, "type": "hub", "hub_type": element["hub_type"],
            **({"location": element["location"]} if "location" in element else {}),
            "activity": {"value": tonnes, "unit": "tonne"}, "emissions": emissions(emissions_kg, breakdown),
            "factor": factor.lineage(), "factor_default": False}


def statement(found: dict) -> str:
    """The statement (statements.statement) as the CLI writes it: its JSON and a line break."""
    return jsoncodec.dumps(found) + "\n"
