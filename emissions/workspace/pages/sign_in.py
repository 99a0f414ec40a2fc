"""Signing in and out, and the switch between the test and live environments."""
from __future__ import annotations

import hmac
import re
import secrets

import bottle

from ... import accounts
from ...accounts import HashingBusy, Session, WorkspaceError
from ..rendering import cookie_header, redirect, render
from ..session import (COOKIE, PENDING_COOKIE, SIGN_IN_COOKIE, Pages, PendingSignIns, field, form_post,
                       read_form)


class SignInPages(Pages):
    """/workspace/login, its wait page, /workspace/logout and /workspace/environment."""

    def login_page(self, error: str = "", status: int = 200, email: str = "", headers: dict | None = None):
        # The form's token is kept while its cookie lasts, so a second open tab still signs in.
        token = bottle.request.get_cookie(SIGN_IN_COOKIE) or ""
        if not re.fullmatch(r"[A-Za-z0-9_-]{32}", token):
            token = secrets.token_urlsafe(24)
        cookie = cookie_header(SIGN_IN_COOKIE, token, 3600, path="/workspace/login")
        return render("login", status, {"Set-Cookie": cookie, **(headers or {})}, title="Sign in", error=error,
                      email=email, csrf=token)

    def login(self):
        try:
            form = read_form()
        except WorkspaceError as exc:
            return self.login_page(str(exc), 400)
        email = accounts.normal_email(field(form, "email"))
        expected = bottle.request.get_cookie(SIGN_IN_COOKIE) or ""
        if not expected or not hmac.compare_digest(field(form, "csrf").encode(), expected.encode()):
            return self.login_page("The sign-in form expired; please sign in again.", 400, email)
        if len(email) > accounts.MAX_EMAIL:
            return self.login_page("Email or password is not right.", 401)
        address = bottle.request.environ.get("REMOTE_ADDR") or ""
        wait = self.throttle.wait(email, address)
        if wait:
            return self.login_page(f"Too many sign-in attempts; try again in {wait} seconds.", 429, email,
                                   {"Retry-After": str(wait)})
        user, (candidate, stored) = accounts.password_check(email, field(form, "password"))
        try:
            future = self.hasher.submit(accounts.check_password, candidate, stored)
            if self.wait_inline:
                return self._signed_in(self.hasher.wait(future) and user, email, address)
        except HashingBusy as busy:
            return self.login_page("Signing in is busy; try again in a moment.", 429, email,
                                   {"Retry-After": str(busy.retry_after)})
        ticket = self.pending.add(future, user.id if user else None, email, address)
        return redirect("/workspace/login/wait", {"Set-Cookie": cookie_header(PENDING_COOKIE, ticket,
                                                                              PendingSignIns.SECONDS,
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
        return redirect("/workspace", {"Set-Cookie": cookie_header(COOKIE, token, accounts.SESSION_HOURS * 3600)})

    def logout(self):
        session = self.session()
        try:
            form = read_form()
        except WorkspaceError:
            form = {}
        if session is not None and not hmac.compare_digest(field(form, "csrf").encode(), session.csrf.encode()):
            return redirect("/workspace")  # a cross-site form cannot sign anyone out
        self.sessions.end(bottle.request.get_cookie(COOKIE))
        return redirect("/workspace/login", {"Set-Cookie": cookie_header(COOKIE, "", 0)})

    @form_post
    def switch_environment(self, session: Session, form: dict):
        environment = field(form, "environment")
        if environment in ("test", "live"):
            self.sessions.switch_environment(session, environment)
        back = field(form, "next")
        # Only a workspace list page: an id of one environment means nothing in the other.
        back = back if re.fullmatch(r"/workspace(/[a-z]+)?", back) else "/workspace"
        return redirect(back)
