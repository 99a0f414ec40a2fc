"""The team: the organization's users, adding and removing one, changing one's own password."""
from __future__ import annotations

import re

import bottle

from ... import accounts
from ...accounts import HashingBusy, Session, WorkspaceError
from ..rendering import cookie_header, redirect, render
from ..session import COOKIE, Pages, field, form_post, signed_in


class TeamPages(Pages):
    """/workspace/team, /workspace/team/<id>/remove and /workspace/password."""

    @signed_in
    def team_page(self, session: Session, error: str = "", status: int = 200, form: dict | None = None,
                  notice: str = "", headers: dict | None = None):
        return render("team", status, headers, title="Team", users=accounts.users(session.organization), error=error,
                      form=form or {},
                      notice=notice or self.flash.take_notice(session),
                      **self.chrome(session, "team"))

    @form_post
    def add_user(self, session: Session, form: dict):
        email = field(form, "email")
        try:
            user = accounts.create_user(session.organization, email, field(form, "password"), self.hasher,
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
        current, new = field(form, "current_password"), field(form, "new_password")
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
        return redirect("/workspace/team", {"Set-Cookie": cookie_header(COOKIE, token, accounts.SESSION_HOURS * 3600)})
