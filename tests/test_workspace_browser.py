"""The workspace in a real browser: Debian's Chromium driven by Playwright against a real Waitress
server, a real webhook delivery worker and a real local receiver. Skipped where no Chromium is installed
(`.ci/run` installs it); Playwright never downloads a browser of its own here."""
from __future__ import annotations

import datetime as dt
import re
import threading

import pytest
import requests

from emissions import auth
from emissions import clock
from emissions import customers
from emissions import factor_files
from emissions import figures
from emissions import jsoncodec
from emissions import models
from emissions.webhooks import delivery as webhook_delivery
from emissions import workspace
from emissions.app import create_app
from emissions.config import Config
from emissions.models import ApiKey, Organization, User
from emissions.workspace import insights
from conftest import CHROMIUM, POSTGRES_URL, LiveServer, logistics_body, make_customer, make_factor, postgres_schema_url, TERMINAL
from helpers import worked_example
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
        self.today = clock.today()  # the activity date of the seeded calculations (a run may pass midnight)

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
                     figures.co2e_unit(statement["totals"]["emissions"]["value"]).number(
                         statement["totals"]["emissions"]["value"]),
                     f'Emissions ({figures.co2e_unit(statement["totals"]["emissions"]["value"]).name})',
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


# --- a forwarder's month: a shipment closed last month, a calculation this month (issue 32, items 7 to 11) ---

class Forwarder:
    """An organization of its own (other tests see none of it) with a shipment dated in the month being
    closed (the last complete one) and a road calculation dated today, by the one clock."""

    def __init__(self, site: Site):
        self.org = Organization.create(slug="shipco", name="Ship Co")
        workspace.create_user(self.org, "ops@shipco.example", PASSWORD, actor="cli")
        make_customer(self.org, "northwind", name="Northwind Ltd")
        _, self.key = auth.create_key(self.org, "test", list(models.SCOPES), auth.instance_secret(None), name="seed")
        self.today = clock.today()
        self.last_month = (self.today.replace(day=1) - dt.timedelta(days=1)).replace(day=10)
        self.shipment = self.post(site, "/v1/shipments", "ship-1", worked_example(
            customer_reference="northwind", activity_date=self.last_month.isoformat()))
        self.calculation = self.post(site, "/v1/emissions/logistics", "road-1", logistics_body(
            customer_reference="northwind", external_reference="road-1", activity_date=self.today.isoformat()))

    def post(self, site: Site, path: str, idempotency_key: str, body: dict) -> dict:
        response = requests.post(f"{site.url}{path}", json=body, timeout=10, headers={
            "Authorization": f"Bearer {self.key}", "Idempotency-Key": idempotency_key})
        assert response.status_code == 201, response.text
        return jsoncodec.loads(response.content)

    def pages(self) -> dict:
        return {"overview": "/workspace", "shipment": f"/workspace/shipments/{self.shipment['id']}",
                "shipments": "/workspace/shipments", "customer": "/workspace/customers/northwind?period=all",
                "statement": "/workspace/customers/northwind?period=all&format=statement"}


@pytest.fixture(scope="module")
def forwarder(site):
    factor_files.load_library(actor="test")  # the default road and sea factors of a shipment's legs
    make_factor(TERMINAL, mode="HUB", value=None, ttw_value="0.95", wtt_value="0.35", name="Container terminal",
                hub_type="container_terminal")
    return Forwarder(site)


def signed_in_view(browser, site, width: int):
    """A new browser context at this width, signed in as the forwarder, and its console's CSP refusals."""
    context = browser.new_context(base_url=site.url, viewport={"width": width, "height": 900})
    context.set_default_timeout(10_000)
    view = context.new_page()
    refused = []
    view.on("console", lambda message: refused.append(message.text)
            if "Content Security Policy" in message.text else None)
    sign_in(view, email="ops@shipco.example")
    return context, view, refused


@pytest.mark.parametrize("width", [1280, 390])
def test_a_shipments_bars_have_their_widths_and_its_chain_reads_whole(browser, site, forwarder, width):
    """Items 7 and 8: the bars were all full width (the CSP refused their inline style), and the chain cut
    a hub's figure off at about 9 px on a phone."""
    context, view, refused = signed_in_view(browser, site, width)
    try:
        view.goto(forwarder.pages()["shipment"])
        elements = forwarder.shipment["elements"]
        largest = max(element["emissions"]["value"] for element in elements)
        for element in elements:
            bar = view.locator(f'#bars li[data-index="{element["index"]}"] svg.bar')
            track, fill = bar.locator("rect.track").bounding_box(), bar.locator("rect.fill").bounding_box()
            expected = float(element["emissions"]["value"] / largest)
            assert track["width"] > 100 and abs(fill["width"] / track["width"] - expected) < 0.01, element["index"]
        assert refused == []
        texts = view.evaluate("""() => {
            const svg = document.querySelector('svg.chain'), box = svg.getBoundingClientRect();
            const scale = box.width / svg.viewBox.baseVal.width;
            return [...svg.querySelectorAll('text')].map(text => {
                const own = text.getBoundingClientRect();
                return {text: [...text.querySelectorAll('tspan')].map(span => span.textContent).join(' '),
                        px: parseFloat(getComputedStyle(text).fontSize) * scale,
                        inside: own.left >= box.left - 0.5 && own.right <= box.right + 0.5
                                && own.top >= box.top - 0.5 && own.bottom <= box.bottom + 0.5};
            });
        }""")
        assert len(texts) == 7 and all(text["inside"] for text in texts), texts
        assert min(text["px"] for text in texts) >= 12, texts
        assert not any("…" in text["text"] for text in texts)
        hub = elements[2]["emissions"]["value"]
        # The place's name drawn in its isolate (U+2068...U+2069), the hub's figure whole on its own line.
        assert any(text["text"] == f"Container terminal · \u2068GBFXT\u2069 {figures.TONNES.text(hub)}"
                   for text in texts), texts
        assert view.evaluate("document.documentElement.scrollWidth") <= width
    finally:
        context.close()


def test_at_390_px_the_statement_and_the_forwarders_pages_do_not_scroll_sideways(browser, site, forwarder):
    """Item 9: the printable statement scrolled sideways (743 px); its tables now scroll inside their section."""
    context, view, _ = signed_in_view(browser, site, 390)
    try:
        widths = {}
        for name, path in forwarder.pages().items():
            view.goto(path)
            widths[name] = view.evaluate("document.documentElement.scrollWidth")
        assert {name: width for name, width in widths.items() if width > 390} == {}
        # The statement's table is whole, reached by scrolling its section.
        section = view.locator("#statement-modes").locator("xpath=ancestor::section")
        assert view.evaluate("(el) => getComputedStyle(el).overflowX", section.element_handle()) == "auto"
    finally:
        context.close()


def test_every_table_and_page_says_its_emissions_unit_once(browser, site, forwarder):
    """Item 10: "2.44 t CO2e" stood above "542.71 kgCO2e", and the chain and the bars of one shipment used
    different units."""
    context, view, _ = signed_in_view(browser, site, 1280)
    try:
        view.goto(forwarder.pages()["shipment"])
        shown = view.evaluate("""() => [...document.querySelectorAll('main *')]
            .filter(el => !el.closest('pre') && el.children.length === 0 && el.tagName !== 'title')
            .map(el => el.textContent)""")
        units = {match for text in shown for match in re.findall(r"kgCO2e(?!/)|t CO2e", text)}
        assert units == {"t CO2e"}, units  # 9.94 t in total: the chain, the bars and the cards in tonnes
        assert view.inner_text("#bars") .count("CO2e") == 0 and "t CO2e" in view.inner_text(".side .panelhead")
        view.goto(forwarder.pages()["customer"])
        header = view.inner_text("#by-mode thead th:last-child")
        assert header.lower().endswith("t co2e"), header
        cells = view.locator("#by-mode tbody td[data-value]").all_inner_texts()
        assert len(cells) == 3 and not any("CO2e" in cell for cell in cells), cells  # road, sea and the hubs
        view.goto(forwarder.pages()["statement"])
        for table in ("#statement-totals", "#statement-modes", "#statement-months"):
            assert "Emissions (t CO2e)" in view.inner_text(f"{table} thead"), table
            assert "CO2e" not in view.inner_text(f"{table} tbody"), table
    finally:
        context.close()


def test_the_overview_shows_the_month_being_closed_beside_this_one_and_another_can_be_picked(browser, site,
                                                                                            forwarder):
    """Item 11: during a month's close the overview showed 0 for the new month and the last could not be picked."""
    context, view, _ = signed_in_view(browser, site, 390)
    try:
        view.goto("/workspace")
        last, this = forwarder.last_month.strftime("%Y-%m"), forwarder.today.strftime("%Y-%m")
        months = view.locator("#months li")
        assert months.evaluate_all("(items) => items.map(item => item.dataset.month)") == [last, this]
        shipment_kg = forwarder.shipment["totals"]["emissions"]["value"]
        assert view.get_attribute(f'#months li[data-month="{last}"]', "data-kg") == jsoncodec.decimal_text(shipment_kg)
        assert view.get_attribute(f'#months li[data-month="{this}"]', "data-kg") == jsoncodec.decimal_text(
            forwarder.calculation["emissions"]["value"])
        assert view.input_value("#o-period") == "last-and-this-month"
        view.select_option("#o-period", "last-month")
        view.click("text=Show")
        view.wait_for_url("**period=last-month**")
        assert months.evaluate_all("(items) => items.map(item => item.dataset.month)") == [last]
        assert view.get_attribute("#emissions .figure", "data-month-kg") == jsoncodec.decimal_text(shipment_kg)
        assert view.evaluate("document.documentElement.scrollWidth") <= 390
    finally:
        context.close()
