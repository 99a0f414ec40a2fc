"""The workspace's URL map, beside the API's (emissions/app.py): each path to its section's handler."""
from __future__ import annotations

import functools
import json
import logging
import re
import traceback
from pathlib import Path

import bottle

from .. import outages
from ..db import db
from .. import accounts
from .pages.audit import AuditPages
from .pages.calculations import CalculationPages
from .pages.customers import CustomerPages
from .pages.keys import KeyPages
from .pages.overview import OverviewPages
from .pages.shipments import ShipmentPages
from .pages.sign_in import SignInPages
from .pages.team import TeamPages
from .pages.webhooks import WebhookPages
from .rendering import render, request_id

STATIC = Path(__file__).resolve().parent.parent / "static"
STATIC_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".svg": "image/svg+xml"}

error_log = logging.getLogger("emissions.error")


class Workspace(SignInPages, OverviewPages, CalculationPages, ShipmentPages, CustomerPages, WebhookPages, KeyPages,
                TeamPages, AuditPages):
    """Handlers for /workspace: every section's pages over one shared state (session.Pages)."""

    def static(self, name: str):
        """A file of emissions/static (the stylesheet, the script, the icons), cached for five minutes."""
        path = STATIC / name
        if not re.fullmatch(r"[a-z0-9-]+\.(css|js|svg)", name) or not path.is_file():
            return render("error", 404, title="Not found", request_id=request_id())
        bottle.response.set_header("Content-Type", STATIC_TYPES[path.suffix])
        bottle.response.set_header("Cache-Control", "public, max-age=300")
        return path.read_bytes()

    def not_found(self, rest: str):
        """Any other workspace path: a page a person can read, not the API's JSON 404."""
        session = self.session()
        chrome = self.chrome(session, "") if session else {}
        return render("error", 404, title="Page not found", message="There is no workspace page at this address.",
                      request_id=request_id(), **chrome)


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
                              title="Temporarily unavailable", message=outages.MESSAGE, request_id=request_id())
            error_log.error(json.dumps({"request_id": request_id(), "traceback": traceback.format_exc()}))
            try:
                db.close()
            except Exception:
                pass
            return render("error", 500, title="Something went wrong", request_id=request_id())

    return wrapper


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
