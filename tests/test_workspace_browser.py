"""The workspace in a real browser: Debian's Chromium driven by Playwright against a real Waitress
server, a real webhook delivery worker and a real local receiver. Skipped where no Chromium is installed
(`.ci/run` installs it); Playwright never downloads a browser of its own here."""
from __future__ import annotations

import re
import threading

import pytest
import requests

from emissions import auth
from emissions import customers
from emissions import models
from emissions.webhooks import delivery as webhook_delivery
from emissions import workspace
from emissions.app import create_app
from emissions.config import Config
from emissions.models import ApiKey, Organization, User
from emissions.workspace import insights
from conftest import CHROMIUM, POSTGRES_URL, LiveServer, logistics_body, make_customer, make_factor, postgres_schema_url
from webhook_receiver import Receiver

pytest.importorskip("playwright.sync_api", reason="Playwright for Python is not installed")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium found (apt-get install -y chromium)")
PASSWORD = "correct horse battery"
ADMIN = "ada@acme.example"
PAGES = ("/workspace", "/workspace/calculations", "/workspace/customers", "/workspace/customers/northwind",
         "/workspace/webhooks", "/workspace/keys", "/workspace/team", "/workspace/audit")


class Site:
    """The served workspace, its organization's API key and what the tests need to reach."""

    def __init__(self, url: str, key: str, receiver: Receiver):
        self.url, self.key, self.receiver = url, key, receiver
        self.today = models.utcnow().date()  # the activity date of the seeded calculations (a run may pass midnight)

    def calculate(self, idempotency_key: str, **overrides) -> dict:
        response = requests.post(f"{self.url}/v1/emissions/logistics", json=logistics_body(**overrides),
                                 headers={"Authorization": f"Bearer {self.key}", "Idempotency-Key": idempotency_key},
                                 timeout=10)
        assert response.status_code == 201, response.text
        return response.json()

    def api(self, path: str) -> dict:
        return requests.get(f"{self.url}{path}", headers={"Authorization": f"Bearer {self.key}"}, timeout=10).json()


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def site(request, tmp_path_factory):
    """The workspace served from SQLite, then from PostgreSQL (where TEST_DATABASE_URL is set)."""
    if request.param == "postgres":
        if not POSTGRES_URL:
            pytest.skip("PostgreSQL tests need TEST_DATABASE_URL (set by .ci/run)")
        database_url = postgres_schema_url(POSTGRES_URL)
    else:
        database_url = f"sqlite:///{tmp_path_factory.mktemp('browser') / 'workspace.sqlite3'}"
    config = Config(database_url=database_url, log_requests=False, rate_limit_per_second=0, key_cache_seconds=0, webhook_poll_seconds=0.1,
                    webhook_retry_schedule=(1, 1), webhook_allow_private_test=True)
    app = create_app(config)
    org = Organization.create(slug="acme", name="Acme Logistics")
    workspace.create_user(org, ADMIN, PASSWORD, actor="cli")
    make_factor()
    make_factor("sea-default", mode="SEA", value="0.016", name="Sea container average")
    for reference in ("northwind", "globex"):
        make_customer(org, reference, name=reference.title() + " Ltd")
    _, key = auth.create_key(org, "test", list(models.SCOPES), auth.instance_secret(None), name="seed")
    receiver = Receiver()
    deliverer = webhook_delivery.Deliverer(config, threads=2)
    delivering = threading.Thread(target=deliverer.run_forever, args=(0.1,), daemon=True)
    delivering.start()
    try:
        with LiveServer(app) as server:
            found = Site(server.url, key, receiver)
            today = found.today.isoformat()  # the overview and the customer page show this month
            for number in range(3):
                found.calculate(f"road-{number}", customer_reference="northwind", external_reference=f"road-{number}",
                                activity_date=today)
            found.calculate("sea-0", customer_reference="globex", mode="SEA", factor_reference="sea-default",
                            external_reference="sea-0", activity_date=today)
            yield found
    finally:
        deliverer.stop()
        delivering.join(10)
        deliverer.close()
        receiver.close()
        models.db.close()


@pytest.fixture
def page(browser, site):
    context = browser.new_context(base_url=site.url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(10_000)
    yield context.new_page()
    context.close()


def sign_in(page, email=ADMIN, password=PASSWORD):
    page.goto("/workspace/login")
    page.fill("#email", email)
    page.fill("#password", password)
    page.click("button[type=submit]")
    page.wait_for_url("**/workspace")


def test_a_user_signs_in_by_keyboard_and_lands_on_the_overview(page):
    page.goto("/workspace/login")
    page.focus("#email")
    page.keyboard.type(ADMIN)
    page.keyboard.press("Tab")
    page.keyboard.type(PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_url("**/workspace")
    assert page.inner_text("h1") == "Overview"
    assert "Acme Logistics" in page.inner_text(".topbar")
    assert page.get_attribute('.sidebar a[href="/workspace"]', "aria-current") == "page"


def test_the_overview_chart_is_drawn_from_real_calculations(page, site):
    sign_in(page)
    today = site.today.isoformat()
    day = page.locator(f'.chart g.day[data-date="{today}"]')
    assert day.get_attribute("data-count") == "4"
    assert day.locator("rect.bar").count() == 1 and page.locator(".chart rect.bar").count() == 1
    assert float(day.locator("rect.bar").get_attribute("height")) > 0
    assert page.inner_text('[data-usage="test"]') == "4"


def test_a_new_key_is_shown_once_with_a_copy_button_and_a_reload_makes_no_second_key(page):
    sign_in(page)
    page.click('.sidebar a[href="/workspace/keys"]')
    page.fill("#k-name", "browser-key")
    page.check('input[value="customers:read"]')
    page.click("text=Create key")
    page.wait_for_url("**/workspace/keys/new")
    plain = page.inner_text("#new-key")
    assert plain.startswith("service_test_") and page.locator("button.copy").is_visible()
    page.reload()
    assert page.url.endswith("/workspace/keys") and page.locator("#new-key").count() == 0
    assert ApiKey.select().where(ApiKey.name == "browser-key").count() == 1
    assert page.locator("#keys tbody tr", has_text="browser-key").count() == 1


def test_revoking_a_key_asks_first(page):
    sign_in(page)
    page.goto("/workspace/keys")
    page.locator("#keys tbody tr", has_text="seed").get_by_role("link", name="Revoke").click()
    assert "cannot be undone" in page.inner_text("main")
    page.click("text=Cancel")
    assert ApiKey.get(ApiKey.name == "seed").revoked_at is None


def test_the_calculation_list_filters_and_a_detail_page_shows_the_lineage(page):
    sign_in(page)
    page.goto("/workspace/calculations")
    assert page.locator("#calculations tbody tr").count() == 4
    page.select_option("#f-mode", "SEA")
    page.click("text=Filter")
    page.wait_for_url("**mode=SEA**")
    rows = page.locator("#calculations tbody tr")
    assert rows.count() == 1 and rows.first.get_attribute("data-mode") == "SEA"
    rows.first.locator("a").first.click()
    lineage = page.inner_text("#lineage")
    assert "Sea container average" in lineage and "sea-default" in lineage and "kgCO2e/tkm" in lineage


def test_a_customers_page_shows_the_numbers_the_api_answers(page, site):
    analytics = site.api("/v1/customers/northwind/emissions")["analytics"]
    sign_in(page)
    page.goto("/workspace/customers")
    page.click("text=Northwind Ltd")
    # This month's activity dates by default: the fixture's calculations are dated today.
    assert page.inner_text('[data-field="calculation_count"]') == str(analytics["calculation_count"])
    assert page.get_attribute('[data-field="emissions"]', "data-value") == str(analytics["emissions"]["value"])
    assert page.inner_text('[data-field="emissions"]') == insights.co2e_text(analytics["emissions"]["value"])
    assert page.get_attribute('[data-field="activity"]', "data-value") == str(analytics["activity"]["value"])
    assert page.inner_text('[data-field="activity"]') == insights.number_text(analytics["activity"]["value"])


def test_the_printable_statement_prints_to_an_a4_pdf_with_the_period_and_its_numbers(page, site):
    """Chromium prints the statement; its text is read with print media emulated (what the PDF holds: no
    PDF text extractor is a dependency) and the PDF itself is checked to be A4."""
    today = site.today
    statement = site.api(f"/v1/customers/northwind/statement?from={today.replace(day=1)}&to={today}")
    sign_in(page)
    page.goto("/workspace/customers/northwind?period=custom&from=" + today.replace(day=1).isoformat()
              + "&to=" + today.isoformat())
    page.click("text=Printable statement")
    page.wait_for_url("**format=statement**")
    page.emulate_media(media="print")
    text = page.inner_text("body")
    assert "Back to the customer" not in text  # the screen-only line is not printed
    for expected in ("Acme Logistics", "Emissions statement", "Northwind Ltd (northwind)",
                     f"Activity dates {today.replace(day=1).isoformat()} to {today.isoformat()}",
                     "Totals", "By mode", "By month", today.strftime("%Y-%m"), "Road",
                     insights.co2e_text(statement["totals"]["emissions"]["value"]),
                     "ISO 14083:2023", "road-default", "Method and sources"):
        assert expected in text, expected
    pdf = page.pdf(format="A4", print_background=False, prefer_css_page_size=True)
    assert pdf.startswith(b"%PDF-") and len(pdf) > 1000
    sizes = re.findall(rb"/MediaBox\s*\[\s*0 0 ([0-9.]+) ([0-9.]+)\s*\]", pdf)
    assert sizes and all(abs(float(w) - 595.28) < 1 and abs(float(h) - 841.89) < 1.5 for w, h in sizes), sizes


def test_at_390_px_the_calculations_table_shows_its_kgco2e_column_and_audit_actions_stay_whole(browser, site):
    customers.create(Organization.get(Organization.slug == "acme"), "test", "audited", "Audited Ltd", None,
                     actor="cli")  # a customer.created entry in the audit log
    context = browser.new_context(base_url=site.url, viewport={"width": 390, "height": 844})
    try:
        phone = context.new_page()
        sign_in(phone)
        phone.goto("/workspace/calculations")
        header = phone.locator("#calculations thead th", has_text="kgCO2e")
        box = header.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, box
        cell = phone.locator("#calculations tbody tr").first.locator("td.num").last
        cell_box = cell.bounding_box()
        assert cell_box["x"] + cell_box["width"] <= 390 and cell.is_visible()
        assert phone.evaluate("document.documentElement.scrollWidth") <= 390
        phone.goto("/workspace/customers/northwind")
        for table in ("#by-mode", "#by-context"):
            emissions = phone.locator(f"{table} tbody td.num").last.bounding_box()
            assert emissions["x"] + emissions["width"] <= 390, table
        phone.goto("/workspace/audit")
        action = phone.locator("#audit tbody code", has_text="customer.created").first
        line_height = phone.evaluate("(el) => parseFloat(getComputedStyle(el).lineHeight) || 20",
                                     action.element_handle())
        assert action.bounding_box()["height"] < 1.5 * line_height  # one line: not broken mid-word
    finally:
        context.close()


def test_the_delivery_log_shows_a_real_delivery_and_redelivers_it(page, site):
    sign_in(page)
    page.goto("/workspace/webhooks")
    page.fill("#w-url", site.receiver.url)
    page.click("text=Save endpoint")
    assert page.inner_text("#new-secret").startswith("whsec_")
    calculation = site.calculate("hooked", customer_reference="globex", external_reference="hooked")
    assert site.receiver.wait_for(1)
    event_id = site.receiver.received[0].event_id
    delivery = page.locator(f'li.delivery[data-event="{event_id}"]')
    for _ in range(50):  # the worker records the attempt just after the receiver answers
        page.goto("/workspace/webhooks")
        if delivery.get_attribute("data-status") == "succeeded":
            break
        page.wait_for_timeout(100)
    assert delivery.get_attribute("data-status") == "succeeded"
    assert "200" in delivery.locator("table.attempts").inner_text()
    assert calculation["id"] in site.receiver.received[0].body.decode()
    delivery.get_by_role("button", name="Redeliver").click()
    assert site.receiver.wait_for(2)
    assert site.receiver.received[1].event_id == event_id


def test_a_removed_users_open_session_ends(browser, site, page):
    workspace.create_user(Organization.get(Organization.slug == "acme"), "bob@acme.example", PASSWORD, actor="cli")
    bobs = browser.new_context(base_url=site.url)
    try:
        bob = bobs.new_page()
        sign_in(bob, "bob@acme.example")
        sign_in(page)
        page.goto("/workspace/team")
        page.get_by_role("link", name="Remove bob@acme.example").click()
        page.get_by_role("button", name="Remove bob@acme.example").click()
        assert "bob@acme.example was removed" in page.inner_text("main")
        bob.goto("/workspace/keys")
        assert bob.url.endswith("/workspace/login")
        assert User.get_or_none(User.email == "bob@acme.example") is None
    finally:
        bobs.close()


def test_signing_out_ends_the_session_even_for_the_old_cookie(browser, site, page):
    sign_in(page)
    old_cookies = page.context.cookies()
    page.click("text=Sign out")
    page.wait_for_url("**/workspace/login")
    replay = browser.new_context(base_url=site.url)
    try:
        replay.add_cookies(old_cookies)
        again = replay.new_page()
        again.goto("/workspace/keys")
        assert again.url.endswith("/workspace/login")
    finally:
        replay.close()


def test_at_390_px_no_page_scrolls_sideways(browser, site):
    context = browser.new_context(base_url=site.url, viewport={"width": 390, "height": 844})
    try:
        phone = context.new_page()
        phone.goto("/workspace/login")
        assert phone.evaluate("document.documentElement.scrollWidth") <= 390
        sign_in(phone)
        widths = {}
        for path in PAGES:
            phone.goto(path)
            widths[path] = phone.evaluate("document.documentElement.scrollWidth")
        phone.goto("/workspace/calculations")
        phone.locator("#calculations tbody a").first.click()
        phone.wait_for_url("**/workspace/calculations/*")  # not the list's page while it is left
        widths["a calculation"] = phone.evaluate("document.documentElement.scrollWidth")
        assert {path: width for path, width in widths.items() if width > 390} == {}
        assert phone.locator("nav.sidebar").is_visible() and phone.locator(".envswitch").is_visible()
    finally:
        context.close()


def test_long_names_and_references_wrap_instead_of_widening_any_page(browser, site):
    """The longest names and references the API and the forms accept, without a space: every page
    that shows them fits 390 px and 1280 px (an organization of its own, so other tests see none of it)."""
    org = Organization.create(slug="longco", name="Long Co")
    workspace.create_user(org, "long@longco.example", PASSWORD, actor="cli")
    reference = "R" * 120
    make_customer(org, reference, name="N" * 200)
    _, key = auth.create_key(org, "test", list(models.SCOPES), auth.instance_secret(None), name="K" * 200)
    response = requests.post(f"{site.url}/v1/emissions/logistics", timeout=10,
                             json=logistics_body(customer_reference=reference, external_reference="E" * 120),
                             headers={"Authorization": f"Bearer {key}", "Idempotency-Key": "long-1"})
    assert response.status_code == 201, response.text
    calculation = response.json()["id"]
    key_id = ApiKey.get(ApiKey.organization == org.id).id
    paths = ("/workspace", "/workspace/calculations", f"/workspace/calculations/{calculation}",
             "/workspace/customers", f"/workspace/customers/{reference}", "/workspace/keys",
             f"/workspace/keys/{key_id}/revoke")
    for width in (390, 1280):
        context = browser.new_context(base_url=site.url, viewport={"width": width, "height": 900})
        try:
            view = context.new_page()
            sign_in(view, email="long@longco.example")
            widths = {}
            for path in paths:
                view.goto(path)
                widths[path] = view.evaluate("document.documentElement.scrollWidth")
            view.goto("/workspace/keys")
            view.fill("#k-name", "W" * 200)
            view.check('input[value="customers:read"]')
            view.click("text=Create key")
            view.wait_for_url("**/workspace/keys/new")
            widths["the new key"] = view.evaluate("document.documentElement.scrollWidth")
            assert {path: found for path, found in widths.items() if found > width} == {}, width
        finally:
            context.close()


def test_every_input_has_a_label(page):
    sign_in(page)
    unlabelled = {}
    for path in PAGES + ("/workspace/login",):
        page.goto(path)
        found = page.evaluate("""() => [...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
            .filter(el => !(el.labels && el.labels.length) && !el.getAttribute('aria-label'))
            .map(el => el.name)""")
        if found:
            unlabelled[path] = found
    assert unlabelled == {}
