"""What a calculation stores: one fingerprint for the same request however it is written, the
body in the API's key order with exact numbers, and the webhook event around it; the transaction
at the capacity leaves nothing behind."""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import random
import re
from decimal import Decimal

import pytest

from emissions import calculations
from emissions import jsoncodec
from emissions import models
from emissions import schemas
from emissions.exports import json as views
from emissions.webhooks import events as webhook_events
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
         "soft\u00adhyphen\u200b", "line\u2028and\u2029paragraph", "\u00a0\u2028\u2029", "</script>", " ",
         "x" * 120]  # no control characters: the text rule (emissions/text.py) refuses them

PLACES = [
    {"code": "GBLON"},
    {"label": "Manchester"},
    {"code": "GBLON", "country": "GB"},
    {"country": "GB", "code": "GBLON"},
    {"label": "Zürich – Genève", "code": "CHZRH", "country": "CH"},
    {"country": "JP", "label": "東京", "code": "JPTYO"},
    {"label": 'Depot "B" \\ 2', "country": '"\\'},
    {"code": "\U0001F69A\u00ad", "label": "line\u2028and\u2029paragraph"},
    {"label": "\u00a0\u2028\u2029", "country": "é\u200b"},
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
    return hashlib.sha256(jsoncodec.canonical(payload).encode()).hexdigest()[:32]


# --- the fingerprint -------------------------------------------------------------------------------

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


def test_the_canonical_text_sorts_keys_and_writes_numbers_by_value():
    assert jsoncodec.canonical(jsoncodec.loads(b'{"b": [1.50, {"d": 1e1, "c": "x"}], "a": null}')) == (
        '{"a":null,"b":[1.5,{"c":"x","d":10}]}')


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


def test_the_calculation_body_keeps_the_api_s_key_order_and_exact_numbers_for_every_body(payloads):
    for index, payload in enumerate(payloads):
        factor = pick(FACTORS, index)
        inputs = (models.new_id(), pick(ENVIRONMENTS, index), payload, pick(TEXTS, index),
                  pick(DECIMALS, index), pick(DECIMALS, index + 3), factor, pick(MOMENTS, index),
                  pick(BREAKDOWNS, index))
        text = jsoncodec.dumps(views.calculation(*inputs))
        parsed = jsoncodec.loads(text)
        assert text == jsoncodec.dumps(parsed), text
        assert in_order(parsed) == in_order(expected_body(*inputs[:6], jsoncodec.dumps(factor.lineage()),
                                                          inputs[7], inputs[8])), text


# --- the webhook event -----------------------------------------------------------------------------

def test_the_event_payload_carries_the_data_text_as_it_is(payloads):
    data_texts = [jsoncodec.dumps(views.calculation(models.new_id(), "test", payload, "cust-1", Decimal("4000"),
                                                    Decimal("500.88"), FACTORS[0], MOMENTS[0]))
                  for payload in payloads[::40]] + [jsoncodec.dumps({"error": 'a "quoted" \\ \u0001 é \U0001F69A'})]
    for index, data_json in enumerate(data_texts):
        environment, event_type = pick(ENVIRONMENTS, index), pick(["calculation.succeeded", "calculation.failed"],
                                                                  index)
        created_at = pick(MOMENTS, index)
        event = webhook_events.new_event(7, environment, event_type, data_json, created_at)
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
    event = webhook_events.new_event(7, "test", "calculation.succeeded", '{"id":"x"}')
    after = models.utcnow()
    assert before <= event.created_at <= after
    assert event.created_at.tzinfo is not None
    assert jsoncodec.loads(event.payload)["created_at"] == models.isoformat(event.created_at)


# --- ids ---------------------------------------------------------------------------------------------

def test_new_ids_match_the_pattern_the_api_accepts_and_are_version_4():
    for _ in range(1000):
        value = models.new_id()
        assert UUID_PATTERN.match(value) and UUID4_PATTERN.match(value), value


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
