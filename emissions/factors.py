"""Governed emission factors: checking, creating, activating and retiring versions, and the parts of
an answer. The library file and CSV import and export are in emissions.factor_files.

A factor version may carry its two parts, TTW (tank-to-wheel) and WTT (well-to-tank), in
kgCO2e/tkm; its value is then exactly their sum (docs/methodology.md, docs/factors.md).
"""
from __future__ import annotations

import datetime as dt
import decimal
from dataclasses import fields, make_dataclass
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation, localcontext

import peewee as pw

from . import audit
from . import text as text_rule
from .db import EXACT_SUM, db
from .models import HUB, HUB_TYPES, MODES, Factor, Organization

STATUSES = ("draft", "active", "superseded", "retired")
MAX_VALUE = Decimal(100)
SIX_PLACES = Decimal("0.000001")


class FactorError(ValueError):
    """A factor command that cannot be carried out; the message says why."""


def parse_value(raw, name: str = "value", *, zero_allowed: bool = False) -> Decimal:
    """A factor value in kgCO2e/tkm: a finite decimal above 0 (or 0 for a part) and at most 100."""
    try:
        value = Decimal(str(raw).strip())
    except InvalidOperation:
        raise FactorError(f"{name} must be a decimal number, got {raw!r}") from None
    if not value.is_finite() or value < 0 or (value == 0 and not zero_allowed) or value > MAX_VALUE:
        lowest = "at least 0" if zero_allowed else "above 0"
        raise FactorError(f"{name} must be {lowest} and at most {MAX_VALUE} kgCO2e/tkm")
    return value


class _Asked:
    """Spec's own behaviour (its fields are models.Factor's, below)."""

    def row(self) -> dict:
        return {item.name: getattr(self, item.name) for item in fields(self)}

    def same_as(self, factor: Factor) -> bool:
        """True when `factor` holds exactly these figures and this provenance."""
        return all(getattr(factor, name) == value for name, value in self.row().items())


# What a version is made of: the factor's columns less those the service sets itself.
SET_BY_THE_SERVICE = ("id", "version", "organization", "status", "created_at")
_ASKED = [item for item in Factor._meta.sorted_fields if item.name not in SET_BY_THE_SERVICE]
Spec = make_dataclass("Spec", [*((item.name, object) for item in _ASKED if not item.null),
                               *((item.name, object, None) for item in _ASKED if item.null)], bases=(_Asked,))
Spec.__doc__ = "One factor version as asked for, checked: what create() and the import write."

# The free texts a version may carry, each up to its column's size (reference, mode and hub type
# are checked on their own).
TEXT_LIMITS = tuple((item.name, item.max_length) for item in _ASKED
                    if isinstance(item, pw.CharField) and item.name not in ("reference", "mode", "hub_type"))


def check(reference: str, mode: str, name: str, source: str, value=None, *, ttw=None, wtt=None,
          region: str | None = None, valid_from: dt.date | None = None, valid_to: dt.date | None = None,
          **provenance) -> tuple[Spec | None, list[tuple[str, str]]]:
    """(the checked version, []) or (None, [(field, reason), ...]) for every value it cannot have.

    With ttw and wtt, value may be left out (it is their exact sum) or must equal the sum.
    """
    found: list[tuple[str, str]] = []
    if mode not in MODES and mode != HUB:
        found.append(("mode", f"must be one of {', '.join(MODES)} or {HUB}"))
    # shipments: a HUB factor (kgCO2e per tonne handled) names its hub type; no other factor has one
    hub_type = provenance.get("hub_type")
    if mode == HUB and hub_type not in HUB_TYPES:
        found.append(("hub_type", f"must be one of {', '.join(HUB_TYPES)} for a {HUB} factor"))
    elif mode != HUB and hub_type is not None:
        found.append(("hub_type", f"applies to {HUB} factors only"))
    if not reference or len(reference) > 120 or reference != reference.strip():
        found.append(("reference", "must be 1 to 120 characters, without spaces around it"))
    elif text_rule.problem(reference):
        found.append(("reference", text_rule.problem(reference)))
    texts = {"name": name, "source": source, "region": region, **provenance}
    for field_name, limit in TEXT_LIMITS:
        text = texts.get(field_name)
        if text is not None and not 0 < len(text.strip()) <= limit:  # the columns' sizes
            found.append((field_name, f"must be 1 to {limit} characters"))
        elif text is not None and text_rule.problem(text):
            found.append((field_name, text_rule.problem(text)))
    if valid_from and valid_to and valid_to < valid_from:
        found.append(("valid_to", "must not be before valid_from"))
    year = provenance.get("publication_year")
    if year is not None and not (isinstance(year, int) and 1900 <= year <= 2200):
        found.append(("publication_year", "must be a year such as 2025"))
    forcing = provenance.get("radiative_forcing")
    if forcing is not None and mode in MODES and mode != "AIR":
        found.append(("radiative_forcing", "applies to AIR factors only"))

    parts = {}
    if (ttw is None) != (wtt is None):
        found.append(("ttw" if ttw is None else "wtt", "must be given together with "
                      + ("wtt" if ttw is None else "ttw")))
    elif ttw is not None:
        for part_name, raw in (("ttw", ttw), ("wtt", wtt)):
            try:
                parts[part_name] = parse_value(raw, part_name, zero_allowed=True)
            except FactorError as error:
                found.append((part_name, str(error).split(" ", 1)[1]))
    elif value is None:
        found.append(("value", "is required (or ttw and wtt)"))
    total = None
    if len(parts) == 2:
        try:
            total = EXACT_SUM.add(parts["ttw"], parts["wtt"])
        except decimal.DecimalException:
            found.append(("ttw", "has too many digits to add exactly"))
        else:
            if not 0 < total <= MAX_VALUE:
                found.append(("value", f"ttw + wtt must be above 0 and at most {MAX_VALUE} kgCO2e/tkm"))
    if value is not None:
        try:
            value = parse_value(value)
        except FactorError as error:
            found.append(("value", str(error).split(" ", 1)[1]))
        else:
            if total is not None and value != total:
                found.append(("value", f"must equal ttw + wtt ({total}) or be left out"))
    if found:
        return None, found
    return Spec(reference=reference, mode=mode, name=name, source=source,
                value=total if total is not None else value, ttw_value=parts.get("ttw"), wtt_value=parts.get("wtt"),
                region=region, valid_from=valid_from, valid_to=valid_to, **provenance), []


def owner_problem(spec: Spec, previous: Factor | None, organization: Organization | None) -> str | None:
    """Why the organization may not add this version of the reference, or None when it may."""
    if previous is None:
        return None
    if previous.organization_id != (organization.id if organization else None):
        owner = previous.organization.slug if previous.organization_id else "the global library"
        return f"{spec.reference} already belongs to {owner}"
    if previous.mode != spec.mode:
        return f"{spec.reference} is a {previous.mode} factor; use a new reference"
    if previous.hub_type != spec.hub_type:  # shipments
        return f"{spec.reference} is a {previous.hub_type} hub factor; use a new reference"
    return None


def create(reference: str, mode: str, value, name: str, source: str, *, region: str | None = None,
           valid_from: dt.date | None = None, valid_to: dt.date | None = None,
           organization: Organization | None = None, draft: bool = False,
           ttw_value=None, wtt_value=None, actor: str, **provenance) -> Factor:
    """Add a new version of a factor, with its audit event; unless draft, it becomes active and supersedes
    the last one."""
    spec, found = check(reference, mode, name, source, value, ttw=ttw_value, wtt=wtt_value, region=region,
                        valid_from=valid_from, valid_to=valid_to, **provenance)
    if found:
        raise FactorError("; ".join(f"{name} {reason}" for name, reason in found))
    with db.atomic():
        factor = add_version(spec, _latest(spec.reference), organization, draft)
        _record("factor.created", factor, actor, {"mode": factor.mode, "value": factor.value, "ttw": factor.ttw_value,
                                                  "wtt": factor.wtt_value, "status": factor.status,
                                                  "source": factor.source})
        return factor


def _record(action: str, factor: Factor, actor: str, details: dict | None = None) -> None:
    audit.record(action, f"{factor.reference} v{factor.version}", actor=actor, organization=factor.organization_id,
                 details=details)


def _latest(reference: str) -> Factor | None:
    return Factor.select().where(Factor.reference == reference).order_by(Factor.version.desc()).first()


def add_version(spec: Spec, previous: Factor | None, organization: Organization | None, draft: bool) -> Factor:
    """Write the next version of the reference; call it in the transaction that read `previous`."""
    problem = owner_problem(spec, previous, organization)
    if problem:
        raise FactorError("reference " + problem)
    if not draft:
        _supersede_active(spec.reference)
    return Factor.create(**spec.row(), version=(previous.version + 1) if previous else 1,
                         organization=organization, status="draft" if draft else "active")


def _supersede_active(reference: str) -> None:
    Factor.update(status="superseded").where(
        (Factor.reference == reference) & (Factor.status == "active")).execute()


def versions() -> list[Factor]:
    """Every version of every factor, by reference then version."""
    return list(Factor.select().order_by(Factor.reference, Factor.version))


def get_version(reference: str, version: int) -> Factor:
    factor = Factor.get_or_none((Factor.reference == reference) & (Factor.version == version))
    if factor is None:
        raise FactorError(f"no factor {reference} version {version}")
    return factor


def activate(reference: str, version: int, *, actor: str) -> Factor:
    """Make one version active, with its audit event; the version active before it becomes superseded."""
    with db.atomic():
        factor = get_version(reference, version)
        if factor.status != "active":
            _supersede_active(reference)
            factor.status = "active"
            factor.save()
        _record("factor.activated", factor, actor)
    return factor


def retire(reference: str, *, actor: str) -> Factor:
    """Retire the active version, with its audit event: new calculations can no longer use the reference."""
    with db.atomic():
        factor = Factor.get_or_none((Factor.reference == reference) & (Factor.status == "active"))
        if factor is None:
            raise FactorError(f"factor {reference} has no active version to retire")
        factor.status = "retired"
        factor.save()
        _record("factor.retired", factor, actor)
    return factor


# --- the answer's parts ----------------------------------------------------------------------------

def breakdown(activity: Decimal, emissions: Decimal, ttw_value: Decimal | None) -> tuple[Decimal, Decimal] | None:
    """(ttw, wtt) in kgCO2e for a calculation, or None when the factor has no parts.

    ttw is activity x TTW factor rounded half-even to 6 places, like the emissions themselves; wtt
    is emissions - ttw, so the two add up to the emissions exactly.
    """
    if ttw_value is None:
        return None
    with localcontext() as context:
        # Wide enough for the exact product and difference: only the documented rounding happens.
        context.prec = 60 + len(activity.as_tuple().digits) + len(ttw_value.as_tuple().digits)
        ttw = (activity * ttw_value).quantize(SIX_PLACES, rounding=ROUND_HALF_EVEN)
        return ttw, emissions - ttw


def listed(factor: Factor) -> dict:
    """A factor as GET /v1/factors lists it: its figures (WTW and, where recorded, its TTW and WTT
    parts), validity and lineage, and whether it is the shared library's or the organization's own."""
    return {
        "object": "factor",
        "reference": factor.reference,
        "version": factor.version,
        "name": factor.name,
        "mode": factor.mode,
        "hub_type": factor.hub_type,
        "unit": factor.unit,
        "wtw": factor.value,
        "ttw": factor.ttw_value,
        "wtt": factor.wtt_value,
        "region": factor.region,
        "valid_from": factor.valid_from.isoformat() if factor.valid_from else None,
        "valid_to": factor.valid_to.isoformat() if factor.valid_to else None,
        "source": factor.source,
        "source_row": factor.source_row,
        "publication": factor.publication,
        "radiative_forcing": factor.radiative_forcing,
        "owner": "shared" if factor.organization_id is None else "organization",
    }
