"""The workspace: sign in, create keys (shown once), revoke them; sessions are signed JWTs."""
from __future__ import annotations

import datetime as dt
import re

import jwt
import pytest

from emissions import webhooks
from emissions import workspace
from conftest import logistics_body, make_customer, make_factor, make_org
from emissions.models import ApiKey, Organization, User, WebhookEndpoint, utcnow

PASSWORD = "correct horse battery"


@pytest.fixture
def acme_user(app):
    org = make_org("acme")
    make_customer(org)
    make_factor()
    workspace.create_user(org, "Ops@Acme.example", PASSWORD)
    return org


def sign_in(client, email="ops@acme.example", password=PASSWORD, status=303):
    return client.post("/workspace/login", {"email": email, "password": password}, status=status)


def csrf_token(page) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)


def create_key(client, environment="test", scopes=("emissions:calculate", "emissions:read"), status=201,
               name="ci", **fields):
    page = client.get("/workspace/keys")
    form = [("csrf", csrf_token(page)), ("name", name), ("environment", environment)]
    form += [("scopes", scope) for scope in scopes] + list(fields.items())
    return client.post("/workspace/keys", form, status=status)


def test_signing_in_sets_a_strict_http_only_session_cookie(client, acme_user):
    response = sign_in(client)
    cookie = response.headers["Set-Cookie"]
    assert response.headers["Location"].endswith("/workspace/keys")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/workspace" in cookie
    assert client.get("/workspace/keys").status_int == 200


def test_a_wrong_password_or_unknown_email_gets_the_same_answer(client, acme_user):
    wrong = sign_in(client, password="not the password", status=401)
    unknown = sign_in(client, email="nobody@acme.example", status=401)
    assert "Email or password is not right." in wrong.text
    assert wrong.text == unknown.text
    assert "Set-Cookie" not in wrong.headers


def test_pages_without_a_session_redirect_to_sign_in(client, acme_user):
    assert client.get("/workspace/keys", status=303).headers["Location"].endswith("/workspace/login")
    client.set_cookie(workspace.COOKIE, "forged.token.value")
    assert client.get("/workspace/keys", status=303).headers["Location"].endswith("/workspace/login")


def test_a_created_key_is_shown_once_and_works_against_the_api(client, acme_user):
    sign_in(client)
    created = create_key(client)
    plain = re.search(r'<p class="key">(service_test_[0-9A-Za-z]+)</p>', created.text).group(1)
    assert plain not in client.get("/workspace/keys").text
    key = ApiKey.get()
    assert key.name == "ci" and key.environment == "test"
    assert key.scope_set == {"emissions:calculate", "emissions:read"}
    assert plain not in (key.key_hash, key.prefix)
    response = client.post_json("/v1/emissions/logistics", logistics_body(),
                                headers={"Authorization": f"Bearer {plain}", "Idempotency-Key": "ws-1"})
    assert response.status_int == 201


def test_a_live_key_is_created_separately_with_the_live_prefix(client, acme_user):
    sign_in(client)
    created = create_key(client, environment="live")
    assert re.search(r'<p class="key">service_live_[0-9A-Za-z]{40}</p>', created.text)


def test_creating_a_key_without_scopes_or_with_an_unknown_scope_is_refused(client, acme_user):
    sign_in(client)
    assert "at least one scope" in create_key(client, scopes=(), status=400).text
    assert "unknown scope" in create_key(client, scopes=("admin:everything",), status=400).text
    assert ApiKey.select().count() == 0


def test_a_form_without_the_session_csrf_token_is_refused(client, acme_user):
    sign_in(client)
    client.post("/workspace/keys", {"csrf": "guess", "environment": "test", "scopes": "emissions:read"},
                status=303)
    assert ApiKey.select().count() == 0


def test_revoking_a_key_stops_it_at_the_api(client, acme_user):
    sign_in(client)
    plain = re.search(r'<p class="key">([^<]+)</p>', create_key(client).text).group(1)
    key = ApiKey.get()
    page = client.get("/workspace/keys")
    client.post(f"/workspace/keys/{key.id}/revoke", {"csrf": csrf_token(page)}, status=303)
    response = client.get("/v1/calculations/00000000-0000-4000-8000-000000000000",
                          headers={"Authorization": f"Bearer {plain}"}, status=401)
    assert response.json["error"]["code"] == "API_KEY_REVOKED"


def test_another_organizations_key_cannot_be_revoked(client, acme_user, secret):
    from conftest import make_key
    other = make_org("globex")
    make_key(other, secret)
    other_key = ApiKey.get(ApiKey.organization == other)
    sign_in(client)
    page = client.get("/workspace/keys")
    client.post(f"/workspace/keys/{other_key.id}/revoke", {"csrf": csrf_token(page)}, status=404)
    assert ApiKey.get_by_id(other_key.id).revoked_at is None


def test_a_session_expires_after_eight_hours(acme_user, secret):
    now = utcnow()
    sessions = workspace.Sessions(secret, clock=lambda: now)
    token = sessions.issue(workspace.User.get())
    assert sessions.read(token)["org"] == acme_user.id
    later = workspace.Sessions(secret, clock=lambda: now + dt.timedelta(hours=8, seconds=1))
    assert later.read(token) is None


def test_a_token_signed_with_another_key_or_algorithm_is_refused(acme_user, secret):
    sessions = workspace.Sessions(secret)
    claims = {"sub": "1", "org": acme_user.id, "csrf": "x", "exp": int(utcnow().timestamp()) + 60}
    assert sessions.read(jwt.encode(claims, "another key of thirty-two bytes or more", algorithm="HS256")) is None
    assert sessions.read(jwt.encode(claims, None, algorithm="none")) is None


def test_workspace_pages_are_html_and_never_cached(client, acme_user):
    page = client.get("/workspace/login")
    assert page.headers["Content-Type"].startswith("text/html")
    assert page.headers["Cache-Control"] == "no-store"
    assert page.headers["X-Frame-Options"] == "DENY"
    assert not [name for name in page.headers if name.lower().startswith("access-control")]


def change_webhook(client, environment="test", action="set", url="http://127.0.0.1:9/hook", status=200):
    page = client.get("/workspace/webhooks")
    form = {"csrf": csrf_token(page), "environment": environment, "action": action, "url": url}
    return client.post("/workspace/webhooks", form, status=status)


def test_setting_a_test_webhook_shows_its_secret_once_and_signs_with_it(client, acme_user):
    sign_in(client)
    page = change_webhook(client)
    secret = re.search(r'<p class="key">(whsec_[^<]+)</p>', page.text).group(1)
    endpoint = webhooks.endpoint_for(acme_user.id, "test")
    assert endpoint.url == "http://127.0.0.1:9/hook" and endpoint.secret == secret
    assert secret not in client.get("/workspace/webhooks").text
    rotated = change_webhook(client, action="rotate")
    new_secret = re.search(r'<p class="key">(whsec_[^<]+)</p>', rotated.text).group(1)
    assert new_secret != secret and webhooks.endpoint_for(acme_user.id, "test").secret == new_secret


def test_a_live_webhook_must_be_https_and_public(client, acme_user):
    sign_in(client)
    page = change_webhook(client, environment="live", url="http://example.com/hook", status=400)
    assert "Not changed" in page.text
    change_webhook(client, environment="live", url="https://127.0.0.1/hook", status=400)
    assert webhooks.endpoint_for(acme_user.id, "live") is None


def test_removing_a_webhook_and_a_form_without_csrf(client, acme_user):
    sign_in(client)
    change_webhook(client)
    client.post("/workspace/webhooks", {"csrf": "guess", "environment": "test", "action": "remove"}, status=303)
    assert webhooks.endpoint_for(acme_user.id, "test") is not None
    change_webhook(client, action="remove", status=303)
    assert webhooks.endpoint_for(acme_user.id, "test") is None


def test_a_csrf_field_with_non_ascii_text_is_refused_not_a_crash(client, acme_user):
    sign_in(client)
    client.post("/workspace/keys", {"csrf": "é", "environment": "test", "scopes": "emissions:read"}, status=303)
    assert ApiKey.select().count() == 0


def test_sign_in_attempts_are_throttled_per_email(client, acme_user):
    for _ in range(workspace.SIGN_IN_BURST):
        sign_in(client, password="wrong password!", status=401)
    refused = sign_in(client, status=429)
    assert "Too many sign-in attempts" in refused.text and int(refused.headers["Retry-After"]) >= 1


def test_the_session_cookie_is_secure_when_served_over_https(client, acme_user):
    response = client.post("/workspace/login", {"email": "ops@acme.example", "password": PASSWORD},
                           extra_environ={"wsgi.url_scheme": "https"}, status=303)
    assert "; Secure" in response.headers["Set-Cookie"]
    assert "; Secure" not in sign_in(client).headers["Set-Cookie"]


def add_customer(client, status=303, **fields):
    page = client.get("/workspace/customers")
    form = {"csrf": csrf_token(page), "environment": "test", "reference": "cust-2", "name": "Initech",
            "country": "de", **fields}
    return client.post("/workspace/customers", form, status=status)


def test_a_customer_added_in_the_workspace_is_readable_through_the_api(client, acme_user, secret):
    from conftest import make_key
    sign_in(client)
    add_customer(client)
    assert "Initech" in client.get("/workspace/customers").text
    key = make_key(acme_user, secret)
    response = client.get("/v1/customers/cust-2", headers={"Authorization": f"Bearer {key}"})
    assert response.json == {"reference": "cust-2", "name": "Initech", "status": "active",
                             "country_code": "DE", "analytics": None}


def test_a_bad_or_duplicate_customer_is_refused_with_the_reason(client, acme_user):
    sign_in(client)
    assert "reference must start with a letter or digit" in add_customer(client, reference="-x", status=400).text
    assert "already exists" in add_customer(client, reference="cust-1", status=400).text
    client.post("/workspace/customers", {"csrf": "guess", "environment": "test", "reference": "c-9", "name": "N"},
                status=303)
    assert [c.reference for c in workspace.Customer.select().order_by(workspace.Customer.id)] == ["cust-1"]


# --- sessions that must end, and forms that must be refused -----------------------------------

def test_a_session_ends_when_its_organization_is_suspended(client, acme_user):
    sign_in(client)
    csrf = csrf_token(client.get("/workspace/keys"))
    Organization.update(status="suspended").where(Organization.id == acme_user.id).execute()
    assert client.get("/workspace/keys", status=303).headers["Location"].endswith("/workspace/login")
    client.post("/workspace/keys", {"csrf": csrf, "environment": "test", "scopes": "emissions:read"}, status=303)
    client.post("/workspace/customers", {"csrf": csrf, "environment": "test", "reference": "c-9", "name": "N"},
                status=303)
    client.post("/workspace/webhooks", {"csrf": csrf, "environment": "test", "action": "set",
                                        "url": "http://127.0.0.1:9/hook"}, status=303)
    assert (ApiKey.select().count(), workspace.Customer.select().count(), WebhookEndpoint.select().count()) == (
        0, 1, 0)


def test_a_session_ends_when_its_user_is_deleted(client, acme_user):
    sign_in(client)
    csrf = csrf_token(client.get("/workspace/keys"))
    User.delete().execute()
    assert client.get("/workspace/keys", status=303).headers["Location"].endswith("/workspace/login")
    client.post("/workspace/keys", {"csrf": csrf, "environment": "test", "scopes": "emissions:read"}, status=303)
    assert ApiKey.select().count() == 0


def session_claims(**changes) -> dict:
    """The claims Sessions.issue writes for the acme user, with `changes` (None removes a claim)."""
    user = User.get()
    claims = {"sub": str(user.id), "org": user.organization_id, "csrf": "c" * 22,
              "iat": int(utcnow().timestamp()), "exp": int(utcnow().timestamp()) + 3600, **changes}
    return {name: value for name, value in claims.items() if value is not None}


@pytest.mark.parametrize("changes", [
    pytest.param({"exp": str(int(utcnow().timestamp()) + 3600)}, id="string-exp"),
    pytest.param({"exp": utcnow().timestamp() + 3600.5}, id="float-exp"),
    pytest.param({"org": None}, id="missing-org"),
    pytest.param({"org": 999}, id="unknown-org"),
    pytest.param({"org": "1"}, id="string-org"),
    pytest.param({"org": True}, id="boolean-org"),
    pytest.param({"org": 2 ** 70}, id="huge-org"),
    pytest.param({"sub": "abc"}, id="non-numeric-sub"),
    pytest.param({"sub": "999"}, id="unknown-sub"),
    pytest.param({"sub": "9" * 30}, id="huge-sub"),
    pytest.param({"csrf": 123}, id="number-csrf"),
    pytest.param({"csrf": ["c" * 22]}, id="list-csrf"),
    pytest.param({"csrf": ""}, id="empty-csrf"),
    pytest.param({"csrf": None}, id="missing-csrf"),
])
def test_a_signed_session_with_malformed_claims_is_signed_out_not_a_crash(client, acme_user, secret, changes):
    token = jwt.encode(session_claims(**changes), workspace.Sessions(secret).key, algorithm="HS256")
    client.set_cookie(workspace.COOKIE, token)
    assert client.get("/workspace/keys", status=303).headers["Location"].endswith("/workspace/login")
    assert client.get("/workspace", status=303).headers["Location"].endswith("/workspace/login")
    csrf = changes.get("csrf", "c" * 22)
    client.post("/workspace/keys", {"csrf": csrf if isinstance(csrf, str) else "", "environment": "test",
                                    "scopes": "emissions:read"}, status=303)
    assert ApiKey.select().count() == 0


def test_a_signed_session_of_the_shape_issued_is_signed_in(client, acme_user, secret):
    client.set_cookie(workspace.COOKIE, jwt.encode(session_claims(), workspace.Sessions(secret).key,
                                                   algorithm="HS256"))
    assert client.get("/workspace/keys").status_int == 200


def test_a_session_naming_another_organization_than_its_users_is_signed_out(client, acme_user, secret):
    other = make_org("globex")
    client.set_cookie(workspace.COOKIE, jwt.encode(session_claims(org=other.id), workspace.Sessions(secret).key,
                                                   algorithm="HS256"))
    assert client.get("/workspace/keys", status=303).headers["Location"].endswith("/workspace/login")


@pytest.mark.on_both
@pytest.mark.parametrize("name, message", [
    pytest.param("ci\x00", "the form field &#x27;name&#x27; must not contain NUL characters", id="nul"),
    pytest.param("line\nbreak", "name must not contain line breaks or other control characters", id="line-break"),
    pytest.param("bell\x07", "name must not contain line breaks or other control characters", id="bell"),
    pytest.param("c1\x85", "name must not contain line breaks or other control characters", id="c1-control"),
])
def test_a_key_name_with_control_characters_is_refused(client, acme_user, name, message):
    sign_in(client)
    assert message in create_key(client, name=name, status=400).text
    assert ApiKey.select().count() == 0


@pytest.mark.on_both
@pytest.mark.parametrize("action", ["rotate", "remove"])
def test_a_webhook_environment_with_nul_is_refused_not_a_crash(client, acme_user, action):
    sign_in(client)
    page = client.get("/workspace/webhooks")
    refused = client.post("/workspace/webhooks", {"csrf": csrf_token(page), "environment": "te\x00st",
                                                  "action": action}, status=400)
    assert "the form field &#x27;environment&#x27; must not contain NUL characters" in refused.text


@pytest.mark.on_both
def test_a_sign_in_with_nul_in_the_email_is_refused_not_a_crash(client, acme_user):
    refused = sign_in(client, email="ops@acme.example\x00", status=400)
    assert "the form field &#x27;email&#x27; must not contain NUL characters" in refused.text


@pytest.mark.parametrize("expires_on", ["2026W011", "2026-W01-1", "20260101", "2020-01-01", "yesterday", "today"])
def test_a_key_expiry_must_be_a_future_yyyy_mm_dd_date(client, acme_user, expires_on):
    today = utcnow().date()
    expires_on = {"yesterday": (today - dt.timedelta(days=1)).isoformat(),
                  "today": today.isoformat()}.get(expires_on, expires_on)
    sign_in(client)
    page = create_key(client, expires_on=expires_on, status=400)
    assert "The expiry date must be a date after today, as YYYY-MM-DD." in page.text
    assert ApiKey.select().count() == 0


def test_a_key_expiring_tomorrow_is_created_with_that_expiry(client, acme_user):
    tomorrow = utcnow().date() + dt.timedelta(days=1)
    sign_in(client)
    create_key(client, expires_on=tomorrow.isoformat())
    assert ApiKey.get().expires_at == dt.datetime.combine(tomorrow, dt.time(), tzinfo=dt.timezone.utc)
