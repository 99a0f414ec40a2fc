"""The workspace: sign in (CSRF, throttling, hashing off the serving threads), server-side sessions,
keys shown once after a redirect, customers, webhooks, team and audit, through WebTest."""
from __future__ import annotations

import base64
import datetime as dt
import re
import threading
import time

import jwt
import pytest
from webtest import TestApp

from emissions.webhooks import delivery as webhook_delivery
from emissions.webhooks import endpoints as webhook_endpoints
from emissions.webhooks import events as webhook_events
from emissions import text
from emissions import workspace
from emissions.app import create_app
from emissions.models import (ApiKey, AuditEvent, Calculation, Customer, Organization, User, WebhookEndpoint,
                              WebhookEvent, WorkspaceFlash, WorkspaceSession, utcnow)
from emissions import accounts
from conftest import logistics_body, make_customer, make_factor, make_key, make_org, stop_the_sign_in_clock, workspace_of

PASSWORD = "correct horse battery"


@pytest.fixture
def acme_user(app):
    org = make_org("acme")
    make_customer(org)
    make_factor()
    workspace.create_user(org, "Ops@Acme.example", PASSWORD, actor="cli")
    return org


def sign_in(client, email="ops@acme.example", password=PASSWORD, status=303, address="192.0.2.1", **environ):
    """Sign in through the form; where the password is checked off the serving thread, pick the
    answer up from /workspace/login/wait as the browser does (its page looks again at once)."""
    environ = {"REMOTE_ADDR": address, **environ}
    page = client.get("/workspace/login", extra_environ=environ)
    response = client.post("/workspace/login", {"csrf": csrf_token(page), "email": email, "password": password},
                           extra_environ=environ, expect_errors=True)
    for _ in range(1000):
        waiting = response.status_int == 303 and response.headers["Location"].endswith("/workspace/login/wait")
        if not (waiting or "Signing you in" in response.text):
            break
        if not waiting:
            time.sleep(0.005)
        response = client.get("/workspace/login/wait", extra_environ=environ, expect_errors=True)
    assert response.status_int == status, response.text
    return response


def csrf_token(page) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)


def create_key(client, environment="test", scopes=("emissions:calculate", "emissions:read"), status=303,
               name="ci", **fields):
    """Post the key form; on success follow the redirect to the page that shows the key once."""
    page = client.get("/workspace/keys")
    form = [("csrf", csrf_token(page)), ("name", name), ("environment", environment)]
    form += [("scopes", scope) for scope in scopes] + list(fields.items())
    response = client.post("/workspace/keys", form, status=status)
    return response.follow() if status == 303 else response


def shown_key(page) -> str:
    return re.search(r'<code id="new-key">(service_(?:test|live)_[0-9A-Za-z]+)</code>', page.text).group(1)


# --- signing in and out ----------------------------------------------------------------------------

def test_signing_in_sets_a_strict_http_only_session_cookie_and_opens_the_overview(client, acme_user):
    response = sign_in(client)
    cookie = next(value for name, value in response.headerlist
                  if name == "Set-Cookie" and value.startswith(workspace.COOKIE))
    assert response.headers["Location"].endswith("/workspace")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/workspace" in cookie
    overview = client.get("/workspace")
    assert "Overview" in overview.text and "Acme" in overview.text
    assert User.get().last_sign_in_at is not None


@pytest.mark.on_both
def test_the_password_is_checked_off_the_serving_thread_with_or_without_waiting_there(client, app, acme_user):
    # SQLite serves on one thread: the sign-in answers at once and the browser picks the result up;
    # PostgreSQL's eight threads outnumber what the hashing pool holds, so the sign-in waits there.
    one_thread = app.settings.serving_threads == 1
    assert workspace_of(app).wait_inline is not one_thread
    page = client.get("/workspace/login")
    first = client.post("/workspace/login", {"csrf": csrf_token(page), "email": "ops@acme.example",
                                             "password": PASSWORD}, status=303)
    assert first.headers["Location"].endswith("/workspace/login/wait" if one_thread else "/workspace")
    sign_in(client)
    assert client.get("/workspace").status_int == 200


@pytest.mark.parametrize("threads, workers, inline", [(1, 1, False), (3, 1, False), (4, 1, True), (1, 2, True)])
def test_a_sign_in_waits_on_its_thread_only_where_the_api_keeps_a_thread_or_process(secret, threads, workers,
                                                                                     inline):
    found = workspace.Workspace(workspace.Sessions(secret), secret, serving_threads=threads, workers=workers)
    assert found.wait_inline is inline


def test_a_wait_without_a_pending_sign_in_goes_back_to_the_form(client, acme_user):
    assert "The sign-in was interrupted" in client.get("/workspace/login/wait", status=400).text


def test_a_sign_in_without_the_forms_csrf_token_is_refused(client, acme_user):
    client.get("/workspace/login")
    refused = client.post("/workspace/login", {"csrf": "guess", "email": "ops@acme.example",
                                               "password": PASSWORD}, status=400)
    assert "The sign-in form expired" in refused.text
    assert WorkspaceSession.select().count() == 0


def test_a_sign_in_form_opened_in_two_tabs_signs_in_from_either(client, acme_user):
    first, second = client.get("/workspace/login"), client.get("/workspace/login")
    assert csrf_token(first) == csrf_token(second)
    client.post("/workspace/login", {"csrf": csrf_token(first), "email": "ops@acme.example", "password": PASSWORD},
                status=303)


def test_a_wrong_password_or_unknown_email_gets_the_same_answer(client, acme_user):
    wrong = sign_in(client, password="not the password", status=401)
    unknown = sign_in(client, email="nobody@acme.example", status=401)
    assert "Email or password is not right." in wrong.text and "Email or password is not right." in unknown.text
    assert not any(value.startswith(workspace.COOKIE) for name, value in wrong.headerlist if name == "Set-Cookie")


def test_pages_without_a_session_redirect_to_sign_in(client, acme_user):
    for path in ("/workspace", "/workspace/keys", "/workspace/calculations", "/workspace/team", "/workspace/audit"):
        assert client.get(path, status=303).headers["Location"].endswith("/workspace/login")
    client.set_cookie(workspace.COOKIE, "forged.token.value")
    assert client.get("/workspace/keys", status=303).headers["Location"].endswith("/workspace/login")


def test_signing_out_ends_the_session_for_the_old_cookie_too(client, acme_user):
    sign_in(client)
    old_cookie = client.cookies[workspace.COOKIE]
    client.post("/workspace/logout", {"csrf": csrf_token(client.get("/workspace"))}, status=303)
    assert WorkspaceSession.select().count() == 0
    client.set_cookie(workspace.COOKIE, old_cookie)
    assert client.get("/workspace/keys", status=303).headers["Location"].endswith("/workspace/login")


def test_a_sign_out_without_the_sessions_csrf_token_signs_nobody_out(client, acme_user):
    sign_in(client)
    client.post("/workspace/logout", {"csrf": "guess"}, status=303)
    assert client.get("/workspace/keys").status_int == 200


def test_a_session_expires_after_eight_hours(acme_user, secret):
    now = utcnow()
    token = workspace.Sessions(secret, clock=lambda: now).issue(User.get())
    assert workspace.Sessions(secret, clock=lambda: now).read(token).organization.id == acme_user.id
    later = workspace.Sessions(secret, clock=lambda: now + dt.timedelta(hours=8, seconds=1))
    assert later.read(token) is None


def test_a_token_signed_with_another_key_or_algorithm_is_refused(acme_user, secret):
    sessions = workspace.Sessions(secret)
    token = sessions.issue(User.get())
    claims = jwt.decode(token, sessions.key, algorithms=["HS256"])
    assert sessions.read(jwt.encode(claims, "another key of thirty-two bytes or more", algorithm="HS256")) is None
    assert sessions.read(jwt.encode(claims, None, algorithm="none")) is None
    assert sessions.read(token) is not None


@pytest.mark.parametrize("changes", [
    pytest.param({"exp": "later"}, id="string-exp"),
    pytest.param({"exp": 1.5e12}, id="float-exp"),
    pytest.param({"sid": None}, id="missing-sid"),
    pytest.param({"sid": 123}, id="number-sid"),
    pytest.param({"sid": "x" * 43}, id="unknown-sid"),
    pytest.param({"sid": "short"}, id="short-sid"),
    pytest.param({"sid": ["x" * 43]}, id="list-sid"),
])
def test_a_signed_token_with_malformed_claims_is_signed_out_not_a_crash(client, acme_user, secret, changes):
    sessions = workspace.Sessions(secret)
    claims = {**jwt.decode(sessions.issue(User.get()), sessions.key, algorithms=["HS256"]), **changes}
    claims = {name: value for name, value in claims.items() if value is not None}
    client.set_cookie(workspace.COOKIE, jwt.encode(claims, sessions.key, algorithm="HS256"))
    assert client.get("/workspace/keys", status=303).headers["Location"].endswith("/workspace/login")


def test_a_session_ends_when_its_organization_is_suspended(client, acme_user):
    sign_in(client)
    csrf = csrf_token(client.get("/workspace/keys"))
    Organization.update(status="suspended").where(Organization.id == acme_user.id).execute()
    assert client.get("/workspace/keys", status=303).headers["Location"].endswith("/workspace/login")
    client.post("/workspace/keys", {"csrf": csrf, "environment": "test", "scopes": "emissions:read"}, status=303)
    client.post("/workspace/webhooks", {"csrf": csrf, "action": "set", "url": "http://127.0.0.1:9/hook"},
                status=303)
    assert (ApiKey.select().count(), WebhookEndpoint.select().count()) == (0, 0)


def test_a_removed_users_open_session_ends_at_once(client, app, acme_user):
    workspace.create_user(acme_user, "ada@acme.example", PASSWORD, actor="cli")
    sign_in(client)
    other = type(client)(app)
    sign_in(other, email="ada@acme.example")
    assert other.get("/workspace").status_int == 200
    page = client.get("/workspace/team")
    ada = User.get(User.email == "ada@acme.example")
    client.post(f"/workspace/team/{ada.id}/remove", {"csrf": csrf_token(page)}, status=303)
    assert other.get("/workspace", status=303).headers["Location"].endswith("/workspace/login")
    assert "ada@acme.example was removed" in client.get("/workspace/team").text


def test_removing_a_teammate_asks_first_and_the_page_alone_removes_nothing(client, acme_user):
    workspace.create_user(acme_user, "ada@acme.example", PASSWORD, actor="cli")
    sign_in(client)
    ada = User.get(User.email == "ada@acme.example")
    team = client.get("/workspace/team")
    assert f'href="/workspace/team/{ada.id}/remove"' in team.text and 'method="post" action="/workspace/team/' not in team.text
    confirm = client.get(f"/workspace/team/{ada.id}/remove")
    assert "Remove <bdi>ada@acme.example</bdi>?" in confirm.text and 'href="/workspace/team"' in confirm.text
    assert User.get_or_none(User.email == "ada@acme.example") is not None
    me = User.get(User.email == "ops@acme.example")
    assert client.get(f"/workspace/team/{me.id}/remove", status=400)
    assert client.get("/workspace/team/999999/remove", status=404)
    assert client.get("/workspace/team/x/remove", status=404)
    [form] = [form for form in confirm.forms.values() if form.action.endswith(f"/team/{ada.id}/remove")]
    form.submit(status=303)
    assert User.get_or_none(User.email == "ada@acme.example") is None


def test_changing_ones_password_ends_the_other_sessions_and_keeps_this_one(client, app, acme_user):
    sign_in(client)
    elsewhere = type(client)(app)
    sign_in(elsewhere, address="198.51.100.7")
    page = client.get("/workspace/team")
    client.post("/workspace/password", {"csrf": csrf_token(page), "current_password": PASSWORD,
                                        "new_password": "a new long password"}, status=303)
    assert client.get("/workspace/team").status_int == 200
    assert elsewhere.get("/workspace", status=303).headers["Location"].endswith("/workspace/login")
    sign_in(type(client)(app), password="a new long password")
    assert AuditEvent.get(AuditEvent.action == "user.password_changed").actor == "user:ops@acme.example"


def test_a_wrong_current_password_changes_nothing(client, acme_user):
    sign_in(client)
    page = client.get("/workspace/team")
    refused = client.post("/workspace/password", {"csrf": csrf_token(page), "current_password": "wrong one!!",
                                                  "new_password": "a new long password"}, status=400)
    assert "The current password is not right." in refused.text
    assert accounts.check_password(PASSWORD, User.get().password_hash)
    # The page came back at /workspace/password: the environment switch still returns to the team page.
    assert '<input type="hidden" name="next" value="/workspace/team">' in refused.text
    switched = client.post("/workspace/environment", {"csrf": csrf_token(refused), "environment": "live",
                                                      "next": "/workspace/team"}, status=303)
    assert switched.headers["Location"].endswith("/workspace/team")


def test_wrong_current_passwords_meet_the_sign_in_throttle(client, app, acme_user, monkeypatch):
    """A session left open is no way around the sign-in throttle: the current password's check
    takes from the same buckets."""
    stop_the_sign_in_clock(app, monkeypatch)
    sign_in(client, address="203.0.113.20")
    at = {"REMOTE_ADDR": "203.0.113.20"}

    def change(current: str, status: int):
        page = client.get("/workspace/team", extra_environ=at)
        return client.post("/workspace/password", {"csrf": csrf_token(page), "current_password": current,
                                                   "new_password": "a new long password"},
                           extra_environ=at, status=status)

    for _ in range(10):  # as many as sign-in allows (a successful sign-in leaves the bucket full)
        change("wrong guess!!", 400)
    refused = change("wrong guess!!", 429)
    assert "Too many attempts; try again in" in refused.text and int(refused.headers["Retry-After"]) >= 1
    change(PASSWORD, 429)  # not even the right one, until the bucket refills
    assert accounts.check_password(PASSWORD, User.get().password_hash)


def test_suspending_an_organization_with_the_cli_ends_its_sessions_for_good(client, acme_user, ok):
    sign_in(client)
    assert client.get("/workspace").status_int == 200
    ok("org", "update", "acme", "--status", "suspended")
    assert WorkspaceSession.select().count() == 0
    ok("org", "update", "acme", "--status", "active")  # a cookie taken before must not work again
    assert client.get("/workspace", status=303).headers["Location"].endswith("/workspace/login")
    sign_in(client)  # signing in again works
    # A session row left from a suspension made before this rule ends when the organization is reactivated.
    Organization.update(status="suspended").where(Organization.id == acme_user.id).execute()
    ok("org", "update", "acme", "--status", "active")
    assert client.get("/workspace", status=303).headers["Location"].endswith("/workspace/login")


def test_a_form_with_percent_encoded_bytes_that_are_not_utf8_is_refused_not_stored(client, acme_user):
    sign_in(client)
    csrf = csrf_token(client.get("/workspace/customers"))
    refused = client.post("/workspace/customers", f"csrf={csrf}&reference=nonutf&name=%FF%FE",
                          headers={"Content-Type": "application/x-www-form-urlencoded"}, status=400)
    assert "The form could not be read" in refused.text
    assert Customer.get_or_none(Customer.reference == "nonutf") is None


def test_every_page_names_its_icon_which_is_served(client, acme_user):
    assert '<link rel="icon" href="/workspace/static/icon.svg">' in client.get("/workspace/login").text
    sign_in(client)
    assert '<link rel="icon" href="/workspace/static/icon.svg">' in client.get("/workspace").text
    icon = client.get("/workspace/static/icon.svg")
    assert icon.headers["Content-Type"] == "image/svg+xml" and icon.body.startswith(b"<svg")


def test_the_session_cookie_is_secure_when_served_over_https(client, acme_user):
    page = client.get("/workspace/login", extra_environ={"wsgi.url_scheme": "https"})
    assert "; Secure" in page.headers["Set-Cookie"]
    response = sign_in(client, **{"wsgi.url_scheme": "https"})
    assert "; Secure" in response.headers["Set-Cookie"]
    assert "; Secure" not in sign_in(client).headers["Set-Cookie"]


# --- throttling and hashing --------------------------------------------------------------------------

def test_wrong_passwords_from_one_address_are_throttled_there_but_not_elsewhere(client, app, acme_user, monkeypatch):
    stop_the_sign_in_clock(app, monkeypatch)
    for _ in range(10):
        sign_in(client, password="wrong password!", status=401, address="203.0.113.9")
    refused = sign_in(client, status=429, address="203.0.113.9")
    assert "Too many sign-in attempts" in refused.text and int(refused.headers["Retry-After"]) >= 1
    sign_in(client, address="192.0.2.44")  # the real user, from another address


def test_an_address_trying_many_emails_meets_the_looser_per_address_bucket(client, app, acme_user, monkeypatch):
    stop_the_sign_in_clock(app, monkeypatch)
    for number in range(30):
        sign_in(client, email=f"guess{number}@acme.example", status=401, address="203.0.113.10")
    sign_in(client, email="guess-more@acme.example", status=429, address="203.0.113.10")


def test_an_email_over_254_characters_is_refused_before_any_bucket_or_hash(client, app, acme_user):
    throttle = workspace_of(app).throttle
    sign_in(client, email="a" * 250 + "@acme.example", status=401)
    assert len(throttle.by_address) == 0 and len(throttle.by_email_and_address) == 0


def test_throttle_buckets_expire_once_refilled_and_never_exceed_their_bound():
    now = [0.0]
    throttle = accounts.Throttle(rate=1, burst=2, max_keys=100, clock=lambda: now[0])
    for number in range(1000):
        throttle.take(f"address-{number}")
    assert len(throttle) == 100
    now[0] += 3  # every bucket has refilled: as good as none
    throttle.take("one-more")
    assert len(throttle) == 1


def test_a_throttled_key_waits_the_seconds_its_bucket_needs():
    now = [0.0]
    throttle = accounts.Throttle(rate=1 / 30, burst=2, clock=lambda: now[0])
    assert (throttle.take("k"), throttle.take("k"), throttle.take("k")) == (0, 0, 30)
    now[0] += 30
    assert throttle.take("k") == 0


def test_password_hashing_runs_on_its_own_threads_and_refuses_beyond_its_queue():
    hasher = accounts.Hasher(workers=1, queue=1)
    release = threading.Event()
    threads_seen = []

    def slow(marker):
        threads_seen.append(threading.current_thread().name)
        release.wait(5)
        return marker

    results = []
    waiting = [threading.Thread(target=lambda n=n: results.append(hasher.run(slow, n))) for n in range(2)]
    for thread in waiting:
        thread.start()
    while not threads_seen or hasher._slots._value:  # one hashing, one queued: every slot taken
        threading.Event().wait(0.01)
    with pytest.raises(accounts.HashingBusy):
        hasher.run(slow, 3)
    release.set()
    for thread in waiting:
        thread.join(5)
    assert sorted(results) == [0, 1]
    assert all(name.startswith("password-hash") for name in threads_seen)
    assert hasher.run(len, "free again") == 10


def test_a_sign_in_while_hashing_is_busy_is_a_429_with_retry_after(client, app, acme_user):
    workspace_of(app).hasher = type("Busy", (), {"submit": staticmethod(lambda *a: (_ for _ in ()).throw(
        accounts.HashingBusy(2)))})()
    refused = sign_in(client, status=429)
    assert refused.headers["Retry-After"] == "2" and "busy" in refused.text


# --- API keys --------------------------------------------------------------------------------------

def test_a_created_key_is_shown_once_after_a_redirect_and_works_against_the_api(client, acme_user):
    sign_in(client)
    shown = create_key(client)
    plain = shown_key(shown)
    assert 'class="copy"' in shown.text
    assert plain not in client.get("/workspace/keys").text
    assert client.get("/workspace/keys/new", status=303).headers["Location"].endswith("/workspace/keys")
    key = ApiKey.get()
    assert key.name == "ci" and key.environment == "test" and key.scope_set == {"emissions:calculate",
                                                                                "emissions:read"}
    response = client.post_json("/v1/emissions/logistics", logistics_body(),
                                headers={"Authorization": f"Bearer {plain}", "Idempotency-Key": "ws-1"})
    assert response.status_int == 201
    assert AuditEvent.get(AuditEvent.action == "key.created").target == key.id


def test_reloading_the_new_key_page_creates_no_second_key(client, acme_user):
    sign_in(client)
    create_key(client)
    client.get("/workspace/keys/new", status=303)
    client.get("/workspace/keys/new", status=303)
    assert ApiKey.select().count() == 1


@pytest.mark.on_both
def test_the_new_key_is_shown_by_another_worker_and_the_database_holds_it_only_sealed(client, config, acme_user):
    # A second worker (or instance): its own memory, the same database; the browser's cookies go along.
    other = TestApp(create_app(config))
    other.cookiejar = client.cookiejar
    sign_in(client)
    page = client.get("/workspace/keys")
    created = client.post("/workspace/keys", [("csrf", csrf_token(page)), ("name", "ci"), ("environment", "test"),
                                              ("scopes", "emissions:calculate")], status=303)
    [waiting] = WorkspaceFlash.select()
    shown = other.get(created.headers["Location"])
    plain = shown_key(shown)
    tag, sealed = waiting.sealed.split(".")
    assert plain.encode() not in bytes.fromhex(sealed) and plain.encode().hex() not in sealed
    assert WorkspaceFlash.select().count() == 0  # shown once, then gone
    assert other.get("/workspace/keys/new", status=303).headers["Location"].endswith("/workspace/keys")
    assert client.get("/workspace/keys/new", status=303)


@pytest.mark.on_both
def test_what_waits_to_be_shown_ends_with_the_session_and_needs_the_browser_s_pad(client, acme_user):
    sign_in(client)
    page = client.get("/workspace/keys")
    client.post("/workspace/keys", [("csrf", csrf_token(page)), ("name", "ci"), ("environment", "test"),
                                    ("scopes", "emissions:calculate")], status=303)
    [waiting] = WorkspaceFlash.select()
    cookie = client.cookies["emissions_flash_key"]
    flash_id, pad = cookie.split(".")
    assert flash_id == waiting.id and len(base64.urlsafe_b64decode(pad + "==")) * 2 == len(waiting.sealed.split(".")[1])
    client.set_cookie("emissions_flash_key", f"{flash_id}.{'A' * len(pad)}")  # another pad of the same length
    assert client.get("/workspace/keys/new", status=303)
    assert WorkspaceFlash.select().count() == 0  # a wrong pad used it up: nothing to guess at again
    client.post("/workspace/keys", [("csrf", csrf_token(client.get("/workspace/keys"))), ("name", "two"),
                                    ("environment", "test"), ("scopes", "emissions:calculate")], status=303)
    assert WorkspaceFlash.select().count() == 1
    client.post("/workspace/logout", {"csrf": csrf_token(client.get("/workspace"))}, status=303)
    assert WorkspaceFlash.select().count() == 0


@pytest.mark.parametrize("cookie", ["no-dot", "x" * 22 + ".", '"\\000x"', "\u00e9" * 30,
                                    "A" * 22 + "." + "B" * 5000, "A" * 22 + ".@@@@",
                                    "A" * 22 + ".AAAAA"])  # the last passes the pattern: base64 of 5 characters
def test_a_flash_cookie_that_is_not_one_we_set_shows_nothing_and_is_cleared(client, acme_user, cookie):
    sign_in(client)
    for name, page, status in (("emissions_flash_key", "/workspace/keys/new", 303),
                               ("emissions_flash_notice", "/workspace/team", 200)):
        client.set_cookie(name, cookie)
        response = client.get(page, status=status)
        cleared = [value for header, value in response.headerlist if header == "Set-Cookie" and value.startswith(name)]
        assert cleared == [f"{name}=; Path=/workspace; HttpOnly; SameSite=Strict; Max-Age=0"], cleared
        assert "service_test_" not in response.text


def test_a_value_too_long_for_a_cookie_is_refused_before_anything_is_stored(app, acme_user):
    with pytest.raises(ValueError, match="too long"):
        workspace_of(app).flash.put(None, "notice", {"text": "é" * 1000})  # 2,000 bytes of UTF-8 and more
    assert WorkspaceFlash.select().count() == 0


def test_a_key_with_a_long_non_ascii_name_fits_the_cookie_a_browser_keeps(client, acme_user):
    sign_in(client)
    page = client.get("/workspace/keys")
    created = client.post("/workspace/keys", [("csrf", csrf_token(page)), ("name", "🚚" * 200),
                                              ("environment", "test"), ("scopes", "emissions:read")], status=303)
    [cookie] = [value for name, value in created.headerlist
                if name == "Set-Cookie" and value.startswith("emissions_flash_key=")]
    assert len(cookie) < 4096 - 100, len(cookie)  # browsers drop a cookie over 4,096 bytes
    shown = created.follow()
    assert shown_key(shown) and "🚚" * 200 in shown.text


def test_a_live_key_is_created_separately_with_the_live_prefix(client, acme_user):
    sign_in(client)
    assert re.fullmatch(r"service_live_[0-9A-Za-z]{40}", shown_key(create_key(client, environment="live")))


def test_a_form_that_fails_keeps_what_was_typed(client, acme_user):
    sign_in(client)
    page = create_key(client, name="billing", scopes=(), status=400)
    assert "at least one scope" in page.text and 'value="billing"' in page.text


def test_creating_a_key_without_scopes_or_with_an_unknown_scope_is_refused(client, acme_user):
    sign_in(client)
    assert "at least one scope" in create_key(client, scopes=(), status=400).text
    assert "unknown scope" in create_key(client, scopes=("admin:everything",), status=400).text
    assert ApiKey.select().count() == 0


def test_a_form_without_the_session_csrf_token_is_refused(client, acme_user):
    sign_in(client)
    client.post("/workspace/keys", {"csrf": "guess", "environment": "test", "scopes": "emissions:read"},
                status=303)
    client.post("/workspace/keys", {"csrf": "é", "environment": "test", "scopes": "emissions:read"}, status=303)
    assert ApiKey.select().count() == 0


def test_revoking_asks_for_confirmation_then_stops_the_key_at_the_api(client, acme_user):
    sign_in(client)
    plain = shown_key(create_key(client))
    key = ApiKey.get()
    confirm = client.get(f"/workspace/keys/{key.id}/revoke")
    assert "Revoke <bdi>ci</bdi>?" in confirm.text and "cannot be undone" in confirm.text
    assert ApiKey.get().revoked_at is None
    client.post(f"/workspace/keys/{key.id}/revoke", {"csrf": csrf_token(confirm)}, status=303)
    response = client.get("/v1/calculations/00000000-0000-4000-8000-000000000000",
                          headers={"Authorization": f"Bearer {plain}"}, status=401)
    assert response.json["error"]["code"] == "API_KEY_REVOKED"
    assert AuditEvent.get(AuditEvent.action == "key.revoked").actor == "user:ops@acme.example"


def test_another_organizations_key_cannot_be_revoked(client, acme_user, secret):
    other = make_org("globex")
    make_key(other, secret)
    other_key = ApiKey.get(ApiKey.organization == other)
    sign_in(client)
    page = client.get("/workspace/keys")
    client.get(f"/workspace/keys/{other_key.id}/revoke", status=404)
    client.post(f"/workspace/keys/{other_key.id}/revoke", {"csrf": csrf_token(page)}, status=404)
    assert ApiKey.get_by_id(other_key.id).revoked_at is None


def test_the_key_table_shows_created_last_used_and_expiry(client, acme_user):
    sign_in(client)
    tomorrow = utcnow().date() + dt.timedelta(days=1)
    plain = shown_key(create_key(client, expires_on=tomorrow.isoformat()))
    assert "Never" in client.get("/workspace/keys").text  # not used yet
    client.get("/v1/calculations/00000000-0000-4000-8000-000000000000",
               headers={"Authorization": f"Bearer {plain}"}, status=404)
    page = client.get("/workspace/keys").text
    assert ApiKey.get().last_used_at is not None
    assert tomorrow.strftime("%d %b %Y") in page and utcnow().strftime("%d %b %Y") in page


@pytest.mark.on_both
def test_a_keys_last_use_is_written_at_most_once_a_minute(database_url, acme_user, secret):
    from emissions import auth
    now = [1000.0]
    store = auth.KeyStore(secret, 0, clock=lambda: now[0])
    plain = make_key(acme_user, secret)
    auth.authenticate(store, f"Bearer {plain}")
    first = ApiKey.get().last_used_at
    ApiKey.update(last_used_at=None).execute()
    now[0] += 59
    auth.authenticate(store, f"Bearer {plain}")
    assert first is not None and ApiKey.get().last_used_at is None  # within the minute: not written
    now[0] += 1
    auth.authenticate(store, f"Bearer {plain}")
    assert ApiKey.get().last_used_at is not None


@pytest.mark.parametrize("expires_on", ["2026W011", "2026-W01-1", "20260101", "2020-01-01", "yesterday", "today"])
def test_a_key_expiry_must_be_a_future_yyyy_mm_dd_date(client, acme_user, expires_on):
    today = utcnow().date()
    expires_on = {"yesterday": (today - dt.timedelta(days=1)).isoformat(),
                  "today": today.isoformat()}.get(expires_on, expires_on)
    sign_in(client)
    page = create_key(client, expires_on=expires_on, status=400)
    assert "The expiry date must be a date after today, as YYYY-MM-DD." in page.text
    assert ApiKey.select().count() == 0


@pytest.mark.on_both
@pytest.mark.parametrize("name, message", [
    pytest.param("ci\x00", "must not contain NUL characters", id="nul"),
    pytest.param("line\nbreak", "name " + text.MESSAGE, id="line-break"),
    pytest.param("c1\x85", "name " + text.MESSAGE, id="c1-control"),
    pytest.param("ci\u202e", "name " + text.MESSAGE, id="bidi-override"),
])
def test_a_key_name_with_control_characters_is_refused(client, acme_user, name, message):
    sign_in(client)
    assert message in create_key(client, name=name, status=400).text
    assert ApiKey.select().count() == 0


@pytest.mark.on_both
def test_a_sign_in_with_nul_in_the_email_is_refused_not_a_crash(client, acme_user):
    assert "must not contain NUL characters" in sign_in(client, email="ops@acme.example\x00", status=400).text


def test_workspace_pages_are_html_never_cached_and_framed_by_nobody(client, acme_user):
    page = client.get("/workspace/login")
    assert page.headers["Content-Type"].startswith("text/html")
    assert page.headers["Cache-Control"] == "no-store"
    assert page.headers["X-Frame-Options"] == "DENY"
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]
    assert '<meta name="viewport"' in page.text
    assert not [name for name in page.headers if name.lower().startswith("access-control")]


def test_an_unknown_workspace_path_is_an_html_page_not_the_apis_json(client, acme_user):
    page = client.get("/workspace/usage", status=404)
    assert page.headers["Content-Type"].startswith("text/html") and "Page not found" in page.text
    sign_in(client)
    assert "Sign out" in client.get("/workspace/usage", status=404).text


def test_the_stylesheet_and_script_are_served_from_the_package(client):
    assert "--accent" in client.get("/workspace/static/workspace.css").text
    assert "clipboard" in client.get("/workspace/static/workspace.js").text
    client.get("/workspace/static/..%2Fapp.py", status=404)


# --- the environment switch and the pages --------------------------------------------------------

def test_the_environment_switch_changes_what_every_page_shows(client, acme_user, secret):
    make_customer(acme_user, "live-cust", environment="live", name="Live Customer")
    sign_in(client)
    assert "Live Customer" not in client.get("/workspace/customers").text
    page = client.get("/workspace/customers")
    client.post("/workspace/environment", {"csrf": csrf_token(page), "environment": "live",
                                           "next": "/workspace/customers"}, status=303)
    live = client.get("/workspace/customers")
    assert "Live Customer" in live.text and 'value="live" aria-pressed="true"' in live.text


def test_a_customer_added_in_the_workspace_is_readable_through_the_api(client, acme_user, secret):
    sign_in(client)
    page = client.get("/workspace/customers")
    client.post("/workspace/customers", {"csrf": csrf_token(page), "reference": "cust-2", "name": "Initech",
                                         "country": "de"}, status=303)
    key = make_key(acme_user, secret)
    response = client.get("/v1/customers/cust-2", headers={"Authorization": f"Bearer {key}"})
    assert response.json == {"reference": "cust-2", "name": "Initech", "status": "active",
                             "country_code": "DE", "analytics": None}


def test_the_customer_list_pages_by_reference(client, app, acme_user, monkeypatch):
    from emissions.workspace.pages import customers as views
    monkeypatch.setattr(views, "CUSTOMERS_PAGE", 2)
    for reference in ("cust-2", "cust-3"):
        make_customer(acme_user, reference)
    sign_in(client)
    first = client.get("/workspace/customers")
    assert re.findall(r'href="/workspace/customers/([^"]+)"', first.text) == ["cust-1", "cust-2"]
    second = first.click("Next")
    assert re.findall(r'href="/workspace/customers/([^"]+)"', second.text) == ["cust-3"]
    assert "Next" not in second.text


def test_a_bad_customer_is_refused_with_the_reason_and_the_form_kept(client, acme_user):
    sign_in(client)
    page = client.get("/workspace/customers")
    refused = client.post("/workspace/customers", {"csrf": csrf_token(page), "reference": "-x",
                                                   "name": "Keep me"}, status=400)
    assert "reference must start with a letter or digit" in refused.text and 'value="Keep me"' in refused.text


def test_a_customer_page_shows_the_apis_analytics_and_can_be_edited_and_suspended(client, acme_user, secret):
    key = make_key(acme_user, secret)
    for number in range(2):
        client.post_json("/v1/emissions/logistics", logistics_body(external_reference=f"s-{number}"),
                         headers={"Authorization": f"Bearer {key}", "Idempotency-Key": f"k-{number}"})
    api = client.get("/v1/customers/cust-1/emissions", headers={"Authorization": f"Bearer {key}"}).json
    sign_in(client)
    page = client.get("/workspace/customers/cust-1", {"period": "all"})  # the default is this month's activity
    assert f'data-field="calculation_count" data-value="{api["analytics"]["calculation_count"]}"' in page.text
    assert f'data-field="emissions" data-value="{api["analytics"]["emissions"]["value"]}"' in page.text
    client.post("/workspace/customers/cust-1/change", {"csrf": csrf_token(page), "action": "edit",
                                                       "name": "Renamed Ltd", "country": "fr"}, status=303)
    client.post("/workspace/customers/cust-1/change", {"csrf": csrf_token(page), "action": "suspend"},
                status=303)
    customer = Customer.get()
    assert (customer.name, customer.country_code, customer.status) == ("Renamed Ltd", "FR", "suspended")
    refused = client.post_json("/v1/emissions/logistics", logistics_body(external_reference="s-9"),
                               headers={"Authorization": f"Bearer {key}", "Idempotency-Key": "k-9"}, status=403)
    assert refused.json["error"]["code"] == "CUSTOMER_ACCESS_DENIED"
    assert [event.details for event in AuditEvent.select().where(AuditEvent.action == "customer.updated")
            .order_by(AuditEvent.id)] == ['{"country_code": "FR", "name": "Renamed Ltd"}', '{"status": "suspended"}']


def test_a_reference_with_dot_segments_links_and_posts_to_its_own_customer(client, acme_user):
    make_customer(acme_user, "b", name="Bee Ltd")
    make_customer(acme_user, "a/../b", name="Dotted Ltd")
    sign_in(client)
    listing = client.get("/workspace/customers")
    assert 'href="/workspace/customers/a%2F..%2Fb"' in listing.text  # no `..` segment for a browser to step up
    page = client.get("/workspace/customers/a%2F..%2Fb")
    assert 'action="/workspace/customers/a%2F..%2Fb/change"' in page.text
    client.post("/workspace/customers/a%2F..%2Fb/change", {"csrf": csrf_token(page), "action": "suspend"},
                status=303)
    statuses = {customer.reference: customer.status for customer in Customer.select()}
    assert (statuses["b"], statuses["a/../b"]) == ("active", "suspended")


def test_the_last_day_there_is_filters_the_list_and_the_csv_without_an_error(client, acme_user, secret):
    key = make_key(acme_user, secret)
    post_calculations(client, key, 1)
    sign_in(client)
    page = client.get("/workspace/calculations", {"to": "9999-12-31"})
    assert page.text.count('href="/workspace/calculations/') == 1
    download = client.get("/workspace/calculations.csv", {"from": "0001-01-01", "to": "9999-12-31"})
    assert len(download.text.strip().split("\n")) == 2


def test_an_unexpected_error_in_a_page_is_the_workspaces_error_page_not_the_apis_json(client, acme_user,
                                                                                       monkeypatch):
    from emissions.workspace import insights

    def broken(*args, **kwargs):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(insights, "_filtered", broken)
    sign_in(client)
    for path in ("/workspace/calculations", "/workspace/calculations.csv"):
        failed = client.get(path, status=500)
        assert failed.headers["Content-Type"].startswith("text/html")
        assert "Content-Disposition" not in failed.headers
        assert "Something went wrong" in failed.text and "the database went away" not in failed.text


def test_an_unknown_or_other_environments_customer_is_a_404_page(client, acme_user):
    make_customer(acme_user, "live-only", environment="live")
    sign_in(client)
    client.get("/workspace/customers/live-only", status=404)
    client.get("/workspace/customers/no%0Asuch", status=404)


def post_calculations(client, key, count, **overrides):
    ids = []
    for number in range(count):
        body = logistics_body(external_reference=f"ship-{number}", **overrides)
        ids.append(client.post_json("/v1/emissions/logistics", body,
                                    headers={"Authorization": f"Bearer {key}",
                                             "Idempotency-Key": f"idem-{overrides}-{number}"}).json["id"])
    return ids


@pytest.mark.on_both
def test_the_calculation_list_pages_newest_first_and_filters(client, acme_user, secret, monkeypatch):
    from emissions.workspace import insights
    monkeypatch.setattr(insights, "PAGE_SIZE", 3)
    make_customer(acme_user, "cust-2")
    make_factor("sea-default", mode="SEA", value="0.016")
    key = make_key(acme_user, secret)
    road = post_calculations(client, key, 4)
    sea = post_calculations(client, key, 1, mode="SEA", factor_reference="sea-default", customer_reference="cust-2")
    sign_in(client)
    first = client.get("/workspace/calculations")
    listed = re.findall(r'href="/workspace/calculations/([0-9a-f-]{36})"', first.text)
    # Newest first; calculations of the same millisecond by id, the order the keyset pages in.
    newest_first = [row.id for row in Calculation.select().order_by(Calculation.created_at.desc(),
                                                                      Calculation.id.desc())]
    assert sorted(newest_first) == sorted(road + sea) and newest_first[0] in (sea[0], road[-1])
    assert listed == newest_first[:3]
    older = first.click("Older")
    assert re.findall(r'href="/workspace/calculations/([0-9a-f-]{36})"', older.text) == newest_first[3:]
    assert 'href="/workspace/calculations" class="button">Newest</a>' in older.text  # no stray "?"
    filtered_older = client.get("/workspace/calculations", {"mode": "ROAD"}).click("Older")
    assert 'href="/workspace/calculations?mode=ROAD" class="button">Newest</a>' in filtered_older.text
    filtered = client.get("/workspace/calculations", {"mode": "SEA"})
    assert re.findall(r'href="/workspace/calculations/([0-9a-f-]{36})"', filtered.text) == sea
    by_customer = client.get("/workspace/calculations", {"customer": "cust-2"})
    assert re.findall(r'href="/workspace/calculations/([0-9a-f-]{36})"', by_customer.text) == sea
    today = utcnow().date()
    none = client.get("/workspace/calculations", {"from": (today + dt.timedelta(days=1)).isoformat()})
    assert "No calculations match." in none.text
    assert "YYYY-MM-DD" in client.get("/workspace/calculations", {"from": "yesterday"}, status=400).text
    crossed = client.get("/workspace/calculations", {"from": today.isoformat(),
                                                     "to": (today - dt.timedelta(days=1)).isoformat()}, status=400)
    assert "The “from” date is after the “to” date" in crossed.text


@pytest.mark.on_both
def test_the_csv_download_holds_every_filtered_calculation(client, acme_user, secret, monkeypatch):
    from emissions.workspace import insights
    monkeypatch.setattr(insights, "CSV_BATCH", 2)  # several batches, as a large download has
    key = make_key(acme_user, secret)
    ids = post_calculations(client, key, 5)
    sign_in(client)
    download = client.get("/workspace/calculations.csv", {"mode": "ROAD"})
    assert download.headers["Content-Type"].startswith("text/csv")
    assert "attachment" in download.headers["Content-Disposition"]
    lines = download.text.strip().split("\n")
    assert lines[0] == ",".join(insights.CSV_COLUMNS)
    # Newest first; calculations of the same millisecond by id, as the keyset reads them.
    newest_first = [row.id for row in Calculation.select().order_by(Calculation.created_at.desc(),
                                                                      Calculation.id.desc())]
    assert sorted(newest_first) == sorted(ids)
    assert [line.split(",")[0] for line in lines[1:]] == newest_first
    newest = dict(zip(insights.CSV_COLUMNS, lines[1].split(",")))
    assert (newest["emissions_kgco2e"], newest["factor_reference"]) == ("500.88", "road-default")


def test_a_calculation_page_shows_the_stored_body_the_lineage_and_its_event(client, acme_user, secret):
    webhook_endpoints.set_endpoint(acme_user.id, "test", "http://127.0.0.1:9/hook", actor="test", allow_private_test=True)
    key = make_key(acme_user, secret)
    calculation_id = post_calculations(client, key, 1)[0]
    sign_in(client)
    page = client.get(f"/workspace/calculations/{calculation_id}")
    assert "Road average" in page.text and "Test source" in page.text  # the lineage
    assert "&quot;emissions&quot;" in page.text and "500.88" in page.text  # the stored body
    assert "calculation.succeeded" in page.text and "pending" in page.text
    client.get("/workspace/calculations/00000000-0000-4000-8000-000000000000", status=404)


def test_the_overview_counts_this_months_calculations_and_draws_them_today(client, acme_user, secret):
    key = make_key(acme_user, secret)
    post_calculations(client, key, 3, activity_date=utcnow().date().isoformat())
    post_calculations(client, key, 1, activity_date="2025-06-01")  # billable this month, emitted long ago
    sign_in(client)
    page = client.get("/workspace")
    assert 'data-usage="test">4<' in page.text
    assert 'data-month-kg="1502.64">1.50 t CO2e<' in page.text  # 3 x 500.88 kgCO2e, by activity date
    assert f'data-date="{utcnow().date().isoformat()}" data-count="3"' in page.text
    assert page.text.count('class="bar"') == 1


# --- webhooks ------------------------------------------------------------------------------------

def change_webhook(client, action="set", url="http://127.0.0.1:9/hook", status=303):
    page = client.get("/workspace/webhooks")
    return client.post("/workspace/webhooks", {"csrf": csrf_token(page), "action": action, "url": url},
                       status=status)


def test_setting_a_webhook_shows_its_secret_once_after_a_redirect(client, acme_user):
    sign_in(client)
    page = change_webhook(client).follow()
    secret = re.search(r'<code id="new-secret">(whsec_[^<]+)</code>', page.text).group(1)
    endpoint = webhook_endpoints.endpoint_for(acme_user.id, "test")
    assert endpoint.url == "http://127.0.0.1:9/hook" and endpoint.secret == secret
    assert secret not in client.get("/workspace/webhooks").text
    rotated = change_webhook(client, action="rotate").follow()
    new = re.search(r'<code id="new-secret">(whsec_[^<]+)</code>', rotated.text).group(1)
    assert new != secret and 'id="overlap-ends"' in rotated.text and "X-Service-Webhook-Signature-Next" in rotated.text
    stored = webhook_endpoints.endpoint_for(acme_user.id, "test")
    assert (stored.secret, stored.next_secret) == (secret, new)
    by_ops = AuditEvent.select().where(AuditEvent.actor == "user:ops@acme.example").order_by(AuditEvent.id)
    assert [event.action for event in by_ops] == ["endpoint.set", "endpoint.rotated"]


def test_the_webhooks_page_says_when_the_endpoint_is_down_and_retry_now_probes_it_at_once(client, config, acme_user):
    sign_in(client)
    change_webhook(client)  # 127.0.0.1:9: nothing answers
    for number in range(3):
        webhook_events.record_event(acme_user.id, "test", "calculation.succeeded", f'{{"n": {number}}}')
    worker = webhook_delivery.Deliverer(config, threads=1)
    assert worker.run_once()["pending"] == 1  # one attempt, then the endpoint is known down
    worker.close()
    page = client.get("/workspace/webhooks")
    endpoint = webhook_endpoints.endpoint_for(acme_user.id, "test")
    assert endpoint.down_until > utcnow()
    down = re.search(r'<p class="alert error" id="endpoint-down">(.*?)</p>', page.text).group(1)
    assert "Not answering since" in down and "the others wait without using their attempts" in down
    waiting = WebhookEvent.get((WebhookEvent.attempt_count == 0) & (WebhookEvent.delivery_status == "pending"))
    client.post(f"/workspace/webhooks/events/{waiting.id}/redeliver", {"csrf": csrf_token(page)}, status=303)
    assert webhook_endpoints.endpoint_for(acme_user.id, "test").down_until <= utcnow()  # probed at the next poll


def test_a_live_webhook_must_be_https_and_public(client, acme_user):
    sign_in(client)
    page = client.get("/workspace")
    client.post("/workspace/environment", {"csrf": csrf_token(page), "environment": "live"}, status=303)
    refused = change_webhook(client, url="http://example.com/hook", status=400)
    assert "Not changed" in refused.text and 'value="http://example.com/hook"' in refused.text
    change_webhook(client, url="https://127.0.0.1/hook", status=400)
    assert webhook_endpoints.endpoint_for(acme_user.id, "live") is None


@pytest.mark.parametrize("url, rule", [("http://127.0.0.1:5432/", "loopback"),
                                       ("http://169.254.169.254/latest", "link-local"),
                                       ("http://[::ffff:0:7f00:1]/", "loopback"),
                                       ("http://[64:ff9b::a00:1]/", "private")])
def test_a_test_webhook_on_a_private_address_is_refused_unless_the_operator_allows_it(config, acme_user, url, rule):
    strict = TestApp(create_app(config.with_(webhook_allow_private_test=False)))
    sign_in(strict)
    refused = change_webhook(strict, url=url, status=400)
    assert f"resolves to a {rule} address; test endpoints must be public" in refused.text
    assert webhook_endpoints.endpoint_for(acme_user.id, "test") is None


def test_a_test_event_is_a_signed_calculation_succeeded_marked_as_test_data(client, acme_user):
    sign_in(client)
    change_webhook(client)
    change_webhook(client, action="test")
    event = WebhookEvent.get()
    assert event.type == "calculation.succeeded" and event.environment == "test"
    assert event.delivery_status == "pending" and '"test_event":true' in event.payload
    page = client.get("/workspace/webhooks")
    assert f"Test event {event.id} queued" in page.text  # said once, after the redirect
    assert re.search(rf'data-event="{event.id}".*?<span class="badge">test event</span>', page.text, re.S)
    assert "queued" not in client.get("/workspace/webhooks").text
    with pytest.raises(webhook_endpoints.WebhookError):
        webhook_events.send_test_event(acme_user.id, "live", actor="test")


def test_a_test_webhook_event_sent_while_the_endpoint_is_down_says_what_happens_first(client, acme_user):
    sign_in(client)
    change_webhook(client)
    WebhookEndpoint.update(down_since=utcnow(), down_until=utcnow() + dt.timedelta(minutes=5)).execute()
    change_webhook(client, action="test")
    page = client.get("/workspace/webhooks")
    assert "The endpoint is not answering: its oldest waiting delivery is tried again within a few seconds" in page.text
    assert "delivered within a few seconds" not in page.text
    assert WebhookEndpoint.get().down_until <= utcnow()  # the next poll probes it


def test_a_failed_delivery_is_redelivered_and_a_waiting_one_retried_now(client, acme_user):
    sign_in(client)
    change_webhook(client)
    change_webhook(client, action="test")
    event = WebhookEvent.get()
    later = utcnow() + dt.timedelta(hours=1)
    WebhookEvent.update(next_attempt_at=later).execute()
    page = client.get("/workspace/webhooks")
    assert "Retry now" in page.text
    client.post(f"/workspace/webhooks/events/{event.id}/redeliver", {"csrf": csrf_token(page)}, status=303)
    assert WebhookEvent.get().next_attempt_at < later
    assert f"Event {event.id} queued for delivery again." in client.get("/workspace/webhooks").text
    WebhookEvent.update(delivery_status="failed", next_attempt_at=None, attempt_count=8).execute()
    client.post(f"/workspace/webhooks/events/{event.id}/redeliver", {"csrf": csrf_token(page)}, status=303)
    assert (WebhookEvent.get().delivery_status, WebhookEvent.get().attempt_count) == ("pending", 0)


def test_another_organizations_event_cannot_be_redelivered(client, acme_user):
    other = make_org("globex")
    webhook_endpoints.set_endpoint(other.id, "test", "http://127.0.0.1:9/hook", actor="test", allow_private_test=True)
    event = webhook_events.send_test_event(other.id, "test", actor="test")
    WebhookEvent.update(delivery_status="failed").execute()
    sign_in(client)
    page = client.get("/workspace/webhooks")
    client.post(f"/workspace/webhooks/events/{event.id}/redeliver", {"csrf": csrf_token(page)}, status=404)
    assert WebhookEvent.get().delivery_status == "failed"


# --- team and audit ------------------------------------------------------------------------------

def test_a_teammate_is_added_can_sign_in_and_one_cannot_remove_oneself(client, app, acme_user):
    sign_in(client)
    page = client.get("/workspace/team")
    client.post("/workspace/team", {"csrf": csrf_token(page), "email": "Grace@Acme.example",
                                    "password": "another long password"}, status=303)
    sign_in(type(client)(app), email="grace@acme.example", password="another long password")
    me = User.get(User.email == "ops@acme.example")
    refused = client.post(f"/workspace/team/{me.id}/remove", {"csrf": csrf_token(page)}, status=400)
    assert "You cannot remove yourself" in refused.text
    short = client.post("/workspace/team", {"csrf": csrf_token(page), "email": "x@acme.example",
                                            "password": "short"}, status=400)
    assert "at least 12 characters" in short.text and 'value="x@acme.example"' in short.text


def test_the_audit_page_lists_the_workspaces_own_actions_newest_first(client, acme_user):
    sign_in(client)
    create_key(client)
    change_webhook(client)
    page = client.get("/workspace/audit").text
    assert page.index("endpoint.set") < page.index("key.created")
    assert "user:ops@acme.example" in page


def test_the_csv_download_writes_cells_a_spreadsheet_would_run_as_text(client, acme_user, secret):
    import csv
    import io
    key = make_key(acme_user, secret)
    for number, reference in enumerate(("=1+1", "  =1+1", "@SUM(A1)", "-2+3")):  # line breaks: test_csv_exports
        client.post_json("/v1/emissions/logistics", logistics_body(external_reference=reference),
                         headers={"Authorization": f"Bearer {key}", "Idempotency-Key": f"hostile-{number}"})
    sign_in(client)
    rows = list(csv.DictReader(io.StringIO(client.get("/workspace/calculations.csv").text)))
    assert sorted(row["external_reference"] for row in rows) == sorted(
        ["'=1+1", "'  =1+1", "'@SUM(A1)", "'-2+3"])
    assert {row["emissions_kgco2e"] for row in rows} == {"500.88"}
