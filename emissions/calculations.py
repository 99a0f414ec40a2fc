"""The calculation: tonnes x km = tkm, tkm x governed factor = kgCO2e, stored once, replayed exactly."""
from __future__ import annotations

import datetime as dt
import hashlib
import threading
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from typing import NamedTuple

import peewee as pw

from . import customers
from . import jsoncodec
from . import limits
from . import webhooks
from .errors import ApiError, CalculationFailed, IdempotencyError, InvalidRequest, NotFound, PermissionError_
from .models import Calculation, Factor, WriteTransaction, db, isoformat, new_id, sql, utcnow

SIX_PLACES = Decimal("0.000001")
SCOPE3_CATEGORY = {"upstream": 4, "downstream": 9}


@dataclass(frozen=True)
class Outcome:
    """What the API answers: the stored body, and whether it is a replay."""

    calculation_id: str
    body: str
    replayed: bool


def round6(value: Decimal) -> Decimal:
    return value.quantize(SIX_PLACES, rounding=ROUND_HALF_EVEN)


def compute(cargo_tonnes: Decimal, distance_km: Decimal, factor_value: Decimal) -> tuple[Decimal, Decimal]:
    """(activity tkm, emissions kgCO2e), each rounded half-even to 6 places; emissions use the rounded tkm."""
    with localcontext() as context:
        # Wide enough for both exact products, so that only the documented rounding ever happens.
        context.prec = 60 + sum(len(value.as_tuple().digits) for value in (cargo_tonnes, distance_km, factor_value))
        activity = round6(cargo_tonnes * distance_km)
        emissions = round6(activity * factor_value)
    return activity, emissions


def refuse_zero(activity: Decimal, emissions: Decimal) -> None:
    """A shipment whose activity or emissions round to 0 is a 422 naming the fields, never a zero calculation.

    Here, after the arithmetic both validators lead to, rather than in a schema: the emissions depend
    on the factor's value too.
    """
    if activity == 0:
        message = "times the other value is 0.0000005 tkm or less, which rounds to 0"
        raise InvalidRequest("The request body is invalid: cargo.value × distance.value rounds to 0 tkm.",
                             status=422, details=[{"field": "cargo.value", "message": message},
                                                  {"field": "distance.value", "message": message}])
    if emissions == 0:
        message = "gives emissions that round to 0 kgCO2e with this factor"
        raise InvalidRequest("The request body is invalid: the emissions round to 0 kgCO2e.", status=422,
                             details=[{"field": "cargo.value", "message": message},
                                      {"field": "distance.value", "message": message}])


def fingerprint(payload: dict) -> str:
    """A digest of the material payload, equal for the same data however it was written."""
    text = _canonical_request(payload)
    return hashlib.sha256((text if text is not None else jsoncodec.canonical(payload)).encode()).hexdigest()


REQUEST_KEYS = frozenset(("customer_reference", "external_reference", "mode", "origin", "destination", "cargo",
                          "distance", "activity_date", "business_context", "factor_reference"))
MEASURE_KEYS = frozenset(("value", "unit"))


def _canonical_request(payload: dict) -> str | None:
    """jsoncodec.canonical() of a validated LogisticsRequest with its defaults, written out by its
    shape (a third of the cost); None for a payload of any other shape.

    Every calculation stores the digest of this text, so it must stay canonical()'s to the byte:
    tests/test_hot_path.py compares the two over 397 bodies written every way. A value of a
    type the shape does not have (an int where parsing gives a Decimal) raises rather than differs.
    """
    cargo, distance = payload["cargo"], payload["distance"]
    if payload.keys() != REQUEST_KEYS or cargo.keys() != MEASURE_KEYS or distance.keys() != MEASURE_KEYS:
        return None
    text, number = jsoncodec.string, jsoncodec.decimal_text
    return (f'{{"activity_date":{text(payload["activity_date"])},'
            f'"business_context":{text(payload["business_context"])},'
            f'"cargo":{{"unit":{text(cargo["unit"])},"value":{number(cargo["value"])}}},'
            f'"customer_reference":{text(payload["customer_reference"])},'
            f'"destination":{jsoncodec.canonical_text_object(payload["destination"])},'
            f'"distance":{{"unit":{text(distance["unit"])},"value":{number(distance["value"])}}},'
            f'"external_reference":{text(payload["external_reference"])},'
            f'"factor_reference":{text(payload["factor_reference"])},"mode":{text(payload["mode"])},'
            f'"origin":{jsoncodec.canonical_text_object(payload["origin"])}}}')


def calculation_body(calculation_id: str, environment: str, payload: dict, customer_reference: str,
                     activity: Decimal, emissions: Decimal, factor_lineage: str, created_at: dt.datetime) -> str:
    """The Calculation a new calculation answers and stores, as JSON text.

    Written out, the way jsoncodec.dumps() would write the same data in this key order (a test
    holds it to that), because building the dict and walking it cost a tenth of a calculation.
    `factor_lineage` is the factor's lineage as JSON text.
    """
    text, number = jsoncodec.string, jsoncodec.decimal_text
    context = payload["business_context"]
    return (f'{{"id":"{calculation_id}","external_reference":{text(payload["external_reference"])},'
            f'"status":"succeeded","environment":{text(environment)},'
            f'"customer":{{"reference":{text(customer_reference)}}},"mode":{text(payload["mode"])},'
            f'"activity_date":{text(payload["activity_date"])},'
            f'"origin":{jsoncodec.text_object(payload["origin"])},'
            f'"destination":{jsoncodec.text_object(payload["destination"])},'
            f'"cargo":{{"value":{number(payload["cargo"]["value"])},"unit":"tonne"}},'
            f'"distance":{{"value":{number(payload["distance"]["value"])},"unit":"km"}},'
            f'"activity":{{"value":{number(activity)},"unit":"tkm"}},'
            f'"emissions":{{"value":{number(emissions)},"unit":"kgCO2e"}},'
            f'"methodology":{{"standard":"ISO 14083:2023","boundary":"WTW","business_context":{text(context)},'
            f'"scope3_category":{SCOPE3_CATEGORY[context]}}},'
            f'"factor":{factor_lineage},"created_at":"{isoformat(created_at)}"}}')


def with_defaults(payload: dict) -> dict:
    """The validated body with documented defaults applied."""
    return {**payload, "business_context": payload.get("business_context", "upstream")}


# The hot path's statements are written by hand: building them with Peewee's query builder cost
# more than running them (README, "Performance"); tests/test_statement_count.py holds their number.

class Stored(NamedTuple):
    """The parts of a stored calculation a replay needs."""

    id: str
    fingerprint: str
    body: str


class CustomerRow(NamedTuple):
    """The parts of the customer a calculation needs."""

    id: int
    reference: str
    status: str


FIND_BY_KEY = ("SELECT id, fingerprint, body FROM calculation"
               " WHERE organization_id = ? AND environment = ? AND idempotency_key = ?")

# Everything calculate() decides on, in one statement: the calculation the key already made, the
# customer, and the active factor version visible to the organization (global or its own).
LOOKUP = (
    "SELECT k.id, k.fingerprint, k.body, c.id, c.reference, c.status,"
    " f.id, f.reference, f.version, f.mode, f.value, f.name, f.source, f.region, f.valid_from, f.valid_to"
    " FROM (SELECT 1 AS one) AS base"
    " LEFT JOIN calculation AS k"
    "  ON k.organization_id = ? AND k.environment = ? AND k.idempotency_key = ?"
    " LEFT JOIN customer AS c ON c.organization_id = ? AND c.environment = ? AND c.reference = ?"
    " LEFT JOIN factor AS f ON f.reference = ? AND f.status = 'active'"
    "  AND (f.organization_id IS NULL OR f.organization_id = ?)"
)

GET_BODY = "SELECT body FROM calculation WHERE id = ? AND organization_id = ? AND environment = ?"

INSERT_FIELDS = (
    Calculation.id, Calculation.organization, Calculation.environment, Calculation.customer,
    Calculation.external_reference, Calculation.idempotency_key, Calculation.fingerprint, Calculation.mode,
    Calculation.business_context, Calculation.activity_date, Calculation.cargo_tonnes, Calculation.distance_km,
    Calculation.activity_tkm, Calculation.emissions_kg, Calculation.factor, Calculation.factor_version,
    Calculation.factor_value, Calculation.request_id, Calculation.body, Calculation.created_at,
)
INSERT = (f"INSERT INTO {Calculation._meta.table_name} ({', '.join(f.column_name for f in INSERT_FIELDS)})"
          f" VALUES ({', '.join('?' for _ in INSERT_FIELDS)})")
# The fields whose stored form is not the value itself; the decimals are stored as str(), which is
# what ExactDecimalField.db_value() gives a Decimal.
STORED_DATE = Calculation.activity_date.db_value
STORED_TIMESTAMP = Calculation.created_at.db_value


class RecentCalculations:
    """Calculations this process created or read lately, by id and by idempotency key.

    A stored calculation never changes and a key stays bound to it for as long as it is stored
    (decisions, sections 2 and 3), so an entry can never go stale, whatever other instances or
    the CLI write: a GET or a replay found here needs no statement at all. With a key it also
    keeps a digest of request bytes known to be that key's payload: a replay sending the same
    bytes skips parsing, validation and the fingerprint. Bounded: past `size` entries the first
    remembered go first (a hit does not renew an entry); size 0 keeps nothing.

    It relies on the database never losing a committed calculation: after restoring a backup or
    failing over to a replica that may lack the last commits, restart the instances (README).
    """

    def __init__(self, size: int):
        self.size = size
        self._by_id: dict[str, tuple[int, str, str]] = {}  # id -> (organization, environment, body)
        # (organization, environment, key) -> (Stored, sha256 of request bytes with that payload, or None)
        self._by_key: dict[tuple[int, str, str], tuple[Stored, bytes | None]] = {}
        self._lock = threading.Lock()  # writers only: readers take a dict lookup, atomic under the GIL

    def body(self, organization_id: int, environment: str, calculation_id: str) -> str | None:
        """The body if known here; a calculation of another tenant is not known here."""
        found = self._by_id.get(calculation_id)
        if found is None or found[0] != organization_id or found[1] != environment:
            return None
        return found[2]

    def by_key(self, organization_id: int, environment: str, idempotency_key: str) -> Stored | None:
        """The calculation this key made, if known here."""
        found = self._by_key.get((organization_id, environment, idempotency_key))
        return found[0] if found else None

    def replay_of(self, organization_id: int, environment: str, idempotency_key: str | None,
                  raw: bytes) -> Outcome | None:
        """The replay of the calculation this key made, when `raw` are bytes known to carry its payload.

        Such bytes were parsed, validated and found to be the key's payload before, so the answer
        is the replay whatever parsing and validation would say now; for any other bytes, None.
        """
        found = self._by_key.get((organization_id, environment, idempotency_key))
        if found is None or found[1] is None or hashlib.sha256(raw).digest() != found[1]:
            return None
        return Outcome(found[0].id, found[0].body, replayed=True)

    def remember(self, organization_id: int, environment: str, idempotency_key: str | None,
                 stored: Stored, raw: bytes | None = None) -> None:
        """Keep a calculation; with its key, and with `raw` when those bytes carry the key's payload."""
        if not self.size:
            return
        digest = hashlib.sha256(raw).digest() if raw is not None else None
        with self._lock:
            self._by_id[stored.id] = (organization_id, environment, stored.body)
            if idempotency_key is not None:
                self._by_key[(organization_id, environment, idempotency_key)] = (stored, digest)
            for entries in (self._by_id, self._by_key):
                while len(entries) > self.size:
                    del entries[next(iter(entries))]  # dicts keep insertion order: the oldest

    def forget(self) -> None:
        """Keep nothing (as a process that never saw them: another instance, or after a restart)."""
        with self._lock:
            self._by_id.clear()
            self._by_key.clear()


def find_by_key(organization_id: int, environment: str, idempotency_key: str) -> Stored | None:
    """The calculation this organization and environment made with this Idempotency-Key, if any."""
    row = db.execute_sql(sql(FIND_BY_KEY), (organization_id, environment, idempotency_key)).fetchone()
    return Stored(*row) if row else None


class FactorVersion(NamedTuple):
    """An active factor version as a calculation uses it: the Factor and its lineage as JSON text."""

    factor: Factor
    lineage: str


# Each factor version the lookup returns is turned into a FactorVersion once per process, keyed by
# the columns themselves (LOOKUP checks the status every time), so a kept one cannot differ from its row.
_factor_versions: dict[tuple, FactorVersion] = {}
FACTOR_VERSIONS_KEPT = 1024


def _factor_version(row: tuple) -> FactorVersion:
    version = _factor_versions.get(row)
    if version is None:
        factor = Factor(id=row[0], reference=row[1], version=row[2], mode=row[3],
                        value=Factor.value.python_value(row[4]), name=row[5], source=row[6], region=row[7],
                        valid_from=Factor.valid_from.python_value(row[8]),
                        valid_to=Factor.valid_to.python_value(row[9]), status="active")
        version = FactorVersion(factor, jsoncodec.dumps(factor.lineage()))
        if len(_factor_versions) >= FACTOR_VERSIONS_KEPT:
            _factor_versions.clear()  # more versions in use than kept: start over
        _factor_versions[row] = version
    return version


def _lookup(organization_id: int, environment: str, idempotency_key: str, customer_reference: str,
            factor_reference: str) -> tuple[Stored | None, CustomerRow | None, FactorVersion | None]:
    row = db.execute_sql(sql(LOOKUP), (organization_id, environment, idempotency_key, organization_id,
                                       environment, customer_reference, factor_reference,
                                       organization_id)).fetchone()
    if row[0] is not None:
        return Stored(*row[0:3]), None, None  # a replay needs nothing else
    customer = CustomerRow(*row[3:6]) if row[3] is not None else None
    factor = _factor_version(row[6:16]) if row[6] is not None else None
    return None, customer, factor


def _replay(existing, payload_fingerprint: str) -> Outcome:
    if existing.fingerprint != payload_fingerprint:
        raise IdempotencyError("This Idempotency-Key was already used with a different request body; "
                               "use a new key for a new calculation.")
    return Outcome(existing.id, existing.body, replayed=True)


def _remembered_replay(recent: RecentCalculations, organization_id: int, environment: str, idempotency_key: str,
                       existing: Stored, payload_fingerprint: str, raw: bytes | None) -> Outcome:
    """The replay of a calculation read from the database (409 on another payload), remembered."""
    outcome = _replay(existing, payload_fingerprint)
    recent.remember(organization_id, environment, idempotency_key, existing, raw)  # raw: the same payload
    return outcome


def get(organization_id: int, environment: str, calculation_id: str, recent: RecentCalculations) -> str:
    """The stored body of a calculation in this organization and environment, or a tenant-safe 404."""
    body = recent.body(organization_id, environment, calculation_id)
    if body is not None:
        return body
    row = db.execute_sql(sql(GET_BODY), (calculation_id, organization_id, environment)).fetchone()
    if row is None:
        raise NotFound("No calculation with this id exists.")
    recent.remember(organization_id, environment, None, Stored(calculation_id, "", row[0]))
    return row[0]


def calculate(organization_id: int, environment: str, payload: dict, idempotency_key: str,
              request_id: str, test_capacity_default: int, recent: RecentCalculations,
              raw: bytes | None = None) -> Outcome:
    """Create a calculation for a validated payload, or replay the one its idempotency key made.

    `raw`, the request bytes the payload was parsed from, is remembered with the outcome.
    """
    payload = with_defaults(payload)
    payload_fingerprint = fingerprint(payload)
    existing = recent.by_key(organization_id, environment, idempotency_key)
    if existing is not None:
        return _replay(existing, payload_fingerprint)
    existing, customer, version = _lookup(organization_id, environment, idempotency_key,
                                          payload["customer_reference"], payload["factor_reference"])
    if existing is not None:
        return _remembered_replay(recent, organization_id, environment, idempotency_key, existing,
                                  payload_fingerprint, raw)

    if customer is None:
        raise NotFound("No customer with this customer_reference exists.", code="CUSTOMER_NOT_FOUND")
    if customer.status != "active":
        raise PermissionError_(f"The customer is {customer.status}; only active customers can be charged "
                               "with new calculations.", code="CUSTOMER_ACCESS_DENIED")
    if version is None:
        raise NotFound("No active governed factor with this factor_reference is available.",
                       code="FACTOR_NOT_FOUND")
    factor = version.factor
    activity_date = dt.date.fromisoformat(payload["activity_date"])
    reason = factor.applies_to(payload["mode"], activity_date)
    if reason is not None:
        _fail(organization_id, environment, payload, request_id,
              CalculationFailed(f"The factor does not apply: {reason}."))

    cargo, distance = payload["cargo"]["value"], payload["distance"]["value"]
    activity, emissions = compute(cargo, distance, factor.value)
    refuse_zero(activity, emissions)
    calculation_id = new_id()
    created_at = utcnow()
    body = calculation_body(calculation_id, environment, payload, customer.reference, activity, emissions,
                            version.lineage, created_at)
    row = (calculation_id, organization_id, environment, customer.id, payload["external_reference"],
           idempotency_key, payload_fingerprint, payload["mode"], payload["business_context"],
           STORED_DATE(activity_date), str(cargo), str(distance), str(activity), str(emissions), factor.id,
           factor.version, str(factor.value), request_id, body, STORED_TIMESTAMP(created_at))
    # Everything the transaction sends is made before it begins, so that it holds only its four writes.
    insert = sql(INSERT)
    consume, consume_params = limits.consume_statement(organization_id, environment, test_capacity_default,
                                                       created_at)
    rollup, rollup_params = customers.rollup_statement(customer.id, environment, payload["mode"],
                                                       payload["business_context"], activity, emissions,
                                                       activity_date)
    event, event_params = webhooks.event_statement(webhooks.new_event(
        organization_id, environment, "calculation.succeeded", body, created_at))
    try:
        with WriteTransaction() as cursor:
            cursor.execute(insert, row)
            # Counted after the insert: a concurrent request with the same key fails on the unique
            # key above and becomes a replay, which capacity never blocks.
            cursor.execute(consume, consume_params)
            limits.check_consumed(cursor.rowcount, created_at)
            cursor.execute(rollup, rollup_params)
            cursor.execute(event, event_params)
    except pw.IntegrityError:
        # A concurrent request with the same key committed first: answer as its replay.
        existing = find_by_key(organization_id, environment, idempotency_key)
        if existing is None:
            raise
        return _remembered_replay(recent, organization_id, environment, idempotency_key, existing,
                                  payload_fingerprint, raw)
    recent.remember(organization_id, environment, idempotency_key, Stored(calculation_id, payload_fingerprint, body),
                    raw)
    return Outcome(calculation_id, body, replayed=False)


def _fail(organization_id: int, environment: str, payload: dict, request_id: str, error: ApiError):
    """Commit a calculation.failed event for this outcome, then raise the error."""
    data = jsoncodec.dumps({
        "external_reference": payload["external_reference"],
        "customer": {"reference": payload["customer_reference"]},
        "error": {"code": error.code, "message": error.message, "request_id": request_id},
    })
    with db.atomic():
        webhooks.insert_event(webhooks.new_event(organization_id, environment, "calculation.failed", data))
    raise error
