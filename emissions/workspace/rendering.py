"""How a workspace page answers: the headers every page carries, the template helpers, render and redirect."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from urllib.parse import quote, urlencode

import bottle

from .. import jsoncodec
from . import insights

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
HTML_HEADERS = {
    "Content-Type": "text/html; charset=utf-8",
    "Content-Security-Policy": ("default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; "
                                "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"),
    "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer",
}


def _headers(status: int, headers: dict | None = None) -> None:
    bottle.response.status = status
    for name, value in {**HTML_HEADERS, **(headers or {})}.items():
        if name == "Set-Cookie":  # beside a cookie set already (a Flash's)
            bottle.response.add_header(name, value)
        else:
            bottle.response.set_header(name, value)


def _number(value) -> str:
    return "—" if value is None else f"{value:,}"


def _when(moment: dt.datetime | None) -> str:
    return "—" if moment is None else moment.strftime("%d %b %Y, %H:%M UTC")


def _day(moment: dt.datetime | None) -> str:
    return "—" if moment is None else moment.strftime("%d %b %Y")


STATUS_CLASSES = {"active": "ok", "succeeded": "ok", "enabled": "ok", "pending": "warn", "delivering": "warn",
                  "suspended": "warn", "failed": "bad", "revoked": "bad", "expired": "bad", "disabled": "bad"}

def customer_path(reference: str) -> str:
    """The customer's page; every character of a reference but letters and digits is escaped, so
    that a browser never reads a `..` in it as a step up the path."""
    return "/workspace/customers/" + quote(reference, safe="")


# kg: a quantity with thousands separators; co2e: one figure of emissions with its unit (t CO2e from
# 1,000 kg); co2e_unit(*values): the one unit of a table's (or a card's) emissions, from its largest.
HELPERS = {"customer_path": customer_path, "number": _number, "kg": insights.number_text, "co2e": insights.co2e_text,
           "co2e_unit": insights.co2e_unit,
           "when": _when, "day": _day,
           "plain": lambda value: jsoncodec.decimal_text(Decimal(str(value))),
           "status_class": lambda status: STATUS_CLASSES.get(status, ""),
           "query_of": lambda filters: urlencode(filters.query_string())}


def pretty_json(value, depth: int = 0) -> str:
    """JSON indented for reading, numbers exactly as stored (jsoncodec reads them as Decimal)."""
    pad, inner = "  " * depth, "  " * (depth + 1)
    if isinstance(value, dict) and value:
        return "{\n" + ",\n".join(f"{inner}{jsoncodec.dumps(key)}: {pretty_json(item, depth + 1)}"
                                   for key, item in value.items()) + f"\n{pad}}}"
    if isinstance(value, list) and value:
        return "[\n" + ",\n".join(inner + pretty_json(item, depth + 1) for item in value) + f"\n{pad}]"
    return jsoncodec.dumps(value)


def render(name: str, status: int = 200, headers: dict | None = None, **values) -> str:
    """A template from emissions/templates, auto-escaped, in the layout."""
    _headers(status, headers)
    return bottle.template(name, template_lookup=[str(TEMPLATES)], **HELPERS, **values)


def redirect(location: str, headers: dict | None = None) -> str:
    """A 303 to `location` (POST-redirect-GET), with the page headers."""
    _headers(303, {"Location": location, **(headers or {})})
    return ""


def request_id() -> str:
    """The request's id, as the error pages show it."""
    return bottle.request.environ.get("emissions.request_id", "")


def query_parameter(name: str) -> str:
    """A query parameter, at most 200 characters; "" when absent or holding a NUL."""
    value = bottle.request.query.get(name) or ""
    return "" if "\x00" in value else value[:200]


def cookie_header(name: str, value: str, max_age: int, path: str = "/workspace") -> str:
    """A Set-Cookie value: HttpOnly, SameSite=Strict, Secure over HTTPS."""
    secure = "; Secure" if bottle.request.environ.get("wsgi.url_scheme") == "https" else ""
    return f"{name}={value}; Path={path}; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}"
