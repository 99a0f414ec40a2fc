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


def _schema_nodes(component: str, schema_path) -> list | None:
    """The schemas along an error's schema path, from the component's own, or None where the path
    cannot be followed. jsonschema leaves a followed $ref out of the path: it is followed here too."""
    node = openapi()["components"]["schemas"][component]
    nodes = [node]
    try:
        for part in schema_path:
            while isinstance(node, dict) and part not in node and "$ref" in node:
                node = _resolve(node["$ref"])
            node = _resolve(node["$ref"]) if part == "$ref" else node[part]
            nodes.append(node)
    except (KeyError, IndexError, TypeError):
        return None
    return nodes


def _resolve(reference: str):
    node = openapi()
    for name in node_path(reference):
        node = node[name]
    return node


def node_path(reference: str) -> list[str]:
    """The members a local $ref such as `#/components/schemas/Place` names."""
    return [part.replace("~1", "/").replace("~0", "~") for part in reference.removeprefix("#/").split("/")]


def _failed_under(component: str, error: jsonschema.ValidationError) -> dict:
    """The `if` of the `then` an error failed in; empty when it failed elsewhere."""
    path = list(error.schema_path)
    if len(path) < 2 or path[-2] != "then":
        return {}
    nodes = _schema_nodes(component, path[:-2])
    return nodes[-1].get("if", {}) if nodes and isinstance(nodes[-1], dict) else {}


def _condition(component: str, error: jsonschema.ValidationError) -> str | None:
    """`when cargo.unit is "TEU"`: the if a `then` failed under, read back as the case it allows."""
    condition = _failed_under(component, error)
    properties = condition.get("properties", {})
    if len(properties) == 1:
        (name, rule), = properties.items()
        negated = rule.get("not", {})
        if set(rule) == {"not"} and set(negated) == {"const"}:
            return f"when {_field([*error.absolute_path, name])} is {json.dumps(negated['const'])}"
    return None


def _given_with(component: str, error: jsonschema.ValidationError) -> str | None:
    """`latitude`: the member whose presence made another required (an `if: {required}` / `then`)."""
    condition = _failed_under(component, error)
    if set(condition) == {"required"}:
        return " and ".join(_field([*error.absolute_path, name]) for name in condition["required"])
    return None


def _items(count: int, noun: str = "element") -> str:
    return f"{count} {noun}{'s' if count != 1 else ''}"


def _required_names(options: list) -> list[str] | None:
    """[a, b] for anyOf/oneOf options that each only require one member, else None."""
    if all(isinstance(option, dict) and set(option) == {"required"} and len(option["required"]) == 1
           for option in options):
        return [option["required"][0] for option in options]
    return None


def _either(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def _closest_form(error: jsonschema.ValidationError, component: str) -> list[dict]:
    """What to change for an anyOf/oneOf no form of which accepts the instance: the problems of the
    first form of the instance's own type, or, when it has the type of none, the types they take."""
    forms: dict[int, list] = {}
    for sub_error in error.context:
        forms.setdefault(sub_error.relative_schema_path[0], []).append(sub_error)
    of_another_type = {index for index, errors in forms.items()
                       if any(sub.validator == "type" and not sub.relative_path for sub in errors)}
    for index in sorted(set(forms) - of_another_type):
        return [detail for sub_error in forms[index] for detail in _explain(sub_error, component)]
    types = []
    for index in sorted(forms):
        for sub_error in forms[index]:
            if sub_error.validator == "type" and not sub_error.relative_path:
                named = sub_error.validator_value
                types += [named] if isinstance(named, str) else named
    names = [TYPE_NAMES.get(name, name) for name in dict.fromkeys(types)]
    return [{"field": _field(error.absolute_path) or "body", "message": "must be " + " or ".join(names)}]


def _explain(error: jsonschema.ValidationError, component: str) -> list[dict]:
    """Short, field-named messages for one schema violation, each saying what would be accepted."""
    where = _field(error.absolute_path)
    keyword, value = error.validator, error.validator_value
    if keyword == "required":
        missing = [name for name in value if isinstance(error.instance, dict) and name not in error.instance]
        given = _given_with(component, error)
        return [{"field": _field([*error.absolute_path, name]), "message": f"is required with {given}" if given
                 else "is required"} for name in missing]
    if keyword == "additionalProperties":
        allowed = error.schema.get("properties", {})
        extra = sorted(name for name in error.instance if name not in allowed)
        return [{"field": _field([*error.absolute_path, name]), "message": "is not an accepted field"}
                for name in extra]
    if keyword in ("anyOf", "oneOf"):
        names = _required_names(value)
        if names is not None and keyword == "anyOf":
            return [{"field": where or "body", "message": "needs at least one of " + _either(names)}]
        if names is not None:
            given = [name for name in names if isinstance(error.instance, dict) and name in error.instance]
            return [{"field": where or "body", "message": (f"needs exactly one of {_either(names)}" if not given
                     else f"takes only one of {_either(given)}")}]
        if not error.context:  # oneOf: the instance matched several of the forms
            return [{"field": where or "body", "message": "matches more than one of its accepted forms"}]
        return _closest_form(error, component)
    if keyword == "not" and isinstance(value, dict) and set(value) == {"required"}:
        condition = _condition(component, error)
        given = [name for name in value["required"] if isinstance(error.instance, dict) and name in error.instance]
        return [{"field": _field([*error.absolute_path, name]),
                 "message": f"applies only {condition}" if condition else "is not accepted here"}
                for name in given] or [{"field": where or "body", "message": "is not accepted here"}]
    if keyword == "contains":
        kind = value.get("properties", {}).get("type", {}).get("const") if isinstance(value, dict) else None
        return [{"field": where or "body", "message": (f'must contain at least one element with "type": "{kind}"'
                                                      if kind else "must contain at least one accepted element")}]
    messages = {
        "type": lambda: "must be " + " or ".join(TYPE_NAMES[name] for name in ([value] if isinstance(value, str) else value)),
        "enum": lambda: "must be one of " + ", ".join(map(str, value)),
        "const": lambda: f"must be {value!r}".replace("'", '"'),
        "not": lambda: (f"must not be {json.dumps(value['const'])}"
                        if isinstance(value, dict) and set(value) == {"const"} else "is not accepted here"),
        "maxLength": lambda: f"must be at most {value} characters",
        "minLength": lambda: "must not be empty" if value == 1 else f"must be at least {value} characters",
        "maxItems": lambda: f"must have at most {_items(value)} (it has {len(error.instance)})",
        "minItems": lambda: f"must have at least {_items(value)}",
        "uniqueItems": lambda: "must not repeat an element",
        "maxProperties": lambda: f"must have at most {_items(value, 'member')}",
        "minProperties": lambda: f"must have at least {_items(value, 'member')}",
        "exclusiveMinimum": lambda: f"must be greater than {value}",
        "exclusiveMaximum": lambda: f"must be less than {value}",
        "minimum": lambda: f"must be at least {value}",
        "maximum": lambda: f"must be at most {value}",
        "multipleOf": lambda: f"must be a multiple of {value}",
        "x-maxDecimalPlaces": lambda: f"must have at most {value} decimal places",
        # The same words as activity_date's pattern: a date breaking both is one detail, not two.
        "format": lambda: "must be a calendar date YYYY-MM-DD" if value == "date" else f"must be a valid {value}",
        "pattern": lambda: ("must be a calendar date YYYY-MM-DD" if where == "activity_date"
                            else text.MESSAGE if value == TEXT_PATTERN
                            else "has an invalid format"),
    }
    message = messages.get(keyword, lambda: "is invalid")()
    return [{"field": where or "body", "message": message}]


SHOWN_WITH_MESSAGES = 5  # the problems an error message spells out; the rest it names by field


def summary(details: list[dict]) -> str:
    """The 422 message: the first problems in words, then every other field the details list by name."""
    shown = "; ".join(f"{detail['field']} {detail['message']}" for detail in details[:SHOWN_WITH_MESSAGES])
    rest = list(dict.fromkeys(detail["field"] for detail in details[SHOWN_WITH_MESSAGES:]))
    if not rest:
        return f"The request body is invalid: {shown}."
    fields = len(dict.fromkeys(detail["field"] for detail in details))
    counted = f"{fields} fields" if len(details) < MAX_DETAILS else f"at least {fields} fields"
    return (f"The request body is invalid in {counted}, each with its reason in details: {shown}; "
            f"and {', '.join(rest)}.")


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
        for detail in _explain(error, component):
            key = (detail["field"], detail["message"])
            if key not in seen:
                seen.add(key)
                details.append(detail)
    details.sort(key=lambda d: d["field"])
    return details[:MAX_DETAILS]
