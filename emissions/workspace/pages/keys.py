"""The API keys: the list, a new key shown once, revoking one."""
from __future__ import annotations

import datetime as dt

from ... import text
from ... import keys
from ... import clock
from ...models import SCOPES
from .. import insights
from ...accounts import Session
from ..rendering import redirect, render
from ..session import Pages, field, form_post, signed_in


class KeyPages(Pages):
    """/workspace/keys, /workspace/keys/new and /workspace/keys/<id>/revoke."""

    @signed_in
    def keys_page(self, session: Session, error: str = "", status: int = 200, form: dict | None = None,
                  shown: dict | None = None):
        listed = keys.of_organization(session.organization, session.environment, newest_first=True)
        return render("keys", status, title="API keys", keys=listed, scopes=SCOPES, error=error,
                      form=form or {"scopes": list(SCOPES[:2])}, shown=shown, now=clock.now(),
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
        kept = {"name": field(form, "name"), "environment": field(form, "environment"),
                "scopes": form.get("scopes", []), "expires_on": field(form, "expires_on")}
        name = kept["name"][:200]
        if text.problem(name):
            return self.keys_page(error=f"The key was not created: name {text.problem(name)}.", status=400,
                                  form=kept)
        expires_at = None
        if kept["expires_on"]:
            # YYYY-MM-DD only: fromisoformat also takes 20260101 and the week form 2026W011.
            day = insights.parse_date(kept["expires_on"])
            if day is None or day <= clock.today():
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
