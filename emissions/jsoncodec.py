"""JSON in and out with exact decimals: numbers parse to Decimal and leave as written digits."""
from __future__ import annotations

import json
from decimal import Decimal

_encode_string = json.encoder.encode_basestring_ascii


class Raw(str):
    """Text that is JSON already (a stored body inside an event): dumps() writes it as it is."""


class InvalidJson(ValueError):
    pass


class DuplicateMember(InvalidJson):
    """An object names the same member twice. JSON allows it, but parsers disagree on which value
    counts (Python's keeps the last, others the first), so what a proxy or a log reads could differ
    from what was calculated and billed: refused instead."""

    def __init__(self, name: str):
        super().__init__(f"the member name {name!r} appears twice in one object")
        self.name = name


def _object(pairs: list) -> dict:
    found = dict(pairs)
    if len(found) != len(pairs):
        seen = set()
        for name, _ in pairs:
            if name in seen:
                raise DuplicateMember(name)
            seen.add(name)
    return found


def _reject_constant(name: str):
    raise InvalidJson(f"{name} is not valid JSON")


# One decoder for every call: json.loads() given these options builds a new decoder and scanner each
# time. Shared across threads the way json's own default decoder is.
_decoder = json.JSONDecoder(parse_float=Decimal, parse_int=Decimal, parse_constant=_reject_constant,
                            object_pairs_hook=_object)


def loads(raw: bytes | str):
    """Parse JSON, every number as Decimal; NaN, Infinity and a member named twice in one object
    are refused."""
    try:
        # What json.loads() does before decoding: bytes in whichever UTF the text is, a str without a BOM.
        if isinstance(raw, (bytes, bytearray)):
            raw = raw.decode(json.detect_encoding(raw), "surrogatepass")
        elif not isinstance(raw, str):
            raise TypeError(f"the JSON object must be str, bytes or bytearray, not {type(raw).__name__}")
        elif raw.startswith("\ufeff"):
            raise InvalidJson("Unexpected UTF-8 BOM (decode using utf-8-sig)")
        return _decoder.decode(raw)
    except InvalidJson:
        raise
    except (ValueError, RecursionError, ArithmeticError) as exc:
        # ArithmeticError: a number beyond what Decimal can hold, like 1e99999999999999999999
        raise InvalidJson(str(exc)) from None


PLAIN_EXPONENT_LIMIT = 100  # beyond it, plain digits would be far longer than what was written


def decimal_text(value: Decimal) -> str:
    """A decimal without trailing zeros, the same text for the same value: 1.250000 -> 1.25.

    Plain digits, except for magnitudes beyond 1e+-100, written 1.5E-400: plain digits of a
    number like 1e-999999999 would take a gigabyte.
    """
    if value.is_zero():
        return "0"
    if abs(value.adjusted()) > PLAIN_EXPONENT_LIMIT:
        sign, digits, _ = value.as_tuple()
        text = "".join(map(str, digits)).rstrip("0")
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return ("-" if sign else "") + f"{mantissa}E{value.adjusted():+d}"
    text = format(value, "f")  # exact: no context rounding, unlike normalize()
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def dumps(value, sort_keys: bool = False) -> str:
    """Compact JSON where Decimal values are written exactly, as numbers."""
    parts: list[str] = []
    _write(value, parts.append, sort_keys)
    return "".join(parts)


def canonical(value) -> str:
    """A canonical text of parsed JSON: sorted keys, numbers by value (12 == 12.0)."""
    return dumps(value, sort_keys=True)


def _write(value, out, sort_keys: bool) -> None:
    if isinstance(value, str):
        out(value if isinstance(value, Raw) else _encode_string(value))
    elif value is None:
        out("null")
    elif value is True:
        out("true")
    elif value is False:
        out("false")
    elif isinstance(value, Decimal):
        out(decimal_text(value))
    elif isinstance(value, int):
        out(str(value))
    elif isinstance(value, float):
        out(repr(value))
    elif isinstance(value, dict):
        out("{")
        separator = ""
        for key in sorted(value) if sort_keys else value:
            out(separator)
            out(_encode_string(str(key)))
            out(":")
            item = value[key]
            kind = type(item)  # the common members written here, without a call of their own
            if kind is str:
                out(_encode_string(item))
            elif kind is Decimal:
                out(decimal_text(item))
            else:
                _write(item, out, sort_keys)
            separator = ","
        out("}")
    elif isinstance(value, (list, tuple)):
        out("[")
        for index, item in enumerate(value):
            if index:
                out(",")
            _write(item, out, sort_keys)
        out("]")
    else:
        raise TypeError(f"cannot encode {type(value).__name__} as JSON")
