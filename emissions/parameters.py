"""Query parameters: each API route declares the ones it takes (app._routes), and ApiPlugin refuses
any other, a repeated one and a malformed value with 400 INVALID_REQUEST naming the parameter."""
from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Callable
from urllib.parse import parse_qsl

from . import text as text_rule
from .errors import InvalidRequest

DATE_PATTERN = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")
UUID_PATTERN = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")
NOT_UTF8 = re.compile("[\udc80-\udcff]")  # what surrogateescape makes of each byte that is not UTF-8
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")
MAX_SHOWN = 100  # a parameter name quoted back in a message is cut here

Parser = Callable[[str], object]


class BadValue(ValueError):
    """A query parameter's value a parser refuses; the message says what it must be."""


def iso_date(text: str) -> dt.date:
    """A calendar date written YYYY-MM-DD (and nothing else ISO 8601 allows)."""
    try:
        if DATE_PATTERN.match(text):
            return dt.date.fromisoformat(text)
    except ValueError:
        pass
    raise BadValue("must be a calendar date YYYY-MM-DD")


def integer_between(low: int, high: int) -> Parser:
    def parse(text: str) -> int:
        if not (text.isascii() and text.isdigit() and len(text) <= 9 and low <= int(text) <= high):
            raise BadValue(f"must be an integer from {low} to {high}")
        return int(text)
    return parse


def one_of(*values: str) -> Parser:
    def parse(text: str) -> str:
        if text not in values:
            raise BadValue("must be one of " + ", ".join(values))
        return text
    return parse


def text(max_length: int) -> Parser:
    def parse(value: str) -> str:
        if not value:
            raise BadValue("must not be empty")
        if len(value) > max_length:
            raise BadValue(f"must be at most {max_length} characters")
        if text_rule.problem(value):
            raise BadValue(text_rule.problem(value))
        return value
    return parse


def id_of(noun: str) -> Parser:
    """The id (a UUID) of a row of the list, a calculation or a shipment."""
    def parse(value: str) -> str:
        if not UUID_PATTERN.match(value):
            raise BadValue(f"must be the id of a {noun}")
        return value
    return parse


def _shown(name: str) -> str:
    name = CONTROL_CHARACTERS.sub("\ufffd", name)
    return name if len(name) <= MAX_SHOWN else name[:MAX_SHOWN] + "..."


@dataclass(frozen=True)
class Query:
    """The query parameters a route takes: name -> parser, and (low, high) pairs where low may not
    come after high (from and to)."""

    parameters: dict[str, Parser] = field(default_factory=dict)
    ranges: tuple[tuple[str, str], ...] = ()

    def parse(self, query_string: str) -> dict:
        """The parameters given, parsed; InvalidRequest (400) naming each one that is refused."""
        if not query_string:  # most requests: nothing to parse
            return {}
        values: dict = {}
        details: list[dict] = []
        seen: set[str] = set()
        # Bytes that are not UTF-8 stay visible (as lone surrogates) rather than becoming U+FFFD,
        # which a filter would then look for and quietly find nothing.
        for name, value in parse_qsl(query_string, keep_blank_values=True, errors="surrogateescape"):
            parser = self.parameters.get(name)
            if parser is None:
                details.append({"field": _shown(name), "message": "is not an accepted query parameter"})
            elif name in seen:
                details.append({"field": name, "message": "is given more than once"})
                values.pop(name, None)
            elif NOT_UTF8.search(value):
                seen.add(name)
                details.append({"field": name, "message": "must be percent-encoded UTF-8"})
            else:
                seen.add(name)
                try:
                    values[name] = parser(value)
                except BadValue as problem:
                    details.append({"field": name, "message": str(problem)})
        for low, high in self.ranges:
            if low in values and high in values and values[low] > values[high]:
                details.append({"field": low, "message": f"must not be after {high}"})
        if details:
            first = details[0]
            raise InvalidRequest(f"The query parameter {first['field']} {first['message']}.",
                                 details=_unique(details))
        return values


def _unique(details: list[dict]) -> list[dict]:
    kept = []
    for detail in details:
        if detail not in kept:
            kept.append(detail)
    return kept[:50]


NONE = Query()  # a route that takes no query parameter
