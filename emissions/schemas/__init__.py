"""The OpenAPI document, and validators compiled from its component schemas (never written twice).

jsonschema is the authority: it decides, and explains what is wrong. A check compiled by
fastjsonschema from the same schema answers first, because most bodies are valid and it is much
faster; it may only ever say "valid" where jsonschema would (tests/test_validation_check.py).
"""
from __future__ import annotations

import json
import re
from decimal import Decimal
from functools import lru_cache
from pathlib import Path

import fastjsonschema
import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from .. import text

OPENAPI_PATH = Path(__file__).with_name("openapi.json")
DOCUMENT_URI = "urn:emissions:openapi"


@lru_cache(maxsize=1)
def openapi_bytes() -> bytes:
    return OPENAPI_PATH.read_bytes()


@lru_cache(maxsize=1)
def openapi() -> dict:
    """The OpenAPI 3.1.0 document as data."""
    return json.loads(openapi_bytes())


@lru_cache(maxsize=1)
def _registry() -> Registry:
    resource = Resource.from_contents(openapi(), default_specification=DRAFT202012)
    return Registry().with_resource(DOCUMENT_URI, resource)


def ecma_pattern(pattern: str) -> str:
    r"""A JSON Schema `pattern` rewritten for Python's re to mean what ECMA-262 means by it.

    Python's `$` also matches before a final newline (`^abc$` finds "abc\n"); ECMA-262's `$` is the
    end of the text. So every `$` outside a character class and not escaped becomes `\Z`, and one
    inside a class is escaped (fastjsonschema rewrites every unescaped `$`, in a class too). The
    document's patterns use nothing else whose meaning differs between the two (no `.`, `\d`,
    `\w`, `\s`, `\b` or flags).
    """
    out, escaped, in_class = [], False, False
    for character in pattern:
        if escaped:
            escaped = False
        elif character == "\\":
            escaped = True
        elif character == "$":
            out.append("\\$" if in_class else "\\Z")
            continue
        elif in_class:
            in_class = character != "]"
        elif character == "[":
            in_class = True
        out.append(character)
    return "".join(out)


@lru_cache(maxsize=None)
def ecma_regex(pattern: str) -> re.Pattern:
    """A JSON Schema `pattern` compiled as ECMA-262 reads it."""
    return re.compile(ecma_pattern(pattern))


def _max_decimal_places(validator, limit: int, instance, schema):
    """The document's x-maxDecimalPlaces: digits after the point as written (the databases bound them)."""
    if isinstance(instance, Decimal) and instance.is_finite() and -instance.as_tuple().exponent > limit:
        yield jsonschema.ValidationError(f"has more than {limit} decimal places")


def _pattern(validator, pattern: str, instance, schema):
    """jsonschema's `pattern`, with the pattern read as ECMA-262 reads it."""
    if validator.is_type(instance, "string") and not ecma_regex(pattern).search(instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


# Draft 2020-12 with `pattern` read as JSON Schema specifies (ECMA-262: `$` is the end of the text,
# not also the place before a final newline), plus the document's own x-maxDecimalPlaces keyword.
RequestValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, {"pattern": _pattern, "x-maxDecimalPlaces": _max_decimal_places})


@lru_cache(maxsize=None)
def validator(component: str) -> jsonschema.Draft202012Validator:
    """A compiled validator for components/schemas/<component>, with format checks on."""
    schema = {"$ref": f"{DOCUMENT_URI}#/components/schemas/{component}"}
    return RequestValidator(
        schema, registry=_registry(), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )


@lru_cache(maxsize=None)
def path_parameter_pattern(name: str) -> re.Pattern:
    """The compiled pattern of a shared path parameter, e.g. customerReference."""
    return ecma_regex(openapi()["components"]["parameters"][name]["schema"]["pattern"])


TEXT_PATTERN = text.PATTERN  # every text field people write: the one rule (emissions/text.py)
MAX_DETAILS = 50  # a body of thousands of unknown fields gets a bounded answer

TYPE_NAMES = {"object": "an object", "number": "a number", "string": "a string", "integer": "an integer",
              "array": "an array", "null": "null", "boolean": "true or false"}


def _field(path) -> str:
    """`elements[1].origin.iata`: members joined by dots, array indexes in brackets."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _explain(error: jsonschema.ValidationError) -> list[dict]:
    """Short, field-named messages for one schema violation."""
    where = _field(error.absolute_path)
    keyword, value = error.validator, error.validator_value
    if keyword == "required":
        missing = [name for name in value if isinstance(error.instance, dict) and name not in error.instance]
        return [{"field": _field([*error.absolute_path, name]), "message": "is required"} for name in missing]
    if keyword == "additionalProperties":
        allowed = error.schema.get("properties", {})
        extra = sorted(name for name in error.instance if name not in allowed)
        return [{"field": _field([*error.absolute_path, name]), "message": "is not an accepted field"}
                for name in extra]
    if keyword == "anyOf" and where.endswith(("origin", "destination", "location")):
        names = [option["required"][0] for option in value]
        return [{"field": where, "message": "needs at least one of " + ", ".join(names[:-1]) + " or " + names[-1]}]
    messages = {
        "type": lambda: "must be " + " or ".join(TYPE_NAMES[name] for name in ([value] if isinstance(value, str) else value)),
        "enum": lambda: "must be one of " + ", ".join(map(str, value)),
        "const": lambda: f"must be {value!r}".replace("'", '"'),
        "maxLength": lambda: f"must be at most {value} characters",
        "minLength": lambda: "must not be empty" if value == 1 else f"must be at least {value} characters",
        "exclusiveMinimum": lambda: f"must be greater than {value}",
        "maximum": lambda: f"must be at most {value}",
        "x-maxDecimalPlaces": lambda: f"must have at most {value} decimal places",
        # The same words as activity_date's pattern: a date breaking both is one detail, not two.
        "format": lambda: "must be a calendar date YYYY-MM-DD" if value == "date" else f"must be a valid {value}",
        "pattern": lambda: ("must be a calendar date YYYY-MM-DD" if where == "activity_date"
                            else text.MESSAGE if value == TEXT_PATTERN
                            else "has an invalid format"),
    }
    message = messages.get(keyword, lambda: "is invalid")()
    return [{"field": where or "body", "message": message}]


def _for_fastjsonschema(node):
    """The schema with its patterns rewritten by ecma_pattern() and x-maxDecimalPlaces left out
    (fastjsonschema ignores a keyword it does not know; quick_check applies it)."""
    if isinstance(node, list):
        return [_for_fastjsonschema(item) for item in node]
    if not isinstance(node, dict):
        return node
    rewritten = {key: _for_fastjsonschema(value) for key, value in node.items() if key != "x-maxDecimalPlaces"}
    if isinstance(node.get("pattern"), str):
        rewritten["pattern"] = ecma_pattern(node["pattern"])
    return rewritten


def _decimal_place_limits(node) -> list[int]:
    if isinstance(node, dict):
        return [limit for key, value in node.items()
                for limit in ([value] if key == "x-maxDecimalPlaces" else _decimal_place_limits(value))]
    if isinstance(node, list):
        return [limit for item in node for limit in _decimal_place_limits(item)]
    return []


def _places_within(instance, limit: int) -> bool:
    """True when no number anywhere in the instance has more than `limit` digits after the point."""
    if isinstance(instance, Decimal):
        return not instance.is_finite() or -instance.as_tuple().exponent <= limit
    if isinstance(instance, dict):
        return all(_places_within(item, limit) for item in instance.values())
    if isinstance(instance, list):
        return all(_places_within(item, limit) for item in instance)
    return True


@lru_cache(maxsize=None)
def quick_check(component: str):
    """A function instance -> bool, True only where jsonschema finds the instance valid.

    fastjsonschema compiled from the component, with jsonschema's own format checks; the document's
    x-maxDecimalPlaces is applied with the smallest limit it has anywhere, to every number (stricter
    than the schema where limits differ: a stricter check only sends a body on to jsonschema).
    """
    components = _for_fastjsonschema(openapi()["components"])
    formats = {name: (lambda value, name=name: jsonschema.Draft202012Validator.FORMAT_CHECKER.conforms(value, name))
               for name in jsonschema.Draft202012Validator.FORMAT_CHECKER.checkers}
    check = fastjsonschema.compile({"$ref": f"#/components/schemas/{component}", "components": components},
                                   formats=formats, use_default=False)
    limits = _decimal_place_limits(openapi()["components"])
    limit = min(limits) if limits else None

    def quick(instance) -> bool:
        try:
            check(instance)
        except fastjsonschema.JsonSchemaValueException:
            return False
        return limit is None or _places_within(instance, limit)

    return quick


def validation_details(component: str, instance) -> list[dict]:
    """The violations of the component schema as {field, message}, by field, at most MAX_DETAILS; empty when valid."""
    if quick_check(component)(instance):
        return []  # the compiled check only ever says "valid"; jsonschema explains everything else
    details: list[dict] = []
    seen = set()
    for error in validator(component).iter_errors(instance):
        for detail in _explain(error):
            key = (detail["field"], detail["message"])
            if key not in seen:
                seen.add(key)
                details.append(detail)
    details.sort(key=lambda d: d["field"])
    return details[:MAX_DETAILS]
