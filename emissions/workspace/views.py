"""The workspace's pages: each handler reads the form or the query, calls the domain, renders a template."""
from __future__ import annotations

import base64
import collections
import datetime as dt
import functools
import hashlib
import hmac
import itertools
import json
import logging
import re
import secrets
import threading
import time
import traceback
from decimal import Decimal
from pathlib import Path
from urllib.parse import parse_qs, quote, urlencode

import bottle

from .. import analytics
from .. import audit
from .. import customers
from .. import jsoncodec
from .. import keys
from .. import outages
from ..db import db
from ..models import Customer, MODES, SCOPES, Shipment, WebhookEvent, WorkspaceFlash, utcnow
from ..webhooks import endpoints as webhook_endpoints
from ..webhooks import events as webhook_events
from . import accounts
from . import chain
from . import chart
from . import insights
from .accounts import HashingBusy, Session, WorkspaceError

COOKIE = "emissions_session"
SIGN_IN_COOKIE = "emissions_sign_in"  # the sign-in form's CSRF token (double submit: cookie and field)
PENDING_COOKIE = "emissions_sign_in_pending"  # the ticket of a sign-in whose password is being checked
MAX_FORM_BYTES = 16 * 1024
CUSTOMERS_PAGE = 100
TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
STATIC = Path(__file__).resolve().parent.parent / "static"
HTML_HEADERS = {
    "Content-Type": "text/html; charset=utf-8",
    "Content-Security-Policy": ("default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; "
                                "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"),
    "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer",
}
STATIC_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".svg": "image/svg+xml"}

error_log = logging.getLogger("emissions.error")


# --- answering ---------------------------------------------------------------------------------------

def _headers(status: int, headers: dict | None = None) -> None:
    bottle.response.status = status
    for name, value in {**HTML_HEADERS, **(headers or {})}.items():
        if name == "Set-Cookie":  # beside a cookie set already (a Flash's)
            bottle.response.add_header(name, value)
        else:
            bottle.response.set_header(name, value)


def _number(value) -> str:
    return "—" if value is None else f"{value:,}"


def _kg(value) -> str:
    """A quantity for reading: thousands separated, two decimals (the exact value is in the API)."""
    return f"{Decimal(str(value)):,.2f}"


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


HELPERS = {"customer_path": customer_path, "number": _number, "kg": _kg, "when": _when, "day": _day,
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
    _headers(303, {"Location": location, **(headers or {})})
    return ""


def _request_id() -> str:
    return bottle.request.environ.get("emissions.request_id", "")


def guarded(handler):
    """An unexpected error is logged with its trace and answered as a plain error page, never a trace."""

    @functools.wraps(handler)
    def wrapper(*args, **kwargs):
        try:
            return handler(*args, **kwargs)
        except Exception as exc:
            if "Content-Disposition" in bottle.response:  # a failed download is a page, not a file
                del bottle.response["Content-Disposition"]
            cause = outages.cause_of(exc)
            if cause is not None:  # logged once per outage by the app (outages.FailureLog)
                bottle.request.app.database_failed(exc, cause)
                return render("error", 503, {"Retry-After": str(outages.RETRY_AFTER_SECONDS)},
                              title="Temporarily unavailable", message=outages.MESSAGE, request_id=_request_id())
            error_log.error(json.dumps({"request_id": _request_id(), "traceback": traceback.format_exc()}))
            try:
                db.close()
            except Exception:
                pass
            return render("error", 500, title="Something went wrong", request_id=_request_id())

    return wrapper


def _form() -> dict[str, list[str]]:
    request = bottle.request
    if request.content_length > MAX_FORM_BYTES:
        raise WorkspaceError("the form is too large")
    raw = request.environ["wsgi.input"].read(request.content_length) if request.content_length > 0 else b""
    try:
        # errors="strict": "%FF" is refused like a raw 0xFF, never stored as U+FFFD.
        form = parse_qs(raw.decode("utf-8"), keep_blank_values=True, max_num_fields=50, errors="strict")
    except (UnicodeDecodeError, ValueError):
        raise WorkspaceError("the form could not be read") from None
    for name, values in form.items():
        if any("\x00" in value for value in values):  # PostgreSQL refuses NUL in text, even in a WHERE
            raise WorkspaceError(f"the form field {name[:50]!r} must not contain NUL characters")
    return form


def _field(form: dict, name: str) -> str:
    return (form.get(name) or [""])[0]


def _query(name: str) -> str:
    value = bottle.request.query.get(name) or ""
    return "" if "\x00" in value else value[:200]


def _cookie(name: str, value: str, max_age: int, path: str = "/workspace") -> str:
    secure = "; Secure" if bottle.request.environ.get("wsgi.url_scheme") == "https" else ""
    return f"{name}={value}; Path={path}; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}"


def _date(text: str) -> dt.date | None:
    return insights.parse_date(text)


class Flash:
    """What a page shows once after a POST-redirect-GET: a new key, a new signing secret, a notice.

    The redirect may reach another worker or instance, so the value waits in the database
    (workspace_flash), for five minutes at most, and is deleted when shown. It is stored sealed: its
    JSON XOR a one-time pad of random bytes, and the pad is only in the browser's cookie, so neither
    the database (nor a backup of it) nor the cookie alone holds the key or secret it shows. An HMAC
    of the value under the instance secret, kept beside it, refuses any pad but the one given.
    """

    SECONDS = 300
    COOKIE_VALUE = re.compile(r"([A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{1,3000})")

    def __init__(self, secret: bytes, clock=utcnow):
        self.key = hmac.new(secret, b"workspace-flash", hashlib.sha256).digest()
        self.clock = clock

    @staticmethod
    def cookie_name(kind: str) -> str:
        return f"emissions_flash_{kind}"

    def _tag(self, flash_id: str, kind: str, text: bytes) -> str:
        return hmac.new(self.key, f"{flash_id}.{kind}.".encode() + text, hashlib.sha256).hexdigest()

    MOST_BYTES = 2000  # the value's JSON at most: its pad must fit a cookie (COOKIE_VALUE)

    def put(self, session: Session, kind: str, value: dict) -> None:
        """Keep `value` for the session's next page of this kind; sets the cookie on the response.
        For a secret, call it in the transaction that makes the secret, so that none is made unshown
        (a value too long for a cookie is a ValueError there)."""
        text = json.dumps(value, ensure_ascii=False).encode()
        if len(text) > self.MOST_BYTES:
            raise ValueError("what it would show is too long to be shown once")
        pad = secrets.token_bytes(len(text))
        flash_id = secrets.token_urlsafe(16)
        WorkspaceFlash.create(id=flash_id, session=session.id, kind=kind,
                              sealed=f"{self._tag(flash_id, kind, text)}.{_xor(text, pad).hex()}",
                              expires_at=self.clock() + dt.timedelta(seconds=self.SECONDS))
        sealing = base64.urlsafe_b64encode(pad).decode().rstrip("=")
        bottle.response.add_header("Set-Cookie", _cookie(self.cookie_name(kind), f"{flash_id}.{sealing}",
                                                          self.SECONDS))

    def put_notice(self, session: Session, text: str) -> None:
        """A line of text the section's page shows once (kind "notice")."""
        self.put(session, "notice", {"text": text})

    def take_notice(self, session: Session) -> str:
        """The notice put for this session, once; "" when there is none."""
        return (self.take(session, "notice") or {}).get("text", "")

    def take(self, session: Session, kind: str) -> dict | None:
        """The value put for this session and kind, once; None when there is none (or it expired)."""
        cookie = bottle.request.get_cookie(self.cookie_name(kind)) or ""
        if not cookie:
            return None
        bottle.response.add_header("Set-Cookie", _cookie(self.cookie_name(kind), "", 0))
        found = self.COOKIE_VALUE.fullmatch(cookie)
        if found is None:
            return None
        flash_id, sealing = found.groups()
        # Rows never shown go with the next take, in a statement of its own (in put() it would hold
        # them locked for the transaction of the change on PostgreSQL).
        WorkspaceFlash.delete().where(WorkspaceFlash.expires_at <= self.clock()).execute()
        row = WorkspaceFlash.get_or_none((WorkspaceFlash.id == flash_id) & (WorkspaceFlash.session == session.id)
                                         & (WorkspaceFlash.kind == kind))
        # Deleted by whoever shows it: of two requests at once, one. A wrong pad uses it up as well.
        if row is None or WorkspaceFlash.delete().where(WorkspaceFlash.id == row.id).execute() != 1:
            return None
        tag, _, sealed_hex = row.sealed.partition(".")
        try:
            pad = base64.urlsafe_b64decode(sealing + "=" * (-len(sealing) % 4))
            sealed = bytes.fromhex(sealed_hex)
        except ValueError:
            return None
        text = _xor(sealed, pad)
        if (row.expires_at <= self.clock() or len(pad) != len(sealed)
                or not hmac.compare_digest(tag, self._tag(flash_id, kind, text))):
            return None
        value = json.loads(text)
        return value if isinstance(value, dict) else None


def _xor(data: bytes, pad: bytes) -> bytes:
    return bytes(a ^ b for a, b in zip(data, pad))


class PendingSignIns:
    """Sign-ins whose password check runs on the hashing pool, by the random ticket in the browser's
    cookie; kept in this process for a minute at most (docs/workspace.md, "Sign-in and sessions")."""

    SECONDS = 60

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self._items: collections.OrderedDict = collections.OrderedDict()
        self._lock = threading.Lock()

    def add(self, future, user_id: int | None, email: str, address: str) -> str:
        ticket = secrets.token_urlsafe(24)
        with self._lock:
            now = self.clock()
            while self._items and next(iter(self._items.values()))[0] < now:
                self._items.popitem(last=False)
            self._items[ticket] = (now + self.SECONDS, future, user_id, email, address)
        return ticket

    def get(self, ticket: str):
        with self._lock:
            found = self._items.get(ticket)
        return found if found and found[0] >= self.clock() else None

    def forget(self, ticket: str) -> None:
        with self._lock:
            self._items.pop(ticket, None)


# --- the pages -----------------------------------------------------------------------------------

def signed_in(handler):
    """A page for a signed-in user; without a live session it redirects to sign-in."""

    @functools.wraps(handler)
    def wrapper(self, *args, **kwargs):
        session = self.session()
        if session is None:
            return redirect("/workspace/login")
        return handler(self, session, *args, **kwargs)

    return wrapper


def form_post(handler):
    """A form of a signed-in user, checked against the session's CSRF token."""

    @functools.wraps(handler)
    def wrapper(self, *args, **kwargs):
        session = self.session()
        if session is None:
            return redirect("/workspace/login")
        try:
            form = _form()
        except WorkspaceError as exc:
            return render("error", 400, title="The form could not be read", message=str(exc),
                          request_id=_request_id(), **self.chrome(session, ""))
        if not hmac.compare_digest(_field(form, "csrf").encode(), session.csrf.encode()):
            return redirect("/workspace")
        return handler(self, session, form, *args, **kwargs)

    return wrapper


class Workspace:
    """Handlers for /workspace."""

    def __init__(self, sessions: accounts.Sessions, secret: bytes, *, allow_private_live: bool = False,
                 allow_private_test: bool = False,
                 test_capacity: int = 10_000, hasher=None, throttle=None, serving_threads: int = 8,
                 workers: int = 1):
        self.sessions = sessions
        self.secret = secret
        self.allow_private_live = allow_private_live
        self.allow_private_test = allow_private_test
        self.test_capacity = test_capacity
        self.hasher = hasher or accounts.Hasher()
        self.throttle = throttle or accounts.SignInThrottle()
        self.flash = Flash(secret)
        self.pending = PendingSignIns()
        # A sign-in may wait for its password check on a serving thread while the hashing pool cannot
        # hold every serving thread waiting, or while other worker processes answer the API meanwhile
        # (their next request might reach another worker); otherwise (SQLite's one thread) it answers
        # at once and the browser picks the result up from /workspace/login/wait.
        self.wait_inline = serving_threads > self.hasher.capacity or workers > 1

    def session(self) -> Session | None:
        return self.sessions.read(bottle.request.get_cookie(COOKIE))

    def chrome(self, session: Session, active: str) -> dict:
        """What the layout shows on every page."""
        # Where the environment switch returns: the section's own list page, also when a form's POST
        # (at another URL, like /workspace/password) rendered it.
        return {"session": session, "active": active, "csrf": session.csrf, "environment": session.environment,
                "path": f"/workspace/{active}" if active not in ("", "overview") else "/workspace"}

    def static(self, name: str):
        path = STATIC / name
        if not re.fullmatch(r"[a-z0-9-]+\.(css|js|svg)", name) or not path.is_file():
            return render("error", 404, title="Not found", request_id=_request_id())
        bottle.response.set_header("Content-Type", STATIC_TYPES[path.suffix])
        bottle.response.set_header("Cache-Control", "public, max-age=300")
        return path.read_bytes()

    # Sign-in and out.

    def login_page(self, error: str = "", status: int = 200, email: str = "", headers: dict | None = None):
        # The form's token is kept while its cookie lasts, so a second open tab still signs in.
        token = bottle.request.get_cookie(SIGN_IN_COOKIE) or ""
        if not re.fullmatch(r"[A-Za-z0-9_-]{32}", token):
            token = secrets.token_urlsafe(24)
        cookie = _cookie(SIGN_IN_COOKIE, token, 3600, path="/workspace/login")
        return render("login", status, {"Set-Cookie": cookie, **(headers or {})}, title="Sign in", error=error,
                      email=email, csrf=token)

    def login(self):
        try:
            form = _form()
        except WorkspaceError as exc:
            return self.login_page(str(exc), 400)
        email = accounts.normal_email(_field(form, "email"))
        expected = bottle.request.get_cookie(SIGN_IN_COOKIE) or ""
        if not expected or not hmac.compare_digest(_field(form, "csrf").encode(), expected.encode()):
            return self.login_page("The sign-in form expired; please sign in again.", 400, email)
        if len(email) > accounts.MAX_EMAIL:
            return self.login_page("Email or password is not right.", 401)
        address = bottle.request.environ.get("REMOTE_ADDR") or ""
        wait = self.throttle.wait(email, address)
        if wait:
            return self.login_page(f"Too many sign-in attempts; try again in {wait} seconds.", 429, email,
                                   {"Retry-After": str(wait)})
        user, (candidate, stored) = accounts.password_check(email, _field(form, "password"))
        try:
            future = self.hasher.submit(accounts.check_password, candidate, stored)
            if self.wait_inline:
                return self._signed_in(self.hasher.wait(future) and user, email, address)
        except HashingBusy as busy:
            return self.login_page("Signing in is busy; try again in a moment.", 429, email,
                                   {"Retry-After": str(busy.retry_after)})
        ticket = self.pending.add(future, user.id if user else None, email, address)
        return redirect("/workspace/login/wait", {"Set-Cookie": _cookie(PENDING_COOKIE, ticket, PendingSignIns.SECONDS,
                                                                        path="/workspace/login")})

    def login_wait(self):
        """Where a sign-in picks up its password check: still running, a page that looks again at once."""
        ticket = bottle.request.get_cookie(PENDING_COOKIE) or ""
        found = self.pending.get(ticket)
        if found is None:
            return self.login_page("The sign-in was interrupted; please sign in again.", 400)
        _, future, user_id, email, address = found
        if not future.done():
            return render("signing_in", 200, {"Refresh": "0"})
        self.pending.forget(ticket)
        user = accounts.find_user_by_id(user_id) if user_id is not None and future.result() else None
        return self._signed_in(user, email, address)

    def _signed_in(self, user, email: str, address: str):
        if not user or user.organization.status != "active":
            return self.login_page("Email or password is not right.", 401, email)
        self.throttle.succeeded(email, address)
        token = self.sessions.issue(user)
        return redirect("/workspace", {"Set-Cookie": _cookie(COOKIE, token, accounts.SESSION_HOURS * 3600)})

    def logout(self):
        session = self.session()
        try:
            form = _form()
        except WorkspaceError:
            form = {}
        if session is not None and not hmac.compare_digest(_field(form, "csrf").encode(), session.csrf.encode()):
            return redirect("/workspace")  # a cross-site form cannot sign anyone out
        self.sessions.end(bottle.request.get_cookie(COOKIE))
        return redirect("/workspace/login", {"Set-Cookie": _cookie(COOKIE, "", 0)})

    @form_post
    def switch_environment(self, session: Session, form: dict):
        environment = _field(form, "environment")
        if environment in ("test", "live"):
            self.sessions.switch_environment(session, environment)
        back = _field(form, "next")
        # Only a workspace list page: an id of one environment means nothing in the other.
        back = back if re.fullmatch(r"/workspace(/[a-z]+)?", back) else "/workspace"
        return redirect(back)

    # Overview.

    @signed_in
    def overview(self, session: Session):
        org, environment = session.organization, session.environment
        now = utcnow()
        month = insights.emissions_since(org.id, environment, insights.month_start(now))
        days = insights.daily(org.id, environment, 30, now)
        latest, _ = insights.page(org.id, environment, insights.Filters(), size=8)
        endpoint = webhook_endpoints.endpoint_for(org.id, environment)
        health = insights.endpoint_health(org.id, environment, now - dt.timedelta(days=7)) if endpoint else None
        return render("overview", title="Overview", usage=insights.usage(org, self.test_capacity, now),
                      month=month, days=days, chart=chart.daily_bars(days), latest=latest, endpoint=endpoint,
                      health=health, month_name=now.strftime("%B %Y"), **self.chrome(session, "overview"))

    # Calculations.

    def _filters(self) -> tuple[insights.Filters, list[str]]:
        problems = []
        filters = insights.Filters(customer=_query("customer").strip(), mode=_query("mode"))
        if filters.mode and filters.mode not in MODES:
            problems.append("Mode must be ROAD, SEA or AIR.")
            filters.mode = ""
        for name, attribute in (("from", "date_from"), ("to", "date_to")):
            text = _query(name)
            if text:
                value = _date(text)
                if value is None:
                    problems.append(f"The “{name}” date must be written YYYY-MM-DD.")
                setattr(filters, attribute, value)
        if filters.date_from and filters.date_to and filters.date_from > filters.date_to:
            problems.append("The “from” date is after the “to” date: no calculation can match.")
        return filters, problems

    @signed_in
    def calculations_page(self, session: Session):
        filters, problems = self._filters()
        cursor = insights.parse_cursor(_query("after")) if _query("after") else None
        rows, next_cursor = insights.page(session.organization.id, session.environment, filters, cursor)
        query = filters.query_string()
        return render("calculations", 400 if problems else 200, title="Calculations", rows=rows, filters=filters,
                      problems=problems, modes=MODES, paged=cursor is not None,
                      next_url=("/workspace/calculations?" + urlencode({**query, "after": next_cursor}))
                      if next_cursor else "",
                      csv_url="/workspace/calculations.csv" + ("?" + urlencode(query) if query else ""),
                      **self.chrome(session, "calculations"))

    @signed_in
    def calculations_csv(self, session: Session):
        filters, problems = self._filters()
        if problems:
            return render("error", 400, title="Not downloaded", message=" ".join(problems),
                          request_id=_request_id(), **self.chrome(session, "calculations"))
        bottle.response.set_header("Content-Type", "text/csv; charset=utf-8")
        bottle.response.set_header("Content-Disposition",
                                   f'attachment; filename="calculations-{session.environment}-'
                                   f'{utcnow().date().isoformat()}.csv"')
        lines = insights.csv_lines(session.organization.id, session.environment, filters)
        # The header and the first batch are read here, so that a failing query is still an error
        # page; a failure later can only cut the download short (the client sees it incomplete).
        first = [next(lines), next(lines, "")]
        return (line.encode() for line in itertools.chain(first, lines))

    @signed_in
    def calculation_page(self, session: Session, calculation_id: str):
        found = None
        if re.fullmatch(r"[0-9a-f-]{36}", calculation_id):
            found = insights.calculation(session.organization.id, session.environment, calculation_id)
        if found is None:
            return render("error", 404, title="No such calculation",
                          message="No calculation with this id exists in this environment.",
                          request_id=_request_id(), **self.chrome(session, "calculations"))
        row, body = found
        events = insights.events_of(session.organization.id, session.environment, row)
        return render("calculation", title="Calculation", calculation=body,
                      pretty=pretty_json(jsoncodec.loads(row.body)), events=events,
                      attempts=insights.attempts_of(events), **self.chrome(session, "calculations"))

    # Shipments (issue 23): the list and one chain, drawn.

    @signed_in
    def shipments_page(self, session: Session):
        rows = (Shipment.select(Shipment.body).where((Shipment.organization == session.organization.id)
                                                     & (Shipment.environment == session.environment))
                .order_by(Shipment.created_at.desc(), Shipment.id.desc()).limit(100))
        return render("shipments", title="Shipments", shipments=[jsoncodec.loads(row.body) for row in rows],
                      **self.chrome(session, "shipments"))

    @signed_in
    def shipment_page(self, session: Session, shipment_id: str):
        found = None
        if re.fullmatch(r"[0-9a-f-]{36}", shipment_id):
            found = (Shipment.select(Shipment.body).where(
                (Shipment.id == shipment_id) & (Shipment.organization == session.organization.id)
                & (Shipment.environment == session.environment)).first())
        if found is None:
            return render("error", 404, title="No such shipment",
                          message="No shipment with this id exists in this environment.",
                          request_id=_request_id(), **self.chrome(session, "shipments"))
        body = jsoncodec.loads(found.body)
        return render("shipment", title="Shipment", shipment=body, svg=chain.chain_svg(body),
                      bars=chain.element_bars(body), place_name=chain.place_name,
                      pretty=pretty_json(body), **self.chrome(session, "shipments"))

    # Customers.

    @signed_in
    def customers_page(self, session: Session, error: str = "", status: int = 200, form: dict | None = None):
        org, environment = session.organization, session.environment
        after = _query("after")
        query = Customer.select().where((Customer.organization == org.id) & (Customer.environment == environment))
        if after:
            query = query.where(Customer.reference > after)
        listed = list(query.order_by(Customer.reference).limit(CUSTOMERS_PAGE + 1))
        next_url = ("/workspace/customers?" + urlencode({"after": listed[CUSTOMERS_PAGE - 1].reference})
                    if len(listed) > CUSTOMERS_PAGE else "")
        listed = listed[:CUSTOMERS_PAGE]
        totals = customer_totals([customer.id for customer in listed])
        return render("customers", status, title="Customers", customers=listed, totals=totals, error=error,
                      form=form or {}, next_url=next_url, paged=bool(after), **self.chrome(session, "customers"))

    @form_post
    def add_customer(self, session: Session, form: dict):
        fields = {name: _field(form, name).strip() for name in ("reference", "name", "country")}
        try:
            customer = customers.create(session.organization, session.environment, fields["reference"],
                                        fields["name"], fields["country"] or None, actor=session.actor)
        except customers.CustomerError as exc:
            return self.customers_page(error=f"Not added: {exc}.", status=400, form=fields)
        return redirect(customer_path(customer.reference))

    @signed_in
    def customer_page(self, session: Session, reference: str, error: str = "", status: int = 200,
                      form: dict | None = None):
        found = None
        if customers.is_valid_reference(reference):
            found = analytics.find_with_analytics(session.organization.id, session.environment, reference)
        if found is None:
            return render("error", 404, title="No such customer",
                          message="No customer with this reference exists in this environment.",
                          request_id=_request_id(), **self.chrome(session, "customers"))
        recent, _ = insights.page(session.organization.id, session.environment,
                                  insights.Filters(customer=reference), size=10)
        return render("customer", status, title=found["name"], customer=found, analytics=found["analytics"],
                      api_json=pretty_json(jsoncodec.loads(analytics.analytics_json(
                          session.organization.id, session.environment, reference))),
                      recent=recent, error=error, form=form or {}, **self.chrome(session, "customers"))

    @form_post
    def change_customer(self, session: Session, form: dict, reference: str):
        customer = None
        if customers.is_valid_reference(reference):
            customer = customers.find(session.organization.id, session.environment, reference)
        if customer is None:
            return render("error", 404, title="No such customer", message="No customer with this reference.",
                          request_id=_request_id(), **self.chrome(session, "customers"))
        action = _field(form, "action")
        try:
            if action == "edit":
                customers.update(customer, name=_field(form, "name"), country=_field(form, "country").strip(),
                                 actor=session.actor)
            elif action in ("suspend", "reactivate"):
                customers.update(customer, status="suspended" if action == "suspend" else "active",
                                 actor=session.actor)
            else:
                raise customers.CustomerError("unknown action")
        except customers.CustomerError as exc:
            return self.customer_page(reference, error=f"Not saved: {exc}.", status=400,
                                      form={"name": _field(form, "name"), "country": _field(form, "country")})
        return redirect(customer_path(customer.reference))

    # Webhooks.

    @signed_in
    def webhooks_page(self, session: Session, error: str = "", status: int = 200, url: str = ""):
        org, environment = session.organization, session.environment
        endpoint = webhook_endpoints.endpoint_for(org.id, environment)
        events = insights.recent_events(org.id, environment, 25)
        return render("webhooks", status, title="Webhooks", endpoint=endpoint, events=events,
                      attempts=insights.attempts_of(events), error=error, url=url,
                      shown=self.flash.take(session, "secret"),
                      notice=self.flash.take_notice(session),
                      **self.chrome(session, "webhooks"))

    @form_post
    def change_webhook(self, session: Session, form: dict):
        org, environment, action = session.organization, session.environment, _field(form, "action")
        try:
            if action == "set":
                with db.atomic():  # no secret made that is never shown: the flash joins the change
                    _, secret = webhook_endpoints.set_endpoint(org.id, environment, _field(form, "url"),
                                                               actor=session.actor,
                                                               allow_private_live=self.allow_private_live,
                                                               allow_private_test=self.allow_private_test)
                    self.flash.put(session, "secret", {"secret": secret})
            elif action == "rotate":
                with db.atomic():  # as above
                    _, secret = webhook_endpoints.rotate_secret(org.id, environment, actor=session.actor)
                    self.flash.put(session, "secret", {"secret": secret})
            elif action == "remove":
                webhook_endpoints.remove_endpoint(org.id, environment, actor=session.actor)
                return redirect("/workspace/webhooks")
            elif action == "test":
                event = webhook_events.send_test_event(org.id, environment)
                self.flash.put_notice(session, f"Test event {event.id} queued: it is delivered within a "
                                               "few seconds and listed below, marked test.")
                return redirect("/workspace/webhooks")
            else:
                return self.webhooks_page(error="Unknown action.", status=400)
        except webhook_endpoints.WebhookError as exc:
            return self.webhooks_page(error=f"Not changed: {exc}.", status=400, url=_field(form, "url"))
        return redirect("/workspace/webhooks")

    @form_post
    def redeliver(self, session: Session, form: dict, event_id: str):
        event = WebhookEvent.get_or_none((WebhookEvent.id == event_id[:36])
                                         & (WebhookEvent.organization == session.organization.id)
                                         & (WebhookEvent.environment == session.environment))
        if event is None:
            return self.webhooks_page(error="No such event.", status=404)
        try:
            webhook_events.redeliver(event.id)  # a pending one at once, a finished one for a new round
        except webhook_endpoints.WebhookError as exc:
            return self.webhooks_page(error=f"Not queued: {exc}.", status=400)
        back = _field(form, "next")
        if re.fullmatch(r"/workspace/calculations/[0-9a-f-]{36}", back):
            return redirect(back)  # the calculation's page shows the event's new status
        self.flash.put_notice(session, f"Event {event.id} queued for delivery again.")
        return redirect("/workspace/webhooks")

    # API keys.

    @signed_in
    def keys_page(self, session: Session, error: str = "", status: int = 200, form: dict | None = None,
                  shown: dict | None = None):
        listed = keys.of_organization(session.organization, session.environment, newest_first=True)
        return render("keys", status, title="API keys", keys=listed, scopes=SCOPES, error=error,
                      form=form or {"scopes": list(SCOPES[:2])}, shown=shown, now=utcnow(),
                      **self.chrome(session, "keys"))

    @signed_in
    def new_key_page(self, session: Session):
        shown = self.flash.take(session, "key")
        if shown is None:
            return redirect("/workspace/keys")
        return self.keys_page(shown=shown)

    @form_post
    def create_key(self, session: Session, form: dict):
        org = session.organization
        kept = {"name": _field(form, "name"), "environment": _field(form, "environment"),
                "scopes": form.get("scopes", []), "expires_on": _field(form, "expires_on")}
        name = kept["name"][:200]
        if customers.has_control_character(name):  # the rule for customer names
            return self.keys_page(error="The key was not created: name must not contain line breaks or other "
                                        "control characters.", status=400, form=kept)
        expires_at = None
        if kept["expires_on"]:
            # YYYY-MM-DD only: fromisoformat also takes 20260101 and the week form 2026W011.
            day = _date(kept["expires_on"])
            if day is None or day <= utcnow().date():
                return self.keys_page(error="The expiry date must be a date after today, as YYYY-MM-DD.",
                                      status=400, form=kept)
            expires_at = dt.datetime.combine(day, dt.time(), tzinfo=dt.timezone.utc)
        try:
            # The page that shows the key once is kept in the key's own transaction.
            key, _ = keys.create(org, kept["environment"], kept["scopes"], secret=self.secret, name=name.strip(),
                                 expires_at=expires_at, actor=session.actor,
                                 then=lambda made, plain: self.flash.put(session, "key", {
                                     "key": plain, "id": made.id, "name": made.name}))
        except keys.ApiKeyError as exc:
            return self.keys_page(error=f"The key was not created: {exc}.", status=400, form=kept)
        if key.environment != session.environment:
            self.sessions.switch_environment(session, key.environment)
        return redirect("/workspace/keys/new")

    @signed_in
    def revoke_key_page(self, session: Session, key_id: str):
        key = keys.find(key_id, session.organization)
        if key is None:
            return self.keys_page(error="No such key.", status=404)
        return render("revoke", title="Revoke key", key=key, **self.chrome(session, "keys"))

    @form_post
    def revoke_key(self, session: Session, form: dict, key_id: str):
        key = keys.find(key_id, session.organization)
        if key is None:
            return self.keys_page(error="No such key.", status=404)
        keys.revoke(key, actor=session.actor)
        return redirect("/workspace/keys")

    # Team.

    @signed_in
    def team_page(self, session: Session, error: str = "", status: int = 200, form: dict | None = None,
                  notice: str = "", headers: dict | None = None):
        return render("team", status, headers, title="Team", users=accounts.users(session.organization), error=error,
                      form=form or {},
                      notice=notice or self.flash.take_notice(session),
                      **self.chrome(session, "team"))

    @form_post
    def add_user(self, session: Session, form: dict):
        email = _field(form, "email")
        try:
            user = accounts.create_user(session.organization, email, _field(form, "password"), self.hasher,
                                        actor=session.actor)
        except HashingBusy:
            return self.team_page(error="Busy; try again in a moment.", status=429, form={"email": email})
        except WorkspaceError as exc:
            return self.team_page(error=f"Not added: {exc}.", status=400, form={"email": email})
        self.flash.put_notice(session, f"{user.email} can now sign in.")
        return redirect("/workspace/team")

    def _removable(self, session: Session, user_id: str):
        """(the teammate, None), or (None, the team page saying why that user cannot be removed)."""
        user = None
        if re.fullmatch(r"[1-9][0-9]{0,17}", user_id):
            user = accounts.member(session.organization, int(user_id))
        if user is None:
            return None, self.team_page(error="No such user.", status=404)
        if user.id == session.user.id:
            return None, self.team_page(error="You cannot remove yourself; ask a teammate.", status=400)
        return user, None

    @signed_in
    def remove_user_page(self, session: Session, user_id: str):
        """Asks before removing, as revoking a key does."""
        user, refused = self._removable(session, user_id)
        return refused or render("remove_user", title="Remove teammate", user=user, **self.chrome(session, "team"))

    @form_post
    def remove_user(self, session: Session, form: dict, user_id: str):
        user, refused = self._removable(session, user_id)
        if refused is not None:
            return refused
        accounts.delete_user(user, actor=session.actor)
        self.flash.put_notice(session, f"{user.email} was removed and signed out.")
        return redirect("/workspace/team")

    @form_post
    def change_password(self, session: Session, form: dict):
        current, new = _field(form, "current_password"), _field(form, "new_password")
        # Checking the current password is a sign-in attempt: a held session must not guess without limit.
        email, address = session.user.email, bottle.request.environ.get("REMOTE_ADDR") or ""
        wait = self.throttle.wait(email, address)
        if wait:
            return self.team_page(error=f"Too many attempts; try again in {wait} seconds.", status=429,
                                  headers={"Retry-After": str(wait)})
        try:
            if not self.hasher.check(current, session.user.password_hash):
                return self.team_page(error="The current password is not right.", status=400)
            self.throttle.succeeded(email, address)
            accounts.set_password(session.user, new, self.hasher, actor=session.actor)
        except HashingBusy:
            return self.team_page(error="Busy; try again in a moment.", status=429)
        except WorkspaceError as exc:
            return self.team_page(error=f"Not changed: {exc}.", status=400)
        # Every session of the user ended; this browser gets a new one.
        token = self.sessions.issue(session.user, session.environment)
        fresh = self.sessions.read(token)
        if fresh is not None:  # None: the user or the organization went meanwhile; the sign-in page says so
            self.flash.put_notice(fresh, "Password changed. Your other sessions were signed out.")
        return redirect("/workspace/team", {"Set-Cookie": _cookie(COOKIE, token, accounts.SESSION_HOURS * 3600)})

    def not_found(self, rest: str):
        """Any other workspace path: a page a person can read, not the API's JSON 404."""
        session = self.session()
        chrome = self.chrome(session, "") if session else {}
        return render("error", 404, title="Page not found", message="There is no workspace page at this address.",
                      request_id=_request_id(), **chrome)

    # Audit.

    @signed_in
    def audit_page(self, session: Session):
        events = audit.recent(session.organization, 200)
        return render("audit", title="Audit log", events=events, **self.chrome(session, "audit"))


def customer_totals(customer_ids: list[int]) -> dict[int, dict]:
    """Calculations and kgCO2e per customer, from the rollups (the numbers the API's analytics sum)."""
    from ..db import EXACT_SUM
    from ..models import CustomerRollup
    totals: dict[int, dict] = {}
    if not customer_ids:
        return totals
    for row in CustomerRollup.select().where(CustomerRollup.customer.in_(customer_ids)):
        found = totals.setdefault(row.customer_id, {"count": 0, "kg": insights.ZERO})
        found["count"] += row.calculation_count
        found["kg"] = EXACT_SUM.add(found["kg"], row.emissions_kg)
    return totals


def routes(app, secret: bytes) -> Workspace:
    """The workspace's part of the URL map (its pages answer HTML, outside the API's plugin)."""
    workspace = Workspace(accounts.Sessions(secret), secret,
                          allow_private_live=app.settings.webhook_allow_private_live,
                          allow_private_test=app.settings.webhook_allow_private_test,
                          test_capacity=app.settings.test_capacity, serving_threads=app.settings.serving_threads,
                          workers=app.settings.workers)

    def route(path, method, handler):
        app.route(path, method, guarded(handler), skip=True)

    route("/workspace", "GET", workspace.overview)
    route("/workspace/static/<name>", "GET", workspace.static)
    route("/workspace/login", "GET", workspace.login_page)
    route("/workspace/login", "POST", workspace.login)
    route("/workspace/login/wait", "GET", workspace.login_wait)
    route("/workspace/logout", "POST", workspace.logout)
    route("/workspace/environment", "POST", workspace.switch_environment)
    route("/workspace/calculations", "GET", workspace.calculations_page)
    route("/workspace/calculations.csv", "GET", workspace.calculations_csv)
    route("/workspace/calculations/<calculation_id>", "GET", workspace.calculation_page)
    route("/workspace/shipments", "GET", workspace.shipments_page)
    route("/workspace/shipments/<shipment_id>", "GET", workspace.shipment_page)
    route("/workspace/customers", "GET", workspace.customers_page)
    route("/workspace/customers", "POST", workspace.add_customer)
    route("/workspace/customers/<reference:path>/change", "POST", workspace.change_customer)
    route("/workspace/customers/<reference:path>", "GET", workspace.customer_page)
    route("/workspace/webhooks", "GET", workspace.webhooks_page)
    route("/workspace/webhooks", "POST", workspace.change_webhook)
    route("/workspace/webhooks/events/<event_id>/redeliver", "POST", workspace.redeliver)
    route("/workspace/keys", "GET", workspace.keys_page)
    route("/workspace/keys", "POST", workspace.create_key)
    route("/workspace/keys/new", "GET", workspace.new_key_page)
    route("/workspace/keys/<key_id>/revoke", "GET", workspace.revoke_key_page)
    route("/workspace/keys/<key_id>/revoke", "POST", workspace.revoke_key)
    route("/workspace/team", "GET", workspace.team_page)
    route("/workspace/team", "POST", workspace.add_user)
    route("/workspace/team/<user_id>/remove", "GET", workspace.remove_user_page)
    route("/workspace/team/<user_id>/remove", "POST", workspace.remove_user)
    route("/workspace/password", "POST", workspace.change_password)
    route("/workspace/audit", "GET", workspace.audit_page)
    route("/workspace/<rest:path>", "GET", workspace.not_found)
    return workspace
