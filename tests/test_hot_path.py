"""The POST hot path's hand-written pieces say exactly what the general code they replace would say.

The fingerprint text, the calculation body and the webhook event are written out by their shape,
ids are formatted without uuid.UUID, and the four writes run in a models.WriteTransaction rather
than db.atomic(). Each is held here to its general counterpart (jsoncodec.canonical, jsoncodec.dumps,
str(uuid.UUID(...)), db.atomic()) over many inputs.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import random
import re
import threading
import uuid
from decimal import Decimal

import peewee as pw
import pytest

from emissions import calculations
from emissions import jsoncodec
from emissions import models
from emissions import schemas
from emissions import webhooks
from emissions.app import UUID_PATTERN
from conftest import post_calculation, record_statements

UTC = dt.timezone.utc
UUID4_PATTERN = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


# --- valid request bodies, written many ways ----------------------------------------------------

class Number(str):
    """A number exactly as the JSON text writes it: 12, 12.0, 1.2e1 and 12.500 are all twelve."""


NUMBERS = [Number(text) for text in (
    "12", "12.0", "1.2e1", "1.2E+1", "120e-1", "12.500", "0.1", "0.000001", "1e-7",
    "3.14159265358979323846264338327950288", "1e-150", "2.5E-101", "0." + "0" * 300 + "1",
    "999999.999999999999", "1000000", "1e6",
)]  # all within both the cargo (<= 10,000,000) and the distance (<= 1,000,000) range

TEXTS = ["shipment-1", 'say "hello"', "back\\slash\\", "Zürich – Genève", "東京", "\U0001F69A truck",
         "bell\u0001\u001f", "tab\tand\nnewline", "\u007f\u2028\u2029", "</script>", " ", "x" * 120]

PLACES = [
    {"code": "GBLON"},
    {"label": "Manchester"},
    {"code": "GBLON", "country": "GB"},
    {"country": "GB", "code": "GBLON"},
    {"label": "Zürich – Genève", "code": "CHZRH", "country": "CH"},
    {"country": "JP", "label": "東京", "code": "JPTYO"},
    {"label": 'Depot "B" \\ 2', "country": '"\\'},
    {"code": "\U0001F69A\u0001", "label": "tab\tand\nnewline"},
    {"label": "\u007f\u2028\u2029", "country": "é\u0001"},
    {"code": "x" * 20, "label": "y" * 200, "country": "\U0001F69A!"},
]


def measures(unit: str) -> list[dict]:
    """Every number, in both key orders."""
    return [{"value": number, "unit": unit} if index % 2 else {"unit": unit, "value": number}
            for index, number in enumerate(NUMBERS)]


ABSENT = object()

# Each position of a body and the ways it is written.
POSITIONS = {
    "customer_reference": TEXTS,
    "external_reference": TEXTS,
    "mode": ["ROAD", "SEA", "AIR"],
    "origin": PLACES,
    "destination": PLACES,
    "cargo": measures("tonne"),
    "distance": measures("km"),
    "activity_date": ["2026-03-01", "2024-02-29", "1999-12-31"],
    "business_context": [ABSENT, "upstream", "downstream"],
    "factor_reference": TEXTS,
}

BASE = {"customer_reference": "cust-1", "external_reference": "shipment-1", "mode": "ROAD",
        "origin": {"code": "GBLON", "country": "GB"}, "destination": {"label": "Manchester"},
        "cargo": {"value": Number("12.5"), "unit": "tonne"}, "distance": {"value": Number("320"), "unit": "km"},
        "activity_date": "2026-03-01", "factor_reference": "road-default"}


def json_text(value, rng: random.Random) -> str:
    """The value as JSON text; a string with or without its non-ASCII characters escaped."""
    if isinstance(value, Number):
        return value
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=rng.random() < 0.5)
    return "{" + ", ".join(f"{json_text(key, rng)}: {json_text(item, rng)}" for key, item in value.items()) + "}"


def body_with(choices: dict) -> dict:
    return {name: value for name, value in choices.items() if value is not ABSENT}


def body_texts():
    """The base body with each position written each way in turn, then random mixes of all the ways
    with the members of the body in a random order."""
    rng = random.Random(14083)
    for name, options in POSITIONS.items():
        for option in options:
            yield json_text(body_with({**BASE, name: option}), rng)
    for _ in range(300):
        names = list(POSITIONS)
        rng.shuffle(names)
        yield json_text(body_with({name: rng.choice(POSITIONS[name]) for name in names}), rng)


@pytest.fixture(scope="module")
def payloads() -> list[dict]:
    """Valid LogisticsRequests as the service parses them (numbers as Decimal), with defaults."""
    validator = schemas.validator("LogisticsRequest")
    parsed = [jsoncodec.loads(text) for text in body_texts()]
    for body in parsed:
        assert validator.is_valid(body), body
    return [calculations.with_defaults(body) for body in parsed]


def canonical_digest(payload: dict) -> str:
    return hashlib.sha256(jsoncodec.canonical(payload).encode()).hexdigest()


# --- the fingerprint -------------------------------------------------------------------------------

def test_the_written_out_fingerprint_text_is_canonical_text_for_every_body(payloads):
    assert len(payloads) > 350
    for payload in payloads:
        assert calculations._canonical_request(payload) == jsoncodec.canonical(payload), payload


def test_the_fingerprint_is_the_digest_of_the_canonical_text_for_every_body(payloads):
    for payload in payloads:
        assert calculations.fingerprint(payload) == canonical_digest(payload), payload


def test_the_same_request_written_differently_has_one_fingerprint():
    rng = random.Random(1)
    texts = [json_text({**BASE, "cargo": {"value": Number(twelve), "unit": "tonne"}}, rng)
             for twelve in ("12", "12.0", "1.2e1", "1.2E+1", "120e-1", "12.000")]
    texts.append(json_text({**dict(reversed(BASE.items())), "cargo": {"unit": "tonne", "value": Number("12")},
                            "business_context": "upstream"}, rng))  # the default, written out
    assert len({calculations.fingerprint(calculations.with_defaults(jsoncodec.loads(text))) for text in texts}) == 1


@pytest.mark.parametrize("reshape", [
    lambda payload: {**payload, "extra": "member"},
    lambda payload: {**payload, "cargo": {**payload["cargo"], "note": "extra"}},
    lambda payload: {**payload, "distance": {"value": payload["distance"]["value"]}},
    lambda payload: {name: value for name, value in payload.items() if name != "business_context"},
], ids=["extra-member", "extra-cargo-member", "distance-without-unit", "no-default-applied"])
def test_a_payload_of_another_shape_is_not_written_out_and_still_gets_the_canonical_digest(payloads, reshape):
    for payload in payloads[::25]:
        other = reshape(payload)
        assert calculations._canonical_request(other) is None
        assert calculations.fingerprint(other) == canonical_digest(other)


# --- the calculation body --------------------------------------------------------------------------

DECIMALS = [Decimal(text) for text in ("0", "0.000001", "4000", "4000.000000", "1234567.125",
                                       "99999999999999.999999", "1E-150", "0.5")]
ENVIRONMENTS = ["test", "live"]
MOMENTS = [dt.datetime(2026, 3, 1, 12, 34, 56, 789_000, tzinfo=UTC), dt.datetime(1999, 12, 31, 23, 59, 59, tzinfo=UTC),
           dt.datetime(2026, 11, 5, 0, 0, 0, 999_999, tzinfo=UTC)]
FACTORS = [
    models.Factor(reference="road-default", version=1, mode="ROAD", value=Decimal("0.12522"), name="Road average",
                  source="Test source", region=None, valid_from=dt.date(2025, 1, 1), valid_to=None),
    models.Factor(reference='sea "bulk" \\ é', version=12, mode="SEA", value=Decimal("0.01"), name="\U0001F6A2 Sea",
                  source="bell\u0001 source", region="EU", valid_from=None, valid_to=dt.date(2030, 12, 31)),
]
LINEAGES = [jsoncodec.dumps(factor.lineage()) for factor in FACTORS] + [jsoncodec.dumps({"small": "lineage"})]


def pick(options: list, index: int):
    return options[index % len(options)]


BREAKDOWNS = [None, (Decimal("406.52"), Decimal("94.36")), (Decimal("0"), Decimal("0.000001")),
              (Decimal("99999999999999.999999"), Decimal("1E-150"))]


def expected_body(calculation_id, environment, payload, customer_reference, activity, emissions, lineage,
                  created_at, breakdown=None) -> dict:
    """The calculation as the API has always answered it, in this key order."""
    context = payload["business_context"]
    return {
        "id": calculation_id,
        "external_reference": payload["external_reference"],
        "status": "succeeded",
        "environment": environment,
        "customer": {"reference": customer_reference},
        "mode": payload["mode"],
        "activity_date": payload["activity_date"],
        "origin": payload["origin"],
        "destination": payload["destination"],
        "cargo": {"value": payload["cargo"]["value"], "unit": "tonne"},
        "distance": {"value": payload["distance"]["value"], "unit": "km"},
        "activity": {"value": activity, "unit": "tkm"},
        "emissions": {"value": emissions, "unit": "kgCO2e",
                      **({"breakdown": {"ttw": breakdown[0], "wtt": breakdown[1]}} if breakdown else {})},
        "methodology": {"standard": "ISO 14083:2023", "boundary": "WTW", "business_context": context,
                        "scope3_category": {"upstream": 4, "downstream": 9}[context]},
        "factor": jsoncodec.loads(lineage),
        "created_at": models.isoformat(created_at),
    }


def in_order(value):
    """Every object as the list of its (key, value) pairs, so that only the same key order compares equal."""
    if isinstance(value, dict):
        return [(key, in_order(item)) for key, item in value.items()]
    return value


def test_the_written_out_calculation_body_is_what_dumps_writes_for_every_body(payloads):
    for index, payload in enumerate(payloads):
        inputs = (models.uuid4_text(os.urandom(16)), pick(ENVIRONMENTS, index), payload, pick(TEXTS, index),
                  pick(DECIMALS, index), pick(DECIMALS, index + 3), pick(LINEAGES, index), pick(MOMENTS, index),
                  pick(BREAKDOWNS, index))
        text = calculations.calculation_body(*inputs)
        parsed = jsoncodec.loads(text)
        assert text == jsoncodec.dumps(parsed), text
        assert in_order(parsed) == in_order(expected_body(*inputs)), text


# --- the webhook event -----------------------------------------------------------------------------

def test_the_written_out_event_payload_is_what_dumps_writes(payloads):
    data_texts = [calculations.calculation_body(models.new_id(), "test", payload, "cust-1", Decimal("4000"),
                                                Decimal("500.88"), LINEAGES[0], MOMENTS[0])
                  for payload in payloads[::40]] + [jsoncodec.dumps({"error": 'a "quoted" \\ \u0001 é \U0001F69A'})]
    for index, data_json in enumerate(data_texts):
        environment, event_type = pick(ENVIRONMENTS, index), pick(["calculation.succeeded", "calculation.failed"],
                                                                  index)
        created_at = pick(MOMENTS, index)
        event = webhooks.new_event(7, environment, event_type, data_json, created_at)
        parsed = jsoncodec.loads(event.payload)
        assert event.payload == jsoncodec.dumps(parsed)
        assert in_order(parsed) == in_order({"id": event.id, "type": event_type,
                                             "created_at": models.isoformat(created_at),
                                             "environment": environment, "data": jsoncodec.loads(data_json)})
        assert (event.organization_id, event.environment, event.type, event.created_at) == (
            7, environment, event_type, created_at)
        assert UUID4_PATTERN.match(event.id)


def test_an_event_without_a_moment_of_its_own_is_made_now():
    before = models.utcnow()
    event = webhooks.new_event(7, "test", "calculation.succeeded", '{"id":"x"}')
    after = models.utcnow()
    assert before <= event.created_at <= after
    assert event.created_at.tzinfo is not None
    assert jsoncodec.loads(event.payload)["created_at"] == models.isoformat(event.created_at)


# --- ids ---------------------------------------------------------------------------------------------

def uuid4_by_the_uuid_module(random_bytes: bytes) -> str:
    return str(uuid.UUID(bytes=random_bytes, version=4))


def test_an_id_is_the_text_of_uuid_module_version_4_uuid_for_random_bytes():
    for _ in range(2000):
        random_bytes = os.urandom(16)
        assert models.uuid4_text(random_bytes) == uuid4_by_the_uuid_module(random_bytes), random_bytes.hex()


@pytest.mark.parametrize("position", [6, 8], ids=["version-byte", "variant-byte"])
def test_an_id_is_the_uuid_module_text_for_every_value_of_the_bytes_the_version_and_variant_overwrite(position):
    for value in range(256):
        random_bytes = bytearray(os.urandom(16))
        random_bytes[position] = value
        assert models.uuid4_text(bytes(random_bytes)) == uuid4_by_the_uuid_module(bytes(random_bytes)), value


@pytest.mark.parametrize("random_bytes", [bytes(16), b"\xff" * 16, bytes(range(16)), bytes(range(255, 239, -1))],
                         ids=["all-zero", "all-ones", "ascending", "descending"])
def test_an_id_is_the_uuid_module_text_for_edge_bytes(random_bytes):
    assert models.uuid4_text(random_bytes) == uuid4_by_the_uuid_module(random_bytes)


def test_new_ids_match_the_pattern_the_api_accepts_and_are_version_4():
    for _ in range(1000):
        value = models.new_id()
        assert UUID_PATTERN.match(value) and UUID4_PATTERN.match(value), value


# --- models.WriteTransaction -------------------------------------------------------------------------

INSERT_SECRET = "INSERT INTO instance_secret (name, value) VALUES (?, ?)"


def insert_secret(cursor, name: str, value: str = "v") -> None:
    cursor.execute(models.sql(INSERT_SECRET), (name, value))


def stored_names() -> set[str]:
    """The instance_secret names, read on a new connection (what is not committed is not there)."""
    models.db.close()
    return {row.name for row in models.InstanceSecret.select()}


def a_writer_on_another_thread_gets_through() -> bool:
    """Whether a WriteTransaction on another thread (its own connection) commits within 5 s: not
    when this thread left SQLite's writer lock or a transaction behind."""
    committed = threading.Event()

    def write():
        try:
            with models.WriteTransaction() as cursor:
                insert_secret(cursor, "other-thread-" + os.urandom(8).hex())
            committed.set()
        finally:
            models.db.close()

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    thread.join(timeout=5)
    return committed.is_set()


def assert_the_database_takes_writes_again() -> None:
    assert a_writer_on_another_thread_gets_through()
    with models.db.atomic():
        models.InstanceSecret.create(name="afterwards", value="v")
    assert "afterwards" in stored_names()


class Abandoned(Exception):
    pass


@pytest.mark.on_both
def test_a_write_transaction_commits_its_statements(app):
    with models.WriteTransaction() as cursor:
        insert_secret(cursor, "first")
        insert_secret(cursor, "second")
    assert {"first", "second"} <= stored_names()
    assert_the_database_takes_writes_again()


class OperationalError(Exception):
    """Not a driver's error, though it has the name of one."""


@pytest.mark.on_both
@pytest.mark.parametrize("error", [Abandoned("changed my mind"), OperationalError("the service's own")],
                         ids=["any-error", "not-the-drivers-though-named-like-it"])
def test_an_exception_in_a_write_transaction_rolls_it_back_and_goes_on_as_it_is(app, error):
    with pytest.raises(type(error)) as caught:
        with models.WriteTransaction() as cursor:
            insert_secret(cursor, "abandoned")
            raise error
    assert caught.value is error  # a driver-named error of ours is not turned into Peewee's
    assert "abandoned" not in {row.name for row in models.InstanceSecret.select()}  # not even on this connection
    assert "abandoned" not in stored_names()
    assert_the_database_takes_writes_again()


@pytest.mark.on_both
def test_a_driver_integrity_error_in_a_write_transaction_is_peewees_and_rolls_it_back(app):
    models.InstanceSecret.create(name="taken", value="original")
    with pytest.raises(pw.IntegrityError):
        with models.WriteTransaction() as cursor:
            insert_secret(cursor, "before-the-duplicate")
            insert_secret(cursor, "taken", "duplicate")
    assert "before-the-duplicate" not in {row.name for row in models.InstanceSecret.select()}
    assert "before-the-duplicate" not in stored_names()
    assert models.InstanceSecret.get(models.InstanceSecret.name == "taken").value == "original"
    assert_the_database_takes_writes_again()


@pytest.mark.on_both
def test_an_atomic_block_inside_a_write_transaction_is_part_of_it(app):
    # A savepoint of the write transaction, so the outer rollback undoes it too (a transaction of
    # its own would have committed the outer insert on PostgreSQL and waited on its own writer
    # lock on SQLite).
    with pytest.raises(Abandoned):
        with models.WriteTransaction() as cursor:
            insert_secret(cursor, "outer")
            with models.db.atomic():
                models.InstanceSecret.create(name="inner", value="v")
            raise Abandoned("changed my mind")
    assert not {"outer", "inner"} & stored_names()
    assert_the_database_takes_writes_again()


@pytest.mark.on_both
def test_a_write_transaction_refuses_to_run_inside_another_transaction(app):
    with models.db.atomic():
        with pytest.raises(RuntimeError, match="inside another transaction"):
            with models.WriteTransaction() as cursor:
                insert_secret(cursor, "nested")  # never runs
        models.InstanceSecret.create(name="outer", value="v")  # the outer transaction goes on
    assert "outer" in stored_names() and "nested" not in stored_names()
    assert_the_database_takes_writes_again()


# --- the calculation's transaction at the capacity -------------------------------------------------

def left_behind(customer) -> tuple:
    """What calculations leave: the calculations, the customer's rollups, the events, the usage."""
    return ([row.id for row in models.Calculation.select()],
            [(row.mode, row.business_context, row.calculation_count, row.activity_tkm, row.emissions_kg)
             for row in models.CustomerRollup.select().where(models.CustomerRollup.customer == customer.id)],
            [(row.id, row.type) for row in models.WebhookEvent.select()],
            [(row.period, row.count) for row in models.UsageCounter.select()])


@pytest.mark.on_both
def test_a_calculation_over_the_capacity_rolls_back_its_insert_and_leaves_nothing_behind(client, acme, monkeypatch):
    models.Organization.update(test_capacity=1).where(models.Organization.id == acme.org.id).execute()
    post_calculation(client, acme, idempotency_key="within", status=201)
    before = left_behind(acme.customer)
    sent: list[str] = []
    original = record_statements(monkeypatch, lambda statement, params: sent.append(statement))
    try:
        refused = post_calculation(client, acme, idempotency_key="over", status=429)
    finally:
        monkeypatch.setattr(models.db.obj, "cursor", original)
    assert refused.json["error"]["code"] == "USAGE_LIMIT_REACHED"
    # The key and the lookup; then the calculation's INSERT, the counter's, which changes no row: ROLLBACK.
    assert [statement.split(None, 1)[0].upper() for statement in sent] == [
        "SELECT", "SELECT", "BEGIN", "INSERT", "INSERT", "ROLLBACK"]
    assert [statement.split()[2] for statement in sent[3:5]] == ["calculation", "usage_counter"]
    after = left_behind(acme.customer)
    assert after == before
    assert len(after[0]) == 1 and len(after[1]) == 1 and len(after[2]) == 1  # the first one's, all there


@pytest.mark.parametrize("value", [None, 12, memoryview(b"{}")])
def test_parsing_what_is_neither_text_nor_bytes_is_a_type_error_as_json_loads_makes_it(value):
    with pytest.raises(TypeError, match="must be str, bytes or bytearray"):
        jsoncodec.loads(value)
