"""Numbers for people, as the workspace and the CLI's HTML statement write them (the JSON, the CSV and
the API keep the exact decimals).

Emissions are written in one unit per table (or per page): kgCO2e, or t CO2e when the largest value
shown is 1,000 kg or more, so that a column never reads "2.44 t CO2e" above "542.71 kgCO2e".
"""
from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

TONNE = Decimal(1000)
HUNDREDTH = Decimal("0.01")


def number_text(value, places: int = 2) -> str:
    """A quantity for reading: thousands separated, `places` decimals (the exact value is in the API)."""
    return "—" if value is None else f"{Decimal(str(value)):,.{places}f}"


@dataclass(frozen=True)
class Co2eUnit:
    """The unit a table's emissions are written in, and how a value reads in it."""
    name: str
    kilograms: Decimal  # how many kg one of the unit is

    def number(self, kg) -> str:
        """The value in this unit without the unit (the table's header names it)."""
        if kg is None:
            return "—"
        value = Decimal(str(kg)) / self.kilograms
        if value and abs(value) < HUNDREDTH / 2:  # a few kg in a table of tonnes is not nothing
            return "< 0.01" if value > 0 else "> -0.01"
        return number_text(value)

    def text(self, kg) -> str:
        """The value in this unit, with the unit."""
        return "—" if kg is None else f"{self.number(kg)} {self.name}"


KILOGRAMS = Co2eUnit("kgCO2e", Decimal(1))
TONNES = Co2eUnit("t CO2e", TONNE)


def co2e_unit(*kilograms) -> Co2eUnit:
    """The unit for these values, from the largest: t CO2e from 1,000 kg, else kgCO2e."""
    largest = max((abs(Decimal(str(value))) for value in kilograms if value is not None), default=Decimal(0))
    return TONNES if largest >= TONNE else KILOGRAMS


def co2e_text(kg) -> str:
    """One value with its own unit: kgCO2e below 1,000 kg, t CO2e from there."""
    return co2e_unit(kg).text(kg)
