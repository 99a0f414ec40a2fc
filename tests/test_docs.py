"""README.md stays short and its commands work as printed: the test command is the one CI runs, and
the install command, run in a copy of the repository, starts a sandbox on which the five-minute
tour answers what the README says it answers."""
from __future__ import annotations

import ast
import io
import json
import os
import re
import shutil
import signal
import subprocess
import tokenize
from pathlib import Path

import pytest
import requests
from conftest import free_port, output_until_serving
from helpers import clean_environment

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
REPOSITORY_FILES = ("emissions", "setup.cfg", "pyproject.toml", "README.md")


def section(title: str) -> str:
    return README.read_text().split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def shell_blocks(title: str) -> list[str]:
    return [block.strip() for block in re.findall(r"```sh\n(.*?)```", section(title), re.S)]


def test_the_readme_is_at_most_10000_bytes():
    assert len(README.read_bytes()) <= 10_000


def test_the_readme_gives_two_commands():
    install, test = shell_blocks("Two commands")
    assert install == "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/emissions quickstart"
    assert test == "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/pytest"


def test_ci_runs_the_readme_test_command_exactly():
    _, test = shell_blocks("Two commands")
    script = (ROOT / ".ci" / "run").read_text()
    # The guarded install of the browser tests' Chromium and of faketime comes before it.
    script = re.sub(r"(?ms)^if ! command -v chromium.*?^fi$", "", script)
    commands = [line for line in script.splitlines()
                if line.strip() and not line.startswith(("#", "set ", "cd ", "export "))]
    # Then the same suite once more with the machine's date a year ahead (issue 32: no test may depend on it).
    assert commands == [test, "FAKETIME_DONT_FAKE_MONOTONIC=1 faketime -f +365d .venv/bin/pytest"]


def anchor(heading: str) -> str:
    """The fragment a Markdown renderer (GitHub's) gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {anchor(heading) for heading in re.findall(r"^#+ (.+)$", path.read_text(), re.M)}


DOCUMENTS = ["README.md", *sorted(f"docs/{path.name}" for path in (ROOT / "docs").glob("*.md"))]
CODE = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "emissions").rglob("*.py"))

# Code files whose comments the two checks below skip (file: what), while their owners fix them.
# Empty: every file of the package is checked.
COMMENTS_NOT_YET_CHECKED: dict[str, str] = {}


def headings(path: Path) -> list[str]:
    return re.findall(r"^#+ (.+?)\s*$", path.read_text(), re.M)


def names_a_heading(path: Path, title: str) -> bool:
    """True when `title` is a heading of the document, or the start of one ("Durability" for
    "Durability (SQLite)")."""
    title = title.strip().lower()
    return any(heading.lower() == title or heading.lower().startswith(title + " ") for heading in headings(path))


# `docs/name.md`, `docs/name.md#anchor`, `docs/name.md, "Heading"` or `(docs/name.md, Heading)`.
DOCS_POINTER = re.compile(r'\bdocs/([\w/-]+\.md)(?:#([\w-]+)|, "([^"]+)"|, ([A-Z][^()"\n]*)\))?')
README_POINTER = re.compile(r'\bREADME(?:\.md)?(?:, "([^"]+)"|: ([\w ]+))')


def broken_pointers(text: str) -> list[str]:
    """The `docs/...` and README section pointers in `text` that lead nowhere."""
    broken = []
    for name, fragment, quoted, bare in DOCS_POINTER.findall(text):
        target = ROOT / "docs" / name
        title = quoted or bare
        if not target.exists():
            broken.append(f"docs/{name}")
        elif fragment and fragment not in anchors(target):
            broken.append(f"docs/{name}#{fragment}")
        elif title and not names_a_heading(target, title):
            broken.append(f'docs/{name}, "{title}"')
    for quoted, bare in README_POINTER.findall(text):
        if not names_a_heading(README, quoted or bare):
            broken.append(f'README, "{quoted or bare}"')
    return broken


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_link_between_the_documents_leads_somewhere(document):
    source = ROOT / document
    for target, fragment in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)", source.read_text()):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path = (source.parent / target).resolve() if target else source
        assert path.exists(), f"{document}: {target}"
        if fragment:
            assert fragment in anchors(path), f"{document}: {target}#{fragment}"


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_docs_pointer_in_the_documents_leads_somewhere(document):
    assert broken_pointers((ROOT / document).read_text()) == []


def comments(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring of a Python file."""
    source = path.read_text()
    found = [(token.start[0], token.string) for token in tokenize.generate_tokens(io.StringIO(source).readline)
             if token.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                found.append((body[0].lineno, body[0].value.value))
    return found


@pytest.mark.parametrize("module", CODE)
def test_every_docs_pointer_in_the_code_leads_somewhere(module):
    """Messages to users included: `docs/...` anywhere in the file."""
    if module in COMMENTS_NOT_YET_CHECKED:
        pytest.skip(COMMENTS_NOT_YET_CHECKED[module])
    assert broken_pointers((ROOT / module).read_text()) == []


# A document outside the repository, by the names the code used for them: the shared interface
# spec and product decisions, the design card, the style guide. A comment points to the docs/ page
# that states the rule instead.
OUTSIDE_DOCUMENT = re.compile(r"\b(decisions?,? sections?|product[- ]decisions|interface[- ]spec|spec,? (section )?\d"
                              r"|design card|style\.md|transport-chains)", re.I)
# Numbers of a measurement: they go stale in a comment; docs/performance.md holds them, dated.
MEASUREMENT = re.compile(r"\d\s?(us|µs|microseconds?)\b|\d\s?req/s|\d[\d,]* (GETs|POSTs|requests) a second", re.I)
# A change's history ("issue 23"): the commit log holds it; a comment says why the code is as it is.
HISTORY = re.compile(r"\bissues? #?\d+", re.I)


@pytest.mark.parametrize("module", CODE)
def test_no_comment_names_a_document_outside_the_repository_a_measurement_or_an_issue(module):
    if module in COMMENTS_NOT_YET_CHECKED:
        pytest.skip(COMMENTS_NOT_YET_CHECKED[module])
    found = [f"{module}:{line}: {match.group(0)}" for line, text in comments(ROOT / module)
             for match in [*OUTSIDE_DOCUMENT.finditer(text), *MEASUREMENT.finditer(text), *HISTORY.finditer(text)]]
    assert found == []


def test_the_pointer_checks_find_what_they_look_for():
    assert broken_pointers('see docs/operations.md, "Several workers" and docs/cli.md') == []
    assert broken_pointers('docs/nowhere.md') == ["docs/nowhere.md"]
    assert broken_pointers('(docs/operations.md, No Such Section)') == ['docs/operations.md, "No Such Section"']
    assert broken_pointers('docs/operations.md#no-such-anchor') == ["docs/operations.md#no-such-anchor"]
    assert broken_pointers('see README: several instances') == ['README, "several instances"']
    assert OUTSIDE_DOCUMENT.search("the tenant-safe 404 (decisions, section 1)")
    assert MEASUREMENT.search("about 5 us a request")
    assert HISTORY.search("# --- shipments (issue 23) ---") and HISTORY.search("see issues 22 and 23")
    assert not HISTORY.search("sessions.issue(user)") and not HISTORY.search("the secret a rotation issued")


def test_the_api_manual_lists_every_api_route_once(app):
    listed = [(method, re.sub(r"\{[^}]+\}", "{}", path)) for method, path in
              re.findall(r"^\| `(GET|POST) (/\S+)`", (ROOT / "docs" / "api.md").read_text(), re.M)]
    served = [(route.method, re.sub(r"<[^>]+>", "{}", route.rule)) for route in app.routes
              if route.rule.startswith("/v1/") or route.rule == "/healthz"]
    assert sorted(listed) == sorted(served)


def test_every_document_the_readme_sends_to_has_a_title():
    for name in ("api.md", "cli.md", "webhooks.md", "operations.md"):
        assert (ROOT / "docs" / name).read_text().startswith("# "), name


# --- the install command and the tour, as a newcomer runs them ---------------------------------------

def split_http(output: str) -> tuple[int, dict[str, str], str]:
    """`curl -i` output: status, headers (lower-case names), body."""
    head, body = output.split("\n\n", 1)  # text mode reads \r\n as \n
    status_line, *header_lines = head.split("\n")
    headers = {name.lower(): value for name, value in (line.split(": ", 1) for line in header_lines)}
    return int(status_line.split()[1]), headers, body


@pytest.fixture
def sandbox(tmp_path):
    """The README's install command, run as printed (plus a free port) in a copy of the repository."""
    if not shutil.which("curl") or not shutil.which("bash"):
        pytest.skip("the README's commands need curl and bash")
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    for name in REPOSITORY_FILES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, checkout / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, checkout / name)
    install, _ = shell_blocks("Two commands")
    port = free_port()
    # As `pip install --no-compile`: the tour compiles what it imports, not every module pip installs.
    environment = clean_environment(PIP_COMPILE="false")
    process = subprocess.Popen(["bash", "-c", f"{install} --port {port}"], cwd=checkout, env=environment,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        text = output_until_serving(process)
        key = re.search(r"Test API key \(shown once\): (\S+)", text)
        assert key, process.stderr.read() if process.poll() is not None else text
        yield {"checkout": checkout, "env": {**environment, "KEY": key.group(1), "BASE": f"http://127.0.0.1:{port}"},
               "curl": text.split("Try it from another terminal:\n\n", 1)[1].split("\n\n", 1)[0]}
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert "Stopped." in out


def run(block: str, sandbox, **env: str) -> str:
    result = subprocess.run(["bash", "-c", block], cwd=sandbox["checkout"], env={**sandbox["env"], **env},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_install_command_starts_a_sandbox_on_which_the_tour_works_as_written(sandbox):
    setup, calculate, read, analytics, sign_up = shell_blocks("Five-minute tour")
    assert setup.startswith("export KEY=service_test_") and "BASE=http://127.0.0.1:8000" in setup

    status, headers, body = split_http(run(calculate, sandbox))
    assert (status, headers["idempotent-replayed"]) == (201, "false")
    calculation = json.loads(body)
    assert calculation["activity"] == {"value": 4000, "unit": "tkm"}
    assert calculation["emissions"] == {"value": 500.88, "unit": "kgCO2e", "breakdown": {"ttw": 406.52, "wtt": 94.36}}
    assert "id" not in calculation["factor"] and calculation["factor"]["version"] == 1

    status, headers, replayed = split_http(run(calculate, sandbox))
    assert (status, headers["idempotent-replayed"], replayed) == (200, "true", body)
    assert '"value": 320' in calculate
    status, _, reused = split_http(run(calculate.replace('"value": 320', '"value": 321'), sandbox))
    assert status == 409 and json.loads(reused)["error"]["code"] == "IDEMPOTENCY_KEY_REUSED"

    assert json.loads(run(read, sandbox, ID=calculation["id"])) == calculation

    totals = json.loads(run(analytics, sandbox))["analytics"]
    assert totals["calculation_count"] == 1
    assert totals["activity"] == {"value": 4000, "unit": "tkm"}
    assert totals["emissions"] == {"value": 500.88, "unit": "kgCO2e",
                                   "breakdown": {"ttw": 406.52, "wtt": 94.36, "unattributed": 0}}

    # The period example (issue 37): with the quickstart's own line sent too (dated the day it runs), the
    # README's quarter counts tour-1 alone, on any date; the statement of that period says the same.
    assert json.loads(run(sandbox["curl"], sandbox))["status"] == "succeeded"
    tour = section("Five-minute tour")
    period = re.search(r"Add `(\?from=\d{4}-\d{2}-\d{2}&to=\d{4}-\d{2}-\d{2})`", tour).group(1)
    assert re.search(r"counts\s+`tour-1` alone", tour)
    url = "$BASE/v1/customers/demo-customer/emissions"
    assert f'"{url}"' in analytics
    quarter = json.loads(run(analytics.replace(url, url + period), sandbox))["analytics"]
    assert quarter["calculation_count"] == 1 and quarter["emissions"]["value"] == 500.88
    assert quarter["first_activity_date"] == calculation["activity_date"] == quarter["last_activity_date"]
    statement = json.loads(run(analytics.replace(url, url.replace("/emissions", "/statement") + period), sandbox))
    assert statement["totals"]["calculation_count"] == 1 and statement["first_activity_date"] == "2026-01-15"
    assert "`?external_reference=tour-1` finds" in tour
    listed = json.loads(run(analytics.replace(url, "$BASE/v1/calculations?external_reference=tour-1"), sandbox))
    assert [found["id"] for found in listed["data"]] == [calculation["id"]]

    run(sign_up, sandbox)
    email = re.search(r"--email (\S+)", sign_up).group(1)
    password = re.search(r"printf '%s\\n' '([^']*)'", sign_up).group(1)
    browser = requests.Session()
    base = sandbox["env"]["BASE"]
    form = browser.get(f"{base}/workspace/login", timeout=30)
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text).group(1)
    signed_in = browser.post(f"{base}/workspace/login", data={"csrf": csrf, "email": email, "password": password},
                             timeout=30)
    for _ in range(200):  # the password is checked off the serving thread; the page looks again
        if "Signing you in" not in signed_in.text:
            break
        signed_in = browser.get(f"{base}/workspace/login/wait", timeout=30)
    assert signed_in.status_code == 200 and signed_in.url.endswith("/workspace")
    assert "Revoke" in browser.get(f"{base}/workspace/keys", timeout=30).text  # the quickstart's key, listed


# --- code names in the documents ---------------------------------------------------------------------

CODE_NAME = re.compile(r"`((?:emissions\.)?[a-z_]+(?:\.[A-Za-z_][A-Za-z0-9_]*)+)(?:\(\))?`")
FILE_NAME = re.compile(r"\.(py|pyz|tpl|md|json|csv|sqlite3|lock)$")


def missing_code_names(text: str) -> list[str]:
    """The `module.name` a document quotes whose module is the package's and whose name it lacks."""
    import importlib

    modules: dict[str, str] = {}  # a module's or package's last name: its dotted name, the shallowest one
    for path in sorted((ROOT / "emissions").rglob("*.py"), key=lambda path: len(path.parts), reverse=True):
        dotted = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        modules[dotted.rsplit(".", 1)[-1]] = dotted
    missing = []
    for name in CODE_NAME.findall(text):
        if FILE_NAME.search(name):
            continue
        parts = name.removeprefix("emissions.").split(".")
        if parts[0] not in modules:
            continue  # a field, an event type, a host: not a module of the package
        target = importlib.import_module(modules[parts[0]])
        for attribute in parts[1:]:
            if not hasattr(target, attribute):
                missing.append(name)
                break
            target = getattr(target, attribute)
    return missing


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_code_name_the_documents_quote_exists(document):
    assert missing_code_names((ROOT / document).read_text()) == []


def test_the_code_name_check_finds_what_it_looks_for():
    assert missing_code_names("`store.Write`, `emissions.db.SQLITE_PRAGMAS`, `cargo.value`, `emissions.pyz`") == []
    assert missing_code_names("`calculations._no_such_function` and `server.NoSuchClass.method`") == [
        "calculations._no_such_function", "server.NoSuchClass.method"]
