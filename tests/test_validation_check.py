"""The quick check (fastjsonschema, compiled from the same schemas) says "valid" exactly when jsonschema does."""
from __future__ import annotations

import copy
import itertools

import fastjsonschema
import pytest

from emissions import jsoncodec
from emissions import schemas
from conftest import logistics_body

# Values of every JSON type and at the edges of the document's rules, tried at every position.
PROBES = [
    None, True, False, "", "x", "ROAD", "road", "tonne", "km", "upstream", "downstream", "GB", "GBR",
    "2026-03-01", "2026-02-30", "2026-3-1", "a\u0000b", "\ud800", "é" * 120, "x" * 121, "x" * 20, "x" * 21,
    "x" * 200, "x" * 201, [], ["ROAD"], {}, {"code": "X"}, {"label": "Y"}, {"country": "GB"},
    {"value": 1, "unit": "tonne"}, {"value": 1, "unit": "km"},
    *(jsoncodec.loads(text) for text in ("0", "-1", "0.000001", "1", "12.5", "10000000", "10000000.000001",
                                         "1000000", "1000000.5", "1e-400", "1" + "0" * 30)),
    0.0, 1, 2.5,
]


def paths(value, prefix=()):
    """Every (path, container) position in a nested dict."""
    if isinstance(value, dict):
        for name, item in value.items():
            yield prefix + (name,)
            yield from paths(item, prefix + (name,))


def replaced(body: dict, path: tuple, value) -> dict:
    body = copy.deepcopy(body)
    target = body
    for name in path[:-1]:
        target = target[name]
    target[path[-1]] = value
    return body


def removed(body: dict, path: tuple) -> dict:
    body = copy.deepcopy(body)
    target = body
    for name in path[:-1]:
        target = target[name]
    del target[path[-1]]
    return body


def variants(body: dict):
    """The body, each position replaced by each probe, removed, and an unknown member added everywhere."""
    yield body
    for path in paths(body):
        for probe in PROBES:
            yield replaced(body, path, probe)
        yield removed(body, path)
        parent = path[:-1]
        yield replaced(body, parent + ("unknown",), 1)
    for first, second in itertools.combinations(list(paths(body))[:8], 2):
        yield removed(removed(body, first), second) if first[:1] != second[:1] else body


@pytest.fixture(scope="module")
def logistics():
    return schemas.validator("LogisticsRequest"), schemas.quick_check("LogisticsRequest")


@pytest.mark.parametrize("business_context", [None, "upstream", "downstream"])
def test_the_check_agrees_with_jsonschema_on_every_variant_of_a_body(logistics, business_context):
    validator, check = logistics
    body = jsoncodec.loads(jsoncodec.dumps(logistics_body()).encode())  # numbers as Decimal, as served
    if business_context:
        body["business_context"] = business_context
    outcomes = []
    for variant in variants(body):
        outcomes.append(validator.is_valid(variant))
        assert check(variant) == outcomes[-1], variant
    assert len(outcomes) > 700 and outcomes.count(True) > 30  # both answers were exercised


def test_a_valid_body_with_float_and_int_numbers_is_valid_both_ways(logistics):
    validator, check = logistics
    assert check(logistics_body()) and validator.is_valid(logistics_body())


@pytest.mark.parametrize("component", sorted(schemas.openapi()["components"]["schemas"]))
def test_every_component_that_compiles_accepts_what_jsonschema_accepts(component):
    validator, check = schemas.validator(component), schemas.quick_check(component)
    for probe in PROBES:
        assert check(probe) == validator.is_valid(probe), probe


def test_a_number_with_more_decimal_places_than_the_document_allows_is_never_quickly_valid():
    body = jsoncodec.loads(jsoncodec.dumps(logistics_body()).encode())
    body["cargo"]["value"] = jsoncodec.loads("1." + "0" * 1001)
    assert not schemas.quick_check("LogisticsRequest")(body)
    assert schemas.validation_details("LogisticsRequest", body) == [
        {"field": "cargo.value", "message": "must have at most 1000 decimal places"}]


def test_an_invalid_body_still_gets_jsonschema_details():
    body = logistics_body(mode="BIKE")
    assert schemas.validation_details("LogisticsRequest", body) == [
        {"field": "mode", "message": "must be one of ROAD, SEA, AIR"}]


@pytest.mark.parametrize("pattern, text, matches", [
    ("^[a-z]+$", "abc", True),
    ("^[a-z]+$", "abc\n", False),  # Python's `$` alone would match before the final newline
    ("^[a-z]+$", "ab\nc", False),
    ("^a[$]$", "a$", True),        # a `$` in a class is the character
    ("^a\\$$", "a$", True),        # so is an escaped one
    ("^a\\$$", "a$\n", False),
])
def test_patterns_are_read_as_ecma_262_reads_them_by_both_validators(pattern, text, matches):
    """JSON Schema's `pattern` is ECMA-262, where `$` is the end of the text: jsonschema, as the
    document's validator runs it, and fastjsonschema given the rewritten pattern agree with that."""
    from referencing import Registry, Resource

    schema = {"type": "string", "pattern": pattern}
    resource = Resource.from_contents(schema, default_specification=schemas.DRAFT202012)
    registry = Registry().with_resource("urn:probe", resource)
    validator = schemas.RequestValidator({"$ref": "urn:probe"}, registry=registry)
    assert validator.is_valid(text) is matches
    assert fast_valid({"type": "string", "pattern": schemas.ecma_pattern(pattern)}, text) is matches
    assert (schemas.ecma_regex(pattern).search(text) is not None) is matches


def fast_valid(schema: dict, instance) -> bool:
    try:
        fastjsonschema.compile(schema)(instance)
    except fastjsonschema.JsonSchemaValueException:
        return False
    return True


def test_the_path_reference_pattern_refuses_a_final_newline():
    assert schemas.path_parameter_pattern("customerReference").search("acct-42") is not None
    assert schemas.path_parameter_pattern("customerReference").search("acct-42\n") is None
