"""The README's five-minute tour, run as printed: its curl lines against a quickstart on a free port, with
the key quickstart prints, each answer checked against what the README says it shows (issue 37)."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest

from conftest import EMISSIONS, free_port, output_until_serving

README = Path(__file__).resolve().parent.parent / "README.md"
pytestmark = pytest.mark.skipif(not Path("/usr/bin/curl").exists() and not any(
    (Path(d) / "curl").exists() for d in os.environ.get("PATH", "").split(os.pathsep)), reason="the tour uses curl")


def tour() -> str:
    text = README.read_text(encoding="utf-8")
    return text.split("## Five-minute tour", 1)[1].split("**Workspace sign-in.**", 1)[0]


def blocks(section: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", section, re.S)


def answer(raw: str) -> tuple[int, dict[str, str], bytes]:
    """A `curl -i` answer as status, headers and body."""
    head, _, body = raw.replace("\r\n", "\n").partition("\n\n")  # the shell's text mode, whichever ends lines
    status_line, *header_lines = head.split("\n")
    headers = {name.strip().lower(): value.strip() for name, value in
               (line.split(":", 1) for line in header_lines)}
    return int(status_line.split()[1]), headers, body.encode()


@pytest.fixture
def quickstart(tmp_path):
    port = free_port()
    environment = {name: value for name, value in os.environ.items() if name != "DATABASE_URL"}
    process = subprocess.Popen([str(EMISSIONS), "quickstart", "--port", str(port)], cwd=tmp_path, env=environment,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        printed = output_until_serving(process)
        key = re.search(r"Test API key \(shown once\): (service_test_\w+)", printed).group(1)
        curl = printed.split("Try it from another terminal:\n\n", 1)[1].split("\n\n", 1)[0]
        yield {**environment, "KEY": key, "BASE": f"http://127.0.0.1:{port}"}, curl
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)


def shell(command: str, environment: dict) -> str:
    done = subprocess.run(["bash", "-c", f"set -euo pipefail\n{command}"], env=environment, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_every_step_of_the_tour_answers_as_the_readme_says(quickstart):
    environment, quickstart_curl = quickstart
    section = tour()
    export, calculate, read, analytics = blocks(section)
    assert export.startswith("export KEY=service_test_... BASE=http://127.0.0.1:8000")

    # The quickstart's own curl line first: the period example must leave it out, as the README says.
    own = json.loads(shell(quickstart_curl, environment))
    assert own["status"] == "succeeded"

    status, headers, body = answer(shell(calculate, environment))
    first = json.loads(body)
    assert (status, headers["idempotent-replayed"]) == (201, "false")
    assert first["activity"] == {"value": 4000, "unit": "tkm"}
    assert first["emissions"]["value"] == 500.88 and first["emissions"]["breakdown"] == {"ttw": 406.52, "wtt": 94.36}
    assert "500.88" in section and "406.52" in section and "94.36" in section

    status, headers, replayed = answer(shell(calculate, environment))  # **Replay.** the same command again
    assert (status, headers["idempotent-replayed"], replayed) == (200, "true", body)
    assert "change\n`320` to `321`" in section or "change `320` to `321`" in section
    status, _, refused = answer(shell(calculate.replace("320", "321"), environment))
    assert status == 409 and json.loads(refused)["error"]["code"] == "IDEMPOTENCY_KEY_REUSED"

    read_back = json.loads(shell(read, {**environment, "ID": first["id"]}))
    assert read_back == first

    totals = json.loads(shell(analytics, environment))["analytics"]
    assert totals["calculation_count"] == 2  # tour-1 once (the replay added nothing) and the quickstart's line

    period = re.search(r"Add `(\?from=\d{4}-\d{2}-\d{2}&to=\d{4}-\d{2}-\d{2})`", section).group(1)
    url = re.search(r'"(\$BASE/v1/customers/demo-customer/emissions)"', analytics).group(1)
    quarter = json.loads(shell(analytics.replace(url, url + period), environment))["analytics"]
    assert quarter["calculation_count"] == 1, "the tour's period example must count tour-1 alone"
    assert quarter["first_activity_date"] == first["activity_date"] == quarter["last_activity_date"]
    assert quarter["activity"]["value"] == 4000 and quarter["emissions"]["value"] == 500.88
    assert [month["calculation_count"] for month in quarter["by_month"] if month["calculation_count"]] == [1]
    assert "counts\n`tour-1` alone" in section or "counts `tour-1` alone" in section

    statement_url = url.replace("/emissions", "/statement") + period
    statement = json.loads(shell(analytics.replace(url, statement_url), environment))
    assert statement["object"] == "statement" and statement["totals"]["calculation_count"] == 1
    assert Decimal(str(statement["totals"]["emissions"]["value"])) == Decimal("500.88")

    listing_url = "$BASE/v1/calculations?external_reference=tour-1"
    found = json.loads(shell(analytics.replace(f'"{url}"', f'"{listing_url}"'), environment))
    assert [item["id"] for item in found["data"]] == [first["id"]]
