"""A yes/no check compiled once from a jsonschema validator's schema; jsonschema stays the authority.

jsonschema spends most of a validation in its generic machinery (an evolved validator for every
sub-schema, a reference lookup on every call): about 170 us for one LogisticsRequest, more than
the rest of a calculation. compile_check() walks the same schema from the same document once and
turns it into nested closures that test each keyword the way jsonschema's own keyword functions
do. Keywords that cannot hold a sub-schema and have no direct test here (the document's own
x-maxDecimalPlaces) call jsonschema's keyword function itself. Anything else (a keyword with
sub-schemas this module does not handle, $id, $dynamicRef, a recursive $ref, a changed type
checker) raises Uncompilable, and the caller uses jsonschema alone.

The check only says "valid". For anything else the caller asks jsonschema, so a check that is too
strict costs time, never a different answer; tests/test_validation_check.py compares the two.
"""
from __future__ import annotations

import numbers
import re
from typing import Callable

import jsonschema

Check = Callable[[object], bool]

# Keywords that change how references resolve, which this module does not follow.
UNSUPPORTED = ("$id", "$anchor", "$dynamicAnchor", "$dynamicRef", "$recursiveRef", "$recursiveAnchor")


class Uncompilable(Exception):
    """The schema uses something compile_check does not reproduce exactly."""


def _always(instance) -> bool:
    return True


def _never(instance) -> bool:
    return False


def _is_number(instance) -> bool:
    return isinstance(instance, numbers.Number) and not isinstance(instance, bool)


TYPE_TESTS: dict[str, Check] = {
    "string": lambda instance: isinstance(instance, str),
    "number": _is_number,
    "object": lambda instance: isinstance(instance, dict),
    "array": lambda instance: isinstance(instance, list),
    "boolean": lambda instance: isinstance(instance, bool),
    "null": lambda instance: instance is None,
}


def _holds_schema(value) -> bool:
    """True if a keyword's value is or contains something that could be a sub-schema."""
    if isinstance(value, (dict, bool)):
        return True
    if isinstance(value, list):
        return any(_holds_schema(item) for item in value)
    return False


def compile_check(validator: jsonschema.protocols.Validator, resolver) -> Check:
    """A function instance -> bool that is True exactly when `validator` finds no error.

    `resolver` resolves the references in the validator's schema (a referencing.Resolver).
    """
    if validator.TYPE_CHECKER is not jsonschema.Draft202012Validator.TYPE_CHECKER:
        raise Uncompilable("the validator has its own type checker")
    return _Compiler(validator).schema(validator.schema, resolver, ())


class _Compiler:
    def __init__(self, validator):
        self.validator = validator
        self.keywords = validator.VALIDATORS

    def schema(self, node, resolver, refs: tuple) -> Check:
        if node is True:
            return _always
        if node is False:
            return _never
        if not isinstance(node, dict):
            raise Uncompilable(f"not a schema: {node!r}")
        checks: list[Check] = []
        for keyword, value in node.items():
            if keyword in UNSUPPORTED:
                raise Uncompilable(f"{keyword} is not supported")
            if keyword not in self.keywords:
                continue  # an annotation (description, default, ...): jsonschema ignores it too
            if keyword in ("properties", "additionalProperties", "patternProperties"):
                continue  # compiled together below
            checks.append(self.keyword(keyword, value, node, resolver, refs))
        if any(name in node for name in ("properties", "additionalProperties", "patternProperties")):
            checks.append(self.object_members(node, resolver, refs))
        return _all(checks)

    def keyword(self, keyword: str, value, node: dict, resolver, refs: tuple) -> Check:
        if keyword == "$ref":
            if value in refs:
                raise Uncompilable(f"recursive $ref {value}")
            resolved = resolver.lookup(value)
            return self.schema(resolved.contents, resolved.resolver, refs + (value,))
        if keyword == "type":
            names = [value] if isinstance(value, str) else list(value)
            if not all(name in TYPE_TESTS for name in names):
                return self.leaf(keyword, value, node)  # "integer" and the like: jsonschema decides
            tests = [TYPE_TESTS[name] for name in names]
            return tests[0] if len(tests) == 1 else (lambda instance: any(test(instance) for test in tests))
        if keyword == "required":
            names = tuple(value)
            return lambda instance: not isinstance(instance, dict) or all(name in instance for name in names)
        if keyword in ("minLength", "maxLength") and isinstance(value, int) and not isinstance(value, bool):
            if keyword == "minLength":
                return lambda instance: not isinstance(instance, str) or len(instance) >= value
            return lambda instance: not isinstance(instance, str) or len(instance) <= value
        if keyword == "pattern" and isinstance(value, str):
            search = re.compile(value).search  # jsonschema uses re.search(pattern, instance)
            return lambda instance: not isinstance(instance, str) or search(instance) is not None
        if keyword == "format" and isinstance(value, str):
            checker = self.validator.format_checker
            if checker is None:
                return _always
            return lambda instance: checker.conforms(instance, value)
        if keyword in ("enum", "const"):
            options = value if keyword == "enum" else [value]
            if isinstance(options, list) and all(isinstance(option, str) for option in options):
                # jsonschema's equal() compares a string only with ==, so membership is the same test.
                allowed = frozenset(options)
                return lambda instance: isinstance(instance, str) and instance in allowed
            return self.leaf(keyword, value, node)
        if keyword in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum") and _is_number(value):
            bound = value
            failing = {
                "minimum": lambda instance: instance < bound,
                "maximum": lambda instance: instance > bound,
                "exclusiveMinimum": lambda instance: instance <= bound,
                "exclusiveMaximum": lambda instance: instance >= bound,
            }[keyword]
            return lambda instance: not _is_number(instance) or not failing(instance)
        if keyword in ("anyOf", "allOf") and isinstance(value, list) and value:
            branches = [self.schema(branch, resolver, refs) for branch in value]
            if keyword == "anyOf":
                return lambda instance: any(branch(instance) for branch in branches)
            return _all(branches)
        return self.leaf(keyword, value, node)

    def leaf(self, keyword: str, value, node: dict) -> Check:
        """jsonschema's own function for a keyword without sub-schemas (it only looks at the instance)."""
        if _holds_schema(value):
            raise Uncompilable(f"{keyword} with sub-schemas is not supported")
        function, validator = self.keywords[keyword], self.validator
        return lambda instance: next(iter(function(validator, value, instance, node)), None) is None

    def object_members(self, node: dict, resolver, refs: tuple) -> Check:
        """properties and additionalProperties together: one pass over the object's members."""
        if "patternProperties" in node:
            raise Uncompilable("patternProperties is not supported")
        properties = {name: self.schema(sub, resolver, refs) for name, sub in node.get("properties", {}).items()}
        additional = node.get("additionalProperties", True)
        extra = None if additional is True else self.schema(additional, resolver, refs)

        def check(instance) -> bool:
            if not isinstance(instance, dict):
                return True
            for name, member in instance.items():
                test = properties.get(name, extra)
                if test is not None and not test(member):
                    return False
            return True

        return check


def _all(checks: list[Check]) -> Check:
    if not checks:
        return _always
    if len(checks) == 1:
        return checks[0]

    def check(instance) -> bool:
        for test in checks:
            if not test(instance):
                return False
        return True

    return check
