"""Each write has one home: the same action from the CLI and from the workspace records the same audit
details (only the actor differs), and the domain functions take the actor themselves."""
from __future__ import annotations

import datetime as dt
import json
import re

import pytest
from webtest import TestApp

from emissions import keys
from emissions import migrations
from emissions import models
from emissions.db import bind
from emissions import organizations
from emissions import workspace
from emissions.models import AuditEvent, Organization, User

PASSWORD = "correct horse battery"
OPERATOR = "ops@acme.example"


@pytest.fixture(autouse=True)
def migrated(request):
    """The CLI runs on a migrated database, as after `emissions migrate`."""
    if "emissions" in request.fixturenames:
        migrations.run(bind(request.getfixturevalue("config").database_url))


@pytest.fixture
def acme(app) -> Organization:
    org = organizations.create("Acme", slug="acme", actor="cli")
    workspace.create_user(org, OPERATOR, PASSWORD, actor="cli")
    return org


def csrf_token(page) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)


def signed_in(app) -> TestApp:
    """A browser signed in as the operator of acme (picking the answer up where the check runs aside)."""
    client = TestApp(app, extra_environ={"REMOTE_ADDR": "192.0.2.1"})
    page = client.get("/workspace/login")
    response = client.post("/workspace/login", {"csrf": csrf_token(page), "email": OPERATOR, "password": PASSWORD})
    while response.headers.get("Location", "").endswith("/workspace/login/wait") or "Signing you in" in response.text:
        response = client.get("/workspace/login/wait")
    assert response.status_int == 303 and response.headers["Location"].endswith("/workspace"), response.text
    return client


def recorded(action: str) -> list[dict]:
    """Each audit event of this action, oldest first, as what the two callers must agree on."""
    return [{"action": event.action, "environment": event.environment, "details": event.to_dict()["details"],
             "actor": event.actor}
            for event in AuditEvent.select().where(AuditEvent.action == action).order_by(AuditEvent.id)]


def same_but_the_actor(action: str) -> None:
    from_cli, from_workspace = recorded(action)
    assert (from_cli["actor"], from_workspace["actor"]) == ("cli", f"user:{OPERATOR}")
    del from_cli["actor"], from_workspace["actor"]
    assert from_cli == from_workspace


@pytest.mark.on_both
def test_a_key_created_and_revoked_from_the_cli_and_the_workspace_is_recorded_alike(app, acme, ok):
    expires_on = models.utcnow().date() + dt.timedelta(days=30)
    created = ok("key", "create", "--org", "acme", "--env", "test", "--scopes", "emissions:calculate,emissions:read",
                 "--name", "billing", "--expires-at", f"{expires_on.isoformat()}T00:00:00Z")
    client = signed_in(app)
    page = client.get("/workspace/keys")
    client.post("/workspace/keys", [("csrf", csrf_token(page)), ("name", "billing"), ("environment", "test"),
                                    ("scopes", "emissions:calculate"), ("scopes", "emissions:read"),
                                    ("expires_on", expires_on.isoformat())], status=303)
    same_but_the_actor("key.created")
    assert recorded("key.created")[0]["details"] == {
        "name": "billing", "scopes": ["emissions:calculate", "emissions:read"],
        "expires_at": f"{expires_on.isoformat()}T00:00:00.000Z"}

    ok("key", "revoke", created["id"])
    [other] = [key for key in keys.of_organization(acme) if key.id != created["id"]]
    page = client.get(f"/workspace/keys/{other.id}/revoke")
    client.post(f"/workspace/keys/{other.id}/revoke", {"csrf": csrf_token(page)}, status=303)
    same_but_the_actor("key.revoked")
    assert recorded("key.revoked")[0]["details"] == {"name": "billing"}


def test_a_user_added_and_removed_from_the_cli_and_the_workspace_is_recorded_alike(app, acme, emissions, ok):
    status, _, err = emissions("user", "create", "--org", "acme", "--email", "ada@acme.example", "--password",
                               PASSWORD)
    assert status == 0, err
    client = signed_in(app)
    page = client.get("/workspace/team")
    client.post("/workspace/team", {"csrf": csrf_token(page), "email": "bob@acme.example", "password": PASSWORD},
                status=303)
    created = recorded("user.created")[1:]  # the fixture's operator first
    assert [event["details"] for event in created] == [None, None]
    assert [event["actor"] for event in created] == ["cli", f"user:{OPERATOR}"]
    # Targets are the users' emails, from both.
    assert [event.target for event in AuditEvent.select().where(AuditEvent.action == "user.created")
            .order_by(AuditEvent.id)][1:] == ["ada@acme.example", "bob@acme.example"]

    ok("user", "delete", "ada@acme.example")
    bob = User.get(User.email == "bob@acme.example")
    page = client.get(f"/workspace/team/{bob.id}/remove")
    client.post(f"/workspace/team/{bob.id}/remove", {"csrf": csrf_token(page)}, status=303)
    same_but_the_actor("user.deleted")


def test_a_password_changed_from_the_cli_and_the_workspace_is_recorded_alike(app, acme, emissions, monkeypatch):
    client = signed_in(app)
    page = client.get("/workspace/team")
    client.post("/workspace/password", {"csrf": csrf_token(page), "current_password": PASSWORD,
                                        "new_password": "another long password"}, status=303)
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("yet another long password\n"))
    status, _, err = emissions("user", "set-password", OPERATOR, "--password-stdin")
    assert status == 0, err
    from_workspace, from_cli = recorded("user.password_changed")
    assert (from_workspace["actor"], from_cli["actor"]) == (f"user:{OPERATOR}", "cli")
    assert from_workspace["details"] == from_cli["details"]


# --- the domain functions themselves ---------------------------------------------------------------

@pytest.mark.on_both
def test_organizations_are_created_updated_suspended_and_reactivated_with_their_audit_records(app):
    org = organizations.create("Globex Corp", live_capacity=5, actor="user:someone")
    assert org.slug == "globex-corp" and organizations.find("globex-corp").id == org.id
    assert organizations.create("Globex Corp", actor="cli").slug == "globex-corp-2"
    assert organizations.update(org, entitled=False, test_capacity=None, actor="cli") == {"entitled": False}
    assert organizations.suspend(org, actor="cli") == {"status": "suspended"}
    assert organizations.suspend(org, actor="cli") == {}  # nothing changes, nothing is recorded
    assert organizations.reactivate(org, actor="cli") == {"status": "active"}
    events = [(event.action, event.actor, json.loads(event.details)) for event in
              AuditEvent.select().where(AuditEvent.target == "globex-corp").order_by(AuditEvent.id)]
    assert events == [
        ("org.created", "user:someone", {"name": "Globex Corp", "entitled": True, "live_capacity": 5}),
        ("org.updated", "cli", {"entitled": False}),
        ("org.updated", "cli", {"status": "suspended"}),
        ("org.updated", "cli", {"status": "active"}),
    ]
    assert [o.slug for o in organizations.listed()] == ["globex-corp", "globex-corp-2"]


@pytest.mark.parametrize("name, fields, message", [
    ("", {}, "name must be 1 to 200 characters"),
    ("Acme", {"slug": "Not A Slug"}, "slug must be lowercase letters, digits and dashes"),
    ("Acme", {"live_capacity": -1}, "live capacity must be a whole number"),
])
def test_an_organization_that_cannot_be_created_leaves_no_row_and_no_record(app, name, fields, message):
    with pytest.raises(organizations.OrganizationError, match=message):
        organizations.create(name, actor="cli", **fields)
    assert (Organization.select().count(), AuditEvent.select().count()) == (0, 0)


def test_a_key_that_cannot_be_created_leaves_no_row_and_no_record(app):
    org = organizations.create("Acme", slug="acme", actor="cli")
    for scopes, expires_at, message in ((["admin"], None, "unknown scope"), ([], None, "at least one scope"),
                                        (["emissions:read"], models.utcnow() - dt.timedelta(seconds=1),
                                         "is not in the future")):
        with pytest.raises(keys.ApiKeyError, match=message):
            keys.create(org, "test", scopes, secret=b"s" * 32, expires_at=expires_at, actor="cli")
    assert (models.ApiKey.select().count(), AuditEvent.select().where(AuditEvent.action == "key.created").count()) \
        == (0, 0)


def test_revoking_a_key_twice_records_it_once(app):
    org = organizations.create("Acme", slug="acme", actor="cli")
    key, _ = keys.create(org, "live", ["emissions:read"], secret=b"s" * 32, actor="cli")
    assert keys.status(key) == "active"
    assert keys.revoke(key, actor="cli") is True and keys.revoke(key, actor="cli") is False
    assert keys.status(keys.find(key.id)) == "revoked" and keys.find(key.id, org) is not None
    assert AuditEvent.select().where(AuditEvent.action == "key.revoked").count() == 1
