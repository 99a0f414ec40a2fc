"""The one calculation row of the files people read: the statement CSV and the workspace's
calculations.csv list the same columns, built from the stored body as the API answers it."""
from __future__ import annotations

import dataclasses
from decimal import Decimal

from ..models import HUB
from ..shipments import v1_place
from .json import SCOPE3_CATEGORY


@dataclasses.dataclass(frozen=True)
class CalculationRow:
    """A calculation, or a shipment's hub (no calculation_id, no distance or tkm), as one row."""

    calculation_id: str | None
    external_reference: str
    customer_reference: str
    activity_date: str
    created_at: str
    mode: str
    business_context: str
    scope3_category: int
    origin_code: str
    origin_label: str
    origin_country: str
    destination_code: str
    destination_label: str
    destination_country: str
    cargo_tonnes: Decimal
    distance_km: Decimal | str
    activity_tkm: Decimal | str
    emissions_kgco2e: Decimal
    emissions_ttw_kgco2e: Decimal | str
    emissions_wtt_kgco2e: Decimal | str
    factor_reference: str
    factor_version: int
    factor_name: str
    factor_source: str
    shipment_id: str
    element_index: int | str
    hub_type: str

    @classmethod
    def of_calculation(cls, calculation: dict, factor_name: str, factor_source: str) -> CalculationRow:
        """The row of a stored calculation body (the API's Calculation) and its factor's name and source."""
        origin, destination = calculation["origin"], calculation["destination"]
        breakdown = calculation["emissions"].get("breakdown") or {}
        shipment = calculation.get("shipment") or {}
        return cls(
            calculation_id=calculation["id"], external_reference=calculation["external_reference"],
            customer_reference=calculation["customer"]["reference"], activity_date=calculation["activity_date"],
            created_at=calculation["created_at"], mode=calculation["mode"],
            business_context=calculation["methodology"]["business_context"],
            scope3_category=calculation["methodology"]["scope3_category"],
            origin_code=origin.get("code", ""), origin_label=origin.get("label", ""),
            origin_country=origin.get("country", ""), destination_code=destination.get("code", ""),
            destination_label=destination.get("label", ""), destination_country=destination.get("country", ""),
            cargo_tonnes=calculation["cargo"]["value"], distance_km=calculation["distance"]["value"],
            activity_tkm=calculation["activity"]["value"], emissions_kgco2e=calculation["emissions"]["value"],
            emissions_ttw_kgco2e=breakdown.get("ttw", ""), emissions_wtt_kgco2e=breakdown.get("wtt", ""),
            factor_reference=calculation["factor"]["reference"], factor_version=calculation["factor"]["version"],
            factor_name=factor_name, factor_source=factor_source, shipment_id=shipment.get("id", ""),
            element_index=shipment.get("element_index", ""), hub_type="")

    @classmethod
    def of_hub(cls, shipment: dict, index: int, external_reference: str, business_context: str,
               factor_name: str, factor_source: str) -> CalculationRow:
        """The row of a stored shipment body's hub at `index`: its cargo is the tonnes it handled."""
        hub = shipment["elements"][index]
        place = v1_place(hub["location"]) if "location" in hub else {}
        breakdown = hub["emissions"].get("breakdown") or {}
        return cls(
            calculation_id=None, external_reference=external_reference,
            customer_reference=shipment["customer"]["reference"], activity_date=shipment["activity_date"],
            created_at=shipment["created_at"], mode=HUB, business_context=business_context,
            scope3_category=SCOPE3_CATEGORY[business_context], origin_code=place.get("code", ""),
            origin_label=place.get("label", ""), origin_country=place.get("country", ""), destination_code="",
            destination_label="", destination_country="", cargo_tonnes=hub["activity"]["value"], distance_km="",
            activity_tkm="", emissions_kgco2e=hub["emissions"]["value"],
            emissions_ttw_kgco2e=breakdown.get("ttw", ""), emissions_wtt_kgco2e=breakdown.get("wtt", ""),
            factor_reference=hub["factor"]["reference"], factor_version=hub["factor"]["version"],
            factor_name=factor_name, factor_source=factor_source, shipment_id=shipment["id"], element_index=index,
            hub_type=hub["hub_type"])


CALCULATION_COLUMNS = tuple(field.name for field in dataclasses.fields(CalculationRow))
# Columns a spreadsheet may read as numbers: a plain number in them is written as it is.
CALCULATION_NUMBERS = ("scope3_category", "cargo_tonnes", "distance_km", "activity_tkm", "emissions_kgco2e",
                       "emissions_ttw_kgco2e", "emissions_wtt_kgco2e", "factor_version", "element_index")
