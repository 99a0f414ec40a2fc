"""The workspace: an organization's people sign in and manage their API keys (shown once)."""
from __future__ import annotations

import datetime as dt
import functools
import hashlib
import hmac
import html
import re
import secrets
from urllib.parse import parse_qs

import bottle
import jwt
import peewee as pw

from . import auth
from . import customers
from . import webhooks
from .errors import LimitReached
from .limits import RateLimiter
from .models import ApiKey, Customer, Organization, SCOPES, User, db, utcnow
from .replies import Reply

COOKIE = "emissions_session"
SESSION_HOURS = 8
MAX_FORM_BYTES = 16 * 1024
HTML_HEADERS = {"Content-Type": "text/html; charset=utf-8",
                "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'",
                "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"}
# scrypt: memory-hard; n=2**14 costs about 50 ms a check on this class of machine.
SCRYPT = {"n": 2 ** 14, "r": 8, "p": 1, "dklen": 32}
# Sign-in attempts: 10 at once, then one every 30 s, per email and per client address.
SIGN_IN_RATE, SIGN_IN_BURST = 1 / 30, 10


class WorkspaceError(ValueError):
    """A user-facing problem with a workspace form."""


def hash_password(password: str) -> str:
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, **SCRYPT)
    return f"scrypt${salt.hex()}${digest.hex()}"


def check_password(password: str, stored: str) -> bool:
    try:
        _, salt, digest = stored.split("$")
        candidate = hashlib.scrypt(password.encode(), salt=bytes.fromhex(salt), **SCRYPT)
    except ValueError:
        return False
    return hmac.compare_digest(candidate.hex().encode(), digest.encode())


# A fixed hash to check against when the email is unknown, so both cases take the same time.
_DUMMY_HASH = hash_password(secrets.token_hex(8))


def create_user(organization: Organization, email: str, password: str) -> User:
    """A workspace login for one organization."""
    email = email.strip().lower()
    if "@" not in email or len(email) > 254:
        raise WorkspaceError("email must be an address")
    if len(password) < 12:
        raise WorkspaceError("password must be at least 12 characters")
    try:
        with db.atomic():
            return User.create(organization=organization, email=email, password_hash=hash_password(password))
    except pw.IntegrityError:
        raise WorkspaceError(f"a user with email {email} already exists") from None


def authenticate_user(email: str, password: str) -> User | None:
    user = User.get_or_none(User.email == email.strip().lower())
    if user is None:
        check_password(password, _DUMMY_HASH)
        return None
    return user if check_password(password, user.password_hash) else None


class Sessions:
    """Signed session tokens (JWT, HS256) carried in an HttpOnly, SameSite=Strict cookie."""

    def __init__(self, instance_secret: bytes, clock=utcnow):
        # A key of its own, derived from the instance secret, so tokens never double as key hashes.
        self.key = hmac.new(instance_secret, b"workspace-session", hashlib.sha256).digest()
        self.clock = clock

    def issue(self, user: User) -> str:
        now = self.clock()
        claims = {"sub": str(user.id), "org": user.organization_id, "csrf": secrets.token_urlsafe(16),
                  "iat": int(now.timestamp()), "exp": int((now + dt.timedelta(hours=SESSION_HOURS)).timestamp())}
        return jwt.encode(claims, self.key, algorithm="HS256")

    def read(self, token: str | None) -> dict | None:
        if not token:
            return None
        try:
            claims = jwt.decode(token, self.key, algorithms=["HS256"], options={"require": ["exp", "sub", "csrf"]},
                                leeway=0)
        except jwt.PyJWTError:
            return None
        if not _well_formed(claims) or claims["exp"] <= self.clock().timestamp():
            return None
        return claims


def _well_formed(claims: dict) -> bool:
    """Claims of the shape issue() writes; any other shape is no session, never a crash further on."""
    sub, org, csrf = claims.get("sub"), claims.get("org"), claims.get("csrf")
    # type() rather than isinstance(): True is an int too. Ids stay within a 64-bit column.
    return (type(claims.get("exp")) is int and type(org) is int and 0 < org < 2 ** 63
            and isinstance(sub, str) and re.fullmatch(r"[1-9][0-9]{0,17}", sub) is not None
            and isinstance(csrf, str) and re.fullmatch(r"[A-Za-z0-9_-]{16,64}", csrf) is not None)


# --- pages ---------------------------------------------------------------------------------------

def _page(title: str, body: str) -> str:
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)} · Emissions workspace</title>
<style>body{{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}}
table{{border-collapse:collapse;width:100%}}td,th{{border-bottom:1px solid #ddd;padding:.4rem;text-align:left}}
.key{{font-family:monospace;background:#fffbe6;border:1px solid #e6c200;padding:.6rem;word-break:break-all}}
.error{{color:#a00}} label{{display:block;margin:.3rem 0}} button{{padding:.3rem .8rem}}</style></head>
<body><h1>{html.escape(title)}</h1>{body}</body></html>"""


NAV = ('<p><a href="/workspace/keys">API keys</a> · <a href="/workspace/customers">Customers</a> · '
       '<a href="/workspace/webhooks">Webhooks</a></p>'
       '<form method="post" action="/workspace/logout">'
       '<input type="hidden" name="csrf" value="{csrf}"><button>Sign out</button></form>')


def _reply(content: str, status: int = 200, headers: dict | None = None):
    return Reply(content, status, {**HTML_HEADERS, **(headers or {})})


def _redirect(location: str, headers: dict | None = None):
    return _reply("", 303, {"Location": location, **(headers or {})})


def _form() -> dict[str, list[str]]:
    request = bottle.request
    if request.content_length > MAX_FORM_BYTES:
        raise WorkspaceError("the form is too large")
    raw = request.environ["wsgi.input"].read(max(0, request.content_length)) if request.content_length > 0 else b""
    try:
        form = parse_qs(raw.decode("utf-8"), keep_blank_values=True, max_num_fields=50)
    except (UnicodeDecodeError, ValueError):
        raise WorkspaceError("the form could not be read") from None
    for name, values in form.items():
        if any("\x00" in value for value in values):  # PostgreSQL refuses NUL in text, even in a WHERE
            raise WorkspaceError(f"the form field {name[:50]!r} must not contain NUL characters")
    return form


def _field(form: dict, name: str) -> str:
    return (form.get(name) or [""])[0]


def _cookie(token: str, max_age: int) -> str:
    secure = "; Secure" if bottle.request.environ.get("wsgi.url_scheme") == "https" else ""
    return f"{COOKIE}={token}; Path=/workspace; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}"


def _date(text: str) -> dt.date | None:
    """The date written YYYY-MM-DD, or None."""
    if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", text):
        return None
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        return None


def _error(message: str) -> str:
    return f'<p class="error">{html.escape(message)}</p>' if message else ""


def signed_in(page):
    """A workspace page: without a session it redirects to sign-in; else it gets the organization
    and the session's CSRF token (escaped for HTML)."""

    @functools.wraps(page)
    def wrapper(self, *args, **kwargs):
        session = self.session()
        if session is None:
            return _redirect("/workspace/login")
        return page(self, Organization.get_by_id(session["org"]), html.escape(session["csrf"]), *args, **kwargs)

    return wrapper


def form_post(page_name: str):
    """A workspace form: read, and checked against the session's CSRF token; a form that cannot be
    read shows the page `page_name` with the reason."""

    def decorate(handler):
        @functools.wraps(handler)
        def wrapper(self, **url_args):
            try:
                form = _form()
            except WorkspaceError as exc:
                return getattr(self, page_name)(error=str(exc), status=400)
            session = self._checked_session(form)
            if session is None:
                return _redirect("/workspace/login")
            return handler(self, form, session, **url_args)

        return wrapper

    return decorate


class Workspace:
    """Handlers for /workspace; `sessions` signs and reads the login cookie."""

    def __init__(self, sessions: Sessions, secret: bytes, allow_private_live: bool = False):
        self.sessions = sessions
        self.secret = secret
        self.allow_private_live = allow_private_live
        self.attempts_by_email = RateLimiter(SIGN_IN_RATE, SIGN_IN_BURST)
        self.attempts_by_address = RateLimiter(SIGN_IN_RATE, SIGN_IN_BURST)

    def session(self) -> dict | None:
        """The session's claims while its user exists in its organization and that organization is
        active (login's own rule, checked on every request so a suspension ends sessions at once)."""
        session = self.sessions.read(bottle.request.get_cookie(COOKIE))
        if session is None or not (User.select().join(Organization)
                                   .where((User.id == int(session["sub"])) & (Organization.id == session["org"])
                                          & (Organization.status == "active"))
                                   .exists()):
            return None
        return session

    def index(self):
        return _redirect("/workspace/keys" if self.session() else "/workspace/login")

    def login_page(self, error: str = "", status: int = 200, headers: dict | None = None):
        return _reply(_page("Sign in", f"""{_error(error)}
<form method="post" action="/workspace/login">
<label>Email <input name="email" type="email" required autocomplete="username"></label>
<label>Password <input name="password" type="password" required autocomplete="current-password"></label>
<button type="submit">Sign in</button></form>"""), status, headers)

    def login(self):
        try:
            form = _form()
        except WorkspaceError as exc:
            return self.login_page(str(exc), 400)
        email = _field(form, "email").strip().lower()
        try:
            self.attempts_by_address.check(bottle.request.environ.get("REMOTE_ADDR") or "")
            self.attempts_by_email.check(email)
        except LimitReached as limit:
            return self.login_page(f"Too many sign-in attempts; try again in {limit.retry_after} seconds.", 429,
                                   {"Retry-After": str(limit.retry_after)})
        user = authenticate_user(email, _field(form, "password"))
        if user is None or user.organization.status != "active":
            return self.login_page("Email or password is not right.", 401)
        token = self.sessions.issue(user)
        return _redirect("/workspace/keys", {"Set-Cookie": _cookie(token, SESSION_HOURS * 3600)})

    def logout(self):
        return _redirect("/workspace/login", {"Set-Cookie": _cookie("", 0)})

    @signed_in
    def keys_page(self, org: Organization, csrf: str, shown_key: str = "", error: str = "", status: int = 200):
        rows = "".join(
            f"<tr><td>{html.escape(key.name or '')}</td><td>{key.environment}</td>"
            f"<td><code>{html.escape(key.prefix)}…</code></td><td>{html.escape(', '.join(sorted(key.scope_set)))}</td>"
            f"<td>{'revoked' if key.revoked_at else 'active'}</td><td>"
            + ("" if key.revoked_at else
               f'<form method="post" action="/workspace/keys/{key.id}/revoke"><input type="hidden" name="csrf" '
               f'value="{csrf}"><button>Revoke</button></form>')
            + "</td></tr>"
            for key in org.api_keys.order_by(ApiKey.created_at.desc()))
        shown = (f'<p>Your new key. It is shown once: store it in a secret manager now.</p>'
                 f'<p class="key">{html.escape(shown_key)}</p>') if shown_key else ""
        scopes = "".join(f'<label><input type="checkbox" name="scopes" value="{s}"> {s}</label>' for s in SCOPES)
        return _reply(_page(f"API keys · {org.name}", f"""{shown}{_error(error)}
<table><tr><th>Name</th><th>Environment</th><th>Key</th><th>Scopes</th><th>Status</th><th></th></tr>{rows}</table>
<h2>Create a key</h2>
<form method="post" action="/workspace/keys"><input type="hidden" name="csrf" value="{csrf}">
<label>Name <input name="name" maxlength="200"></label>
<label>Environment <select name="environment"><option value="test">test</option>
<option value="live">live</option></select></label>{scopes}
<label>Expires (optional, UTC date) <input name="expires_on" type="date"></label>
<button type="submit">Create key</button></form>
{NAV.format(csrf=csrf)}"""), status)

    def _checked_session(self, form: dict) -> dict | None:
        session = self.session()
        if session is None or not hmac.compare_digest(_field(form, "csrf").encode(), session["csrf"].encode()):
            return None
        return session

    @form_post("keys_page")
    def create_key(self, form: dict, session: dict):
        org = Organization.get_by_id(session["org"])
        name = _field(form, "name")[:200]
        if customers.has_control_character(name):  # the rule for customer names
            return self.keys_page(error="The key was not created: name must not contain line breaks or other "
                                        "control characters.", status=400)
        expires_at = None
        if _field(form, "expires_on"):
            # YYYY-MM-DD only: fromisoformat also takes 20260101 and the week form 2026W011.
            day = _date(_field(form, "expires_on"))
            if day is None or day <= utcnow().date():
                return self.keys_page(error="The expiry date must be a date after today, as YYYY-MM-DD.",
                                      status=400)
            expires_at = dt.datetime.combine(day, dt.time(), tzinfo=dt.timezone.utc)
        try:
            _, plain = auth.create_key(org, _field(form, "environment"), form.get("scopes", []), self.secret,
                                       name=name, expires_at=expires_at)
        except ValueError as exc:
            return self.keys_page(error=f"The key was not created: {exc}.", status=400)
        return self.keys_page(shown_key=plain, status=201)

    @signed_in
    def customers_page(self, org: Organization, csrf: str, error: str = "", status: int = 200):
        rows = "".join(
            f"<tr><td>{customer.environment}</td><td><code>{html.escape(customer.reference)}</code></td>"
            f"<td>{html.escape(customer.name)}</td><td>{html.escape(customer.country_code or '')}</td>"
            f"<td>{customer.status}</td></tr>"
            for customer in org.customers.order_by(Customer.environment, Customer.reference).limit(500))
        return _reply(_page(f"Customers · {org.name}", f"""{_error(error)}
<table><tr><th>Environment</th><th>Reference</th><th>Name</th><th>Country</th><th>Status</th></tr>{rows}</table>
<h2>Add a customer</h2>
<form method="post" action="/workspace/customers"><input type="hidden" name="csrf" value="{csrf}">
<label>Environment <select name="environment"><option value="test">test</option>
<option value="live">live</option></select></label>
<label>Reference <input name="reference" required maxlength="120"></label>
<label>Name <input name="name" required maxlength="200"></label>
<label>Country (two letters, optional) <input name="country" maxlength="2" size="2"></label>
<button type="submit">Add customer</button></form>
{NAV.format(csrf=csrf)}"""), status)

    @form_post("customers_page")
    def create_customer(self, form: dict, session: dict):
        try:
            customers.create(Organization.get_by_id(session["org"]), _field(form, "environment"),
                             _field(form, "reference"), _field(form, "name"), _field(form, "country") or None)
        except customers.CustomerError as exc:
            return self.customers_page(error=f"Not added: {exc}.", status=400)
        return _redirect("/workspace/customers")

    @signed_in
    def webhooks_page(self, org: Organization, csrf: str, shown_secret: str = "", error: str = "",
                      status: int = 200):
        sections = []
        for environment in ("test", "live"):
            endpoint = webhooks.endpoint_for(org.id, environment)
            if endpoint is None:
                current = "<p>No endpoint: events are recorded but not sent.</p>"
                actions = ""
            else:
                reason = f" ({html.escape(endpoint.disabled_reason)})" if endpoint.disabled_reason else ""
                current = f"<p><code>{html.escape(endpoint.url)}</code>: {endpoint.status}{reason}</p>"
                actions = "".join(
                    f'<form method="post" action="/workspace/webhooks"><input type="hidden" name="csrf" '
                    f'value="{csrf}"><input type="hidden" name="environment" value="{environment}">'
                    f'<input type="hidden" name="action" value="{action}"><button>{label}</button></form>'
                    for action, label in (("rotate", "Rotate secret"), ("remove", "Remove")))
            rule = "https, public address" if environment == "live" else "http or https; localhost allowed"
            sections.append(f"""<h2>{environment}</h2>{current}{actions}
<form method="post" action="/workspace/webhooks"><input type="hidden" name="csrf" value="{csrf}">
<input type="hidden" name="environment" value="{environment}"><input type="hidden" name="action" value="set">
<label>URL ({rule}) <input name="url" type="url" size="60" maxlength="2048" required></label>
<button type="submit">Set endpoint</button></form>""")
        shown = (f'<p>The signing secret. It is shown once: give it to your receiver now.</p>'
                 f'<p class="key">{html.escape(shown_secret)}</p>') if shown_secret else ""
        return _reply(_page(f"Webhooks · {org.name}", shown + _error(error) + "".join(sections)
                            + NAV.format(csrf=csrf)), status)

    @form_post("webhooks_page")
    def change_webhook(self, form: dict, session: dict):
        environment, action = _field(form, "environment"), _field(form, "action")
        try:
            if action == "set":
                _, secret = webhooks.set_endpoint(session["org"], environment, _field(form, "url"),
                                                  allow_private_live=self.allow_private_live)
            elif action == "rotate":
                _, secret = webhooks.rotate_secret(session["org"], environment)
            elif action == "remove":
                webhooks.remove_endpoint(session["org"], environment)
                return _redirect("/workspace/webhooks")
            else:
                return self.webhooks_page(error="Unknown action.", status=400)
        except webhooks.WebhookError as exc:
            return self.webhooks_page(error=f"Not changed: {exc}.", status=400)
        return self.webhooks_page(shown_secret=secret)

    @form_post("keys_page")
    def revoke_key(self, form: dict, session: dict, key_id: str):
        key = ApiKey.get_or_none((ApiKey.id == key_id) & (ApiKey.organization == session["org"]))
        if key is None:
            return self.keys_page(error="No such key.", status=404)
        if key.revoked_at is None:
            key.revoked_at = utcnow()
            key.save()
        return _redirect("/workspace/keys")


def routes(app, secret: bytes) -> None:
    """The workspace's part of the URL map."""
    workspace = Workspace(Sessions(secret), secret, app.settings.webhook_allow_private_live)
    app.route("/workspace", "GET", workspace.index)
    app.route("/workspace/login", "GET", workspace.login_page)
    app.route("/workspace/login", "POST", workspace.login)
    app.route("/workspace/logout", "POST", workspace.logout)
    app.route("/workspace/keys", "GET", workspace.keys_page)
    app.route("/workspace/keys", "POST", workspace.create_key)
    app.route("/workspace/keys/<key_id>/revoke", "POST", workspace.revoke_key)
    app.route("/workspace/customers", "GET", workspace.customers_page)
    app.route("/workspace/customers", "POST", workspace.create_customer)
    app.route("/workspace/webhooks", "GET", workspace.webhooks_page)
    app.route("/workspace/webhooks", "POST", workspace.change_webhook)
