"""Each write has one home: the CLI and the workspace record the same audit details for the same action."""
from __future__ import annotations

import json

from emissions import workspace
from emissions.models import AuditEvent, Organization
from conftest import PASSWORD, make_org
from helpers import csrf_token, sign_in

HOOK = "http://127.0.0.1:9/hook"


def recorded(slug: str) -> list[tuple]:
    """The organization's audit events, oldest first, as (actor, action, target, environment, details)."""
    return [(event.actor, event.action, event.target, event.environment, json.loads(event.details or "null"))
            for event in AuditEvent.select().join(Organization).where(Organization.slug == slug)
            .order_by(AuditEvent.id)]


def test_customer_and_webhook_writes_record_the_same_details_from_the_cli_and_the_workspace(ok, client, monkeypatch):
    monkeypatch.setenv("WEBHOOK_ALLOW_PRIVATE_TEST", "true")  # as the `config` fixture, which the workspace uses
    ok("org", "create", "--name", "Acme", "--slug", "acme")
    ok("customer", "create", "--org", "acme", "--env", "test", "--reference", "c-1", "--name", "C One",
       "--country", "gb")
    ok("customer", "update", "--org", "acme", "--env", "test", "--reference", "c-1", "--name", "C Two",
       "--country", "fr")
    ok("customer", "update", "--org", "acme", "--env", "test", "--reference", "c-1", "--status", "suspended")
    ok("webhook", "set", "--org", "acme", "--env", "test", "--url", HOOK)
    ok("webhook", "rotate", "--org", "acme", "--env", "test")

    workspace.create_user(make_org("globex"), "ops@globex.example", PASSWORD, actor="cli")
    sign_in(client, email="ops@globex.example")
    page = client.get("/workspace/customers")
    client.post("/workspace/customers", {"csrf": csrf_token(page), "reference": "c-1", "name": "C One",
                                         "country": "gb"}, status=303)
    client.post("/workspace/customers/c-1/change", {"csrf": csrf_token(page), "action": "edit", "name": "C Two",
                                                    "country": "fr"}, status=303)
    client.post("/workspace/customers/c-1/change", {"csrf": csrf_token(page), "action": "suspend"}, status=303)
    client.post("/workspace/webhooks", {"csrf": csrf_token(page), "action": "set", "url": HOOK}, status=303)
    client.post("/workspace/webhooks", {"csrf": csrf_token(page), "action": "rotate"}, status=303)

    from_cli = [event for event in recorded("acme") if event[1] != "org.created"]
    from_workspace = [event for event in recorded("globex") if event[1] != "user.created"]
    for event in from_cli + from_workspace:  # the overlap ends a day after each rotation: a moment apart
        if event[1] == "endpoint.rotated":
            assert event[4]["overlap_ends_at"].endswith("Z")
            event[4]["overlap_ends_at"] = "a day on"
    assert {event[0] for event in from_cli} == {"cli"}
    assert {event[0] for event in from_workspace} == {"user:ops@globex.example"}
    assert [event[1:] for event in from_cli] == [event[1:] for event in from_workspace] == [
        ("customer.created", "c-1", "test", {"name": "C One", "country_code": "GB", "status": "active"}),
        ("customer.updated", "c-1", "test", {"name": "C Two", "country_code": "FR"}),
        ("customer.updated", "c-1", "test", {"status": "suspended"}),
        ("endpoint.set", HOOK, "test", None),
        ("endpoint.rotated", HOOK, "test", {"overlap_ends_at": "a day on"})]
