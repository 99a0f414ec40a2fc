"""The webhook endpoint: set, rotate, remove, test, and the recent events with their deliveries."""
from __future__ import annotations

import re

from ...webhooks import endpoints as webhook_endpoints
from ...webhooks import events as webhook_events
from .. import insights
from ...accounts import Session
from ..rendering import redirect, render
from ..session import Pages, field, form_post, signed_in


class WebhookPages(Pages):
    """/workspace/webhooks and an event's redelivery."""

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
        org, environment, action = session.organization, session.environment, field(form, "action")

        def show(endpoint, secret: str) -> None:
            """No secret made that is never shown: the flash is kept in the change's own transaction."""
            self.flash.put(session, "secret", {"secret": secret})

        try:
            if action == "set":
                webhook_endpoints.set_endpoint(org.id, environment, field(form, "url"), actor=session.actor,
                                               allow_private_live=self.allow_private_live,
                                               allow_private_test=self.allow_private_test,
                                               signature=field(form, "signature") or None, then=show)
            elif action == "rotate":
                webhook_endpoints.rotate_secret(org.id, environment, actor=session.actor, then=show)
            elif action == "remove":
                webhook_endpoints.remove_endpoint(org.id, environment, actor=session.actor)
                return redirect("/workspace/webhooks")
            elif action == "test":
                current = webhook_endpoints.endpoint_for(org.id, environment)
                event = webhook_events.send_test_event(org.id, environment, actor=session.actor)
                if current is not None and current.down_since is not None:
                    self.flash.put_notice(session, f"Test event {event.id} queued, listed below, marked test. "
                                                   "The endpoint is not answering: its oldest waiting delivery "
                                                   "is tried again within a few seconds, and the test event "
                                                   "follows once the receiver answers.")
                else:
                    self.flash.put_notice(session, f"Test event {event.id} queued: it is delivered within a "
                                                   "few seconds and listed below, marked test.")
                return redirect("/workspace/webhooks")
            else:
                return self.webhooks_page(error="Unknown action.", status=400)
        except webhook_endpoints.WebhookError as exc:
            return self.webhooks_page(error=f"Not changed: {exc}.", status=400, url=field(form, "url"))
        return redirect("/workspace/webhooks")

    @form_post
    def redeliver(self, session: Session, form: dict, event_id: str):
        event = insights.event(session.organization.id, session.environment, event_id)
        if event is None:
            return self.webhooks_page(error="No such event.", status=404)
        try:
            webhook_events.redeliver(event.id, actor=session.actor)  # a pending one at once, a finished one for a new round
        except webhook_endpoints.WebhookError as exc:
            return self.webhooks_page(error=f"Not queued: {exc}.", status=400)
        back = field(form, "next")
        if re.fullmatch(r"/workspace/calculations/[0-9a-f-]{36}", back):
            return redirect(back)  # the calculation's page shows the event's new status
        self.flash.put_notice(session, f"Event {event.id} queued for delivery again.")
        return redirect("/workspace/webhooks")
