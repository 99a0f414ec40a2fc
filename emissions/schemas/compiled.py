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

import functools
import numbers
import re
from typing import Callable

import jsonschema

Check = Callable[[object], bool]

# Keywords that change how references resolve, which this module does not follow.
UNSUPPORTED = ("$id", "$anchor", "$dynamicAnchor", "$dynamicRef", "$recursiveRef", "$recursiveAnchor")


class Uncompilable(Exception):
    """The schema uses something compile_check does not reproduce exactly."""


@functools.lru_cache(maxsize=None)
def ecma_regex(pattern: str) -> re.Pattern:
    r"""A JSON Schema `pattern` compiled to mean what ECMA-262 means by it, as JSON Schema specifies.

    Python's `$` also matches before a final newline (`^abc$` finds "abc\n"); ECMA-262's `$` is the
    end of the text. So every `$` outside a character class and not escaped becomes `\Z`. The
    document's patterns use nothing else whose meaning differs between the two (no `.`, `\d`, `\w`,
    `\s`, `\b` or flags).
    """
    out, escaped, in_class = [], False, False
    for character in pattern:
        if escaped:
            escaped = False
        elif character == "\\":
            escaped = True
        elif in_class:
            in_class = character != "]"
        elif character == "[":
            in_class = True
        elif character == "$":
            out.append("\\Z")
            continue
        out.append(character)
    return re.compile("".join(out))


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


STRING_KEYWORDS = {"type", "minLength", "maxLength", "pattern", "enum", "const", "format"}
NUMBER_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


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
        unsupported = [keyword for keyword in node if keyword in UNSUPPORTED]
        if unsupported:
            raise Uncompilable(f"{unsupported[0]} is not supported")
        special = self.string_node(node) or self.number_node(node) or self.object_node(node, resolver, refs)
        if special is not None:
            return special
        checks: list[Check] = []
        for keyword, value in node.items():
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
            names = frozenset(value)
            return lambda instance: not isinstance(instance, dict) or names <= instance.keys()
        if keyword in ("minLength", "maxLength") and isinstance(value, int) and not isinstance(value, bool):
            if keyword == "minLength":
                return lambda instance: not isinstance(instance, str) or len(instance) >= value
            return lambda instance: not isinstance(instance, str) or len(instance) <= value
        if keyword == "pattern" and isinstance(value, str):
            search = ecma_regex(value).search  # the document's validator: re.search(ecma_regex(pattern), ...)
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

    def _validating(self, node: dict) -> dict:
        return {keyword: value for keyword, value in node.items() if keyword in self.keywords}

    def string_node(self, node: dict) -> Check | None:
        """{"type": "string", ...} with length, pattern, enum or const and format: one function."""
        keywords = self._validating(node)
        if keywords.get("type") != "string" or not set(keywords) <= STRING_KEYWORDS:
            return None
        if not all(isinstance(keywords.get(name, 0), int) and not isinstance(keywords.get(name, 0), bool)
                   for name in ("minLength", "maxLength")):
            return None
        options = keywords.get("enum", [keywords["const"]] if "const" in keywords else None)
        if options is not None and not (isinstance(options, list) and all(isinstance(o, str) for o in options)):
            return None
        shortest, longest = keywords.get("minLength", 0), keywords.get("maxLength")
        search = ecma_regex(keywords["pattern"]).search if isinstance(keywords.get("pattern"), str) else None
        if "pattern" in keywords and search is None:
            return None
        allowed = frozenset(options) if options is not None else None
        checker, form = self.validator.format_checker, keywords.get("format")
        conforms = checker.conforms if (checker is not None and isinstance(form, str)) else None

        def check(instance) -> bool:
            if not isinstance(instance, str):
                return False
            size = len(instance)
            return (size >= shortest and (longest is None or size <= longest)
                    and (search is None or search(instance) is not None)
                    and (allowed is None or instance in allowed)
                    and (conforms is None or conforms(instance, form)))

        return check

    def number_node(self, node: dict) -> Check | None:
        """{"type": "number", ...} with bounds and leaf keywords (x-maxDecimalPlaces): one function."""
        keywords = self._validating(node)
        if keywords.get("type") != "number":
            return None
        bounds = {name: keywords.pop(name) for name in NUMBER_BOUNDS if name in keywords}
        del keywords["type"]
        if not all(_is_number(bound) for bound in bounds.values()):
            return None
        try:
            leaves = [self.leaf(keyword, value, node) for keyword, value in keywords.items()]
        except Uncompilable:
            return None
        low, high = bounds.get("minimum"), bounds.get("maximum")
        above, below = bounds.get("exclusiveMinimum"), bounds.get("exclusiveMaximum")

        def check(instance) -> bool:
            if not _is_number(instance):
                return False
            if ((low is not None and instance < low) or (high is not None and instance > high)
                    or (above is not None and instance <= above) or (below is not None and instance >= below)):
                return False
            for leaf in leaves:
                if not leaf(instance):
                    return False
            return True

        return check

    def object_node(self, node: dict, resolver, refs: tuple) -> Check | None:
        """{"type": "object", ...}: type, required and members in one function, other keywords after."""
        keywords = self._validating(node)
        if keywords.get("type") != "object":
            return None
        if "patternProperties" in keywords:
            raise Uncompilable("patternProperties is not supported")
        required = frozenset(keywords.get("required", ()))
        properties = {name: self.schema(sub, resolver, refs) for name, sub in keywords.get("properties", {}).items()}
        additional = keywords.get("additionalProperties", True)
        extra = None if additional is True else self.schema(additional, resolver, refs)
        rest = [self.keyword(keyword, value, node, resolver, refs) for keyword, value in keywords.items()
                if keyword not in ("type", "required", "properties", "additionalProperties")]

        def check(instance) -> bool:
            if not isinstance(instance, dict) or not required <= instance.keys():
                return False
            for name, member in instance.items():
                test = properties.get(name, extra)
                if test is not None and not test(member):
                    return False
            for test in rest:
                if not test(instance):
                    return False
            return True

        return check

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
