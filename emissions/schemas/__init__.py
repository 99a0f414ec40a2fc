"""The OpenAPI document, and validators compiled from its component schemas (never written twice)."""
from __future__ import annotations

import json
import re
from decimal import Decimal
from functools import lru_cache
from pathlib import Path

import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from ..schemas import compiled

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


def _max_decimal_places(validator, limit: int, instance, schema):
    """The document's x-maxDecimalPlaces: digits after the point as written (the databases bound them)."""
    if isinstance(instance, Decimal) and instance.is_finite() and -instance.as_tuple().exponent > limit:
        yield jsonschema.ValidationError(f"has more than {limit} decimal places")


def _pattern(validator, pattern: str, instance, schema):
    """jsonschema's `pattern`, with the pattern read as ECMA-262 reads it (compiled.ecma_regex)."""
    if validator.is_type(instance, "string") and not compiled.ecma_regex(pattern).search(instance):
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
    return compiled.ecma_regex(openapi()["components"]["parameters"][name]["schema"]["pattern"])


TEXT_PATTERN = "^[^\\u0000\\ud800-\\udfff]*$"  # text the databases can store: no NUL, no lone surrogate
MAX_DETAILS = 50  # a body of thousands of unknown fields gets a bounded answer

TYPE_NAMES = {"object": "an object", "number": "a number", "string": "a string", "integer": "an integer",
              "array": "an array", "null": "null", "boolean": "true or false"}


def _field(path) -> str:
    return ".".join(str(part) for part in path)


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
    if keyword == "anyOf" and where.endswith(("origin", "destination")):
        return [{"field": where, "message": "needs at least one of code or label"}]
    messages = {
        "type": lambda: "must be " + " or ".join(TYPE_NAMES[name] for name in ([value] if isinstance(value, str) else value)),
        "enum": lambda: "must be one of " + ", ".join(map(str, value)),
        "const": lambda: f"must be {value!r}".replace("'", '"'),
        "maxLength": lambda: f"must be at most {value} characters",
        "minLength": lambda: "must not be empty" if value == 1 else f"must be at least {value} characters",
        "exclusiveMinimum": lambda: f"must be greater than {value}",
        "maximum": lambda: f"must be at most {value}",
        "x-maxDecimalPlaces": lambda: f"must have at most {value} decimal places",
        "format": lambda: f"must be a valid {value} (YYYY-MM-DD)" if value == "date" else f"must be a valid {value}",
        "pattern": lambda: ("must be a calendar date YYYY-MM-DD" if where == "activity_date"
                            else "must not contain NUL characters or unpaired surrogates" if value == TEXT_PATTERN
                            else "has an invalid format"),
    }
    message = messages.get(keyword, lambda: "is invalid")()
    return [{"field": where or "body", "message": message}]


@lru_cache(maxsize=None)
def quick_check(component: str):
    """The component's compiled yes/no check (schemas/compiled.py), or None if it cannot be compiled."""
    try:
        return compiled.compile_check(validator(component), _registry().resolver())
    except compiled.Uncompilable:
        return None


def validation_details(component: str, instance) -> list[dict]:
    """The violations of the component schema as {field, message}, by field, at most MAX_DETAILS; empty when valid."""
    check = quick_check(component)
    if check is not None and check(instance):
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
