"""README.md stays short and its commands work as printed: the test command is the one CI runs, and
the install command, run in a copy of the repository, starts a sandbox on which the five-minute
tour answers what the README says it answers."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
import requests
from conftest import free_port, output_until_serving

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
    # The guarded install of the browser tests' Chromium (docs/workspace.md) comes before it.
    script = re.sub(r"(?ms)^if ! command -v chromium.*?^fi$", "", script)
    commands = [line for line in script.splitlines()
                if line.strip() and not line.startswith(("#", "set ", "cd ", "export "))]
    assert commands == [test]


def anchor(heading: str) -> str:
    """The fragment a Markdown renderer (GitHub's) gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {anchor(heading) for heading in re.findall(r"^#+ (.+)$", path.read_text(), re.M)}


LATER = {ROOT / "docs" / "performance.md"}  # written in another change; a link to it may come first


@pytest.mark.parametrize("document", ["README.md", *sorted(f"docs/{path.name}" for path in (ROOT / "docs").glob("*.md"))])
def test_every_link_between_the_documents_leads_somewhere(document):
    source = ROOT / document
    for target, fragment in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)", source.read_text()):
        if target.startswith(("http://", "https://")):
            continue
        path = (source.parent / target).resolve() if target else source
        if path in LATER and not path.exists():
            continue
        assert path.exists(), f"{document}: {target}"
        if fragment:
            assert fragment in anchors(path), f"{document}: {target}#{fragment}"


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
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("DATABASE_URL", "PYTHONPATH", "VIRTUAL_ENV")}
    process = subprocess.Popen(["bash", "-c", f"{install} --port {port}"], cwd=checkout, env=environment,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        text = output_until_serving(process)
        key = re.search(r"Test API key \(shown once\): (\S+)", text)
        assert key, process.stderr.read() if process.poll() is not None else text
        yield {"checkout": checkout, "env": {**environment, "KEY": key.group(1), "BASE": f"http://127.0.0.1:{port}"}}
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
