"""Build emissions/data/desnz-2025-freight.json from the shared DESNZ 2025 freight file.

    python scripts/build_factor_library.py [path/to/desnz-2025-freight.csv]

The default path is ../shared/factors/desnz-2025-freight.csv beside the repository. Run it when
the shared file changes and commit the result: the package never reads the shared file itself.
It keeps every row that has both parts (TTW and WTT) and whose family maps to a mode, names
each with the reference scheme of docs/factors.md, and stops on a label it cannot name.
"""
from __future__ import annotations

import csv
import json
import re
import sys
from decimal import Decimal
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
SHARED_FILE = REPOSITORY.parent / "shared" / "factors" / "desnz-2025-freight.csv"
OUTPUT = REPOSITORY / "emissions" / "data" / "desnz-2025-freight.json"

PUBLICATION = {
    "title": "Greenhouse gas reporting: conversion factors 2025",
    "publisher": "Department for Energy Security and Net Zero (DESNZ)",
    "year": 2025,
    "licence": "Open Government Licence v3.0",
    "published": "2025-06-10",
    "edition": "flat-format file, v1",
    "url": "https://www.gov.uk/government/publications/greenhouse-gas-reporting-conversion-factors-2025",
    "sheets": {"ttw": "Freighting goods", "wtt": "WTT- delivery vehs & freight"},
}
SOURCE = "DESNZ, Greenhouse gas reporting: conversion factors 2025 (OGL v3.0)"
VALID_FROM = "2025-01-01"

# family (the file's level_2) -> (mode, reference stem). RAIL is for shipments' legs: the v1
# calculation keeps ROAD, SEA and AIR.
FAMILIES = {
    "Vans": ("ROAD", "road-van"),
    "HGV (all diesel)": ("ROAD", "road-hgv-diesel"),
    "HGV refrigerated (all diesel)": ("ROAD", "road-hgv-refrigerated-diesel"),
    "Cargo ship": ("SEA", "sea"),
    "Sea tanker": ("SEA", "sea"),
    "Freight flights": ("AIR", "air-freight"),
    "Rail": ("RAIL", "rail"),
}
VAN_CLASSES = {"Class I (up to 1.305 tonnes)": "class-1", "Class II (1.305 to 1.74 tonnes)": "class-2",
               "Class III (1.74 to 3.5 tonnes)": "class-3", "Average (up to 3.5 tonnes)": "average"}
VAN_FUELS = {"Diesel": "diesel", "Petrol": "petrol", "CNG": "cng", "LPG": "lpg", "Unknown": "unknown-fuel",
             "Plug-in Hybrid Electric Vehicle": "phev", "Battery Electric Vehicle": "bev"}
HGV_SIZES = {"All HGVs": None, "All artics": "artic", "All rigids": "rigid",
             "Articulated (>3.5 - 33t)": "artic-3.5-33t", "Articulated (>33t)": "artic-33t",
             "Rigid (>3.5 - 7.5 tonnes)": "rigid-3.5-7.5t", "Rigid (>7.5 tonnes-17 tonnes)": "rigid-7.5-17t",
             "Rigid (>17 tonnes)": "rigid-17t"}
HGV_LOADS = {"Average laden": "average-laden", "50% Laden": "50pct-laden", "100% Laden": "100pct-laden"}
FLIGHTS = {"Domestic, to/from UK": ("domestic", "GB"), "Short-haul, to/from UK": ("short-haul", "GB"),
           "Long-haul, to/from UK": ("long-haul", "GB"), "International, to/from non-UK": ("international", "GLOBAL")}
RADIATIVE_FORCING = {"Without RF": False, "With RF": True}
# References the library used before it held the whole file; each still resolves, to the same row.
ALIASES = {"desnz-2025-air-freight-long-haul-without-rf": "desnz-2025-air-freight-long-haul"}


def slug(label: str) -> str:
    """'120,000-199,999 dwt' -> '120000-199999-dwt', '8000+ TEU' -> '8000plus-teu'."""
    text = label.lower().replace(",", "").replace("+", "plus")
    text = re.sub(r"[^a-z0-9.]+", "-", text).strip("-")
    if not text:
        raise ValueError(f"cannot name {label!r}")
    return text


def name_row(row: dict) -> tuple[str, str, str, bool | None]:
    """(reference, mode, region, radiative_forcing) of one row of the shared file."""
    family, level_3, level_4 = row["level_2"], row["level_3"], row["level_4"]
    mode, stem = FAMILIES[family]
    if family == "Vans":
        return f"desnz-2025-{stem}-{VAN_CLASSES[level_3]}-{VAN_FUELS[level_4]}", mode, "GB", None
    if family.startswith("HGV"):
        size = HGV_SIZES[level_3]
        parts = [stem] + ([size] if size else []) + [HGV_LOADS[level_4]]
        return "desnz-2025-" + "-".join(parts), mode, "GB", None
    if mode == "RAIL":
        return f"desnz-2025-{stem}-{slug(level_3)}", mode, "GB", None
    if mode == "SEA":
        return f"desnz-2025-{stem}-{slug(level_3)}-{slug(level_4)}", mode, "GLOBAL", None
    route, region = FLIGHTS[level_3]
    forcing = RADIATIVE_FORCING[level_4]
    return f"desnz-2025-{stem}-{route}" + ("-with-rf" if forcing else ""), mode, region, forcing


def build(path: Path) -> dict:
    factors, skipped = [], {"no value": 0, "no mode": 0}
    with path.open(newline="", encoding="utf-8") as stream:
        for row in csv.DictReader(stream):
            if not (row["ttw_kgco2e"] and row["wtt_kgco2e"]):
                skipped["no value"] += 1
                continue
            if row["level_2"] not in FAMILIES:
                skipped["no mode"] += 1
                continue
            if row["unit"] != "tonne.km":
                raise ValueError(f"row {row['ttw_id']}: unit {row['unit']!r}, expected tonne.km")
            ttw, wtt = Decimal(row["ttw_kgco2e"]), Decimal(row["wtt_kgco2e"])
            if row["wtw_kgco2e"] and Decimal(row["wtw_kgco2e"]) != ttw + wtt:
                raise ValueError(f"row {row['ttw_id']}: wtw is not ttw + wtt")
            reference, mode, region, forcing = name_row(row)
            factors.append({
                "reference": reference, "mode": mode, "region": region,
                "name": ", ".join(label for label in (row["level_2"], row["level_3"], row["level_4"]) if label),
                "ttw": row["ttw_kgco2e"], "wtt": row["wtt_kgco2e"], "wtw": row["wtw_kgco2e"] or str(ttw + wtt),
                "ttw_id": row["ttw_id"], "wtt_id": row["wtt_id"], "radiative_forcing": forcing,
            })
    references = [factor["reference"] for factor in factors]
    if len(set(references)) != len(references):
        raise ValueError("two rows got the same reference")
    for alias, target in ALIASES.items():
        if target not in references or alias in references:
            raise ValueError(f"alias {alias} -> {target} does not fit the library")
    return {
        "publication": PUBLICATION,
        "source": SOURCE,
        "verification": (
            "NOT compared with the official DESNZ 2025 workbook. Transcribed from public mechanical "
            "conversions of the DESNZ flat file and cross-checked between them (docs/methodology.md, "
            "'Where the library comes from')."),
        "unit": "kgCO2e/tkm",
        "boundary": "WTW = TTW (sheet 'Freighting goods') + WTT (sheet 'WTT- delivery vehs & freight')",
        "valid_from": VALID_FROM,
        "valid_to": None,
        "left_out": skipped,
        "factors": factors,
        "aliases": [{"reference": alias, "same_as": target} for alias, target in ALIASES.items()],
    }


def main(argv: list[str]) -> int:
    path = Path(argv[1]) if len(argv) > 1 else SHARED_FILE
    library = build(path)
    OUTPUT.write_text(json.dumps(library, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(library['factors'])} factors, {len(library['aliases'])} alias(es) -> "
          f"{OUTPUT.relative_to(REPOSITORY)}; left out: {library['left_out']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
