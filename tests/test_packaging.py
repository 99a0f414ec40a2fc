"""The service as a user gets it, outside this source tree: a wheel that holds only `emissions` with
its data files, installed (not editable) into a fresh virtual environment, and dist/emissions.pyz,
one file that serves with nothing else installed.

These tests build from a copy of the files a build reads, so the working tree's build/ leftovers
never reach what they check. The fresh environment links this environment's own dependencies in
(downloading them again would only test the network), all but the PostgreSQL driver.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
import requests
from conftest import FAKETIME_SHIM, free_port

ROOT = Path(__file__).resolve().parent.parent
NOT_LINKED = ("psycopg2", "emissions", "__editable__", "__pycache__")  # prefixes left out of the fresh venv
CLOSED_POSTGRES = "postgresql://postgres@127.0.0.1:{port}/nothing?connect_timeout=2"


def clean_environment(**extra: str) -> dict[str, str]:
    """This process's environment without what would point a command at this tree or its database."""
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("PYTHONPATH", "DATABASE_URL", "PYTHONHOME", "VIRTUAL_ENV")}
    if "FAKETIME" in environment:  # a year ahead (.ci/run): only the sleep shim, none of this tree
        environment["PYTHONPATH"] = str(FAKETIME_SHIM)
    return {**environment, **extra}


def site_packages(venv: Path) -> Path:
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return venv / "lib" / version / "site-packages"


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A fresh venv (no system site-packages) with the wheel installed by pip, not editable: its bin/."""
    venv = tmp_path_factory.mktemp("installed") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    target = site_packages(venv)
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.startswith(NOT_LINKED) and entry.suffix != ".pth":
            (target / entry.name).symlink_to(entry)
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                           str(wheel)], capture_output=True, text=True, env=clean_environment(), timeout=300)
    assert done.returncode == 0, done.stderr
    return venv / "bin"


def closed_port() -> int:
    return free_port()  # nothing listens there once the probe is closed


def post_printed_curl(curl: str) -> requests.Response:
    """Send the calculation of the curl line quickstart printed, as curl would."""
    url = re.search(r"curl -sS -X POST (\S+)", curl).group(1)
    headers = dict(header.split(": ", 1) for header in re.findall(r"-H '([^']*)'", curl))
    body = re.search(r"-d '([^']*)'", curl).group(1)
    return requests.post(url, data=body.encode(), headers=headers, timeout=30)


class Served:
    """`command... --port P --json` running in cwd until SIGTERM; .announced is its JSON line."""

    def __init__(self, argv: list[str], cwd: Path, **env: str):
        self.port = free_port()
        self.process = subprocess.Popen([*argv, "--port", str(self.port), "--json"], cwd=cwd,
                                        env=clean_environment(**env), stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)

    def __enter__(self):
        line = self.process.stdout.readline()
        if not line:
            self.process.kill()
            raise AssertionError(f"nothing announced: {self.process.communicate(timeout=30)[1]}")
        self.announced = json.loads(line)
        return self

    def __exit__(self, *exc):
        self.process.send_signal(signal.SIGTERM)
        self.out, self.err = self.process.communicate(timeout=30)
        assert self.process.returncode == 0, self.err
        assert "Stopped." in self.err


def test_the_wheel_holds_only_the_emissions_package(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/", 1)[0] for name in names if ".dist-info/" not in name}
    assert top == {"emissions"}
    (top_level,) = [name for name in names if name.endswith(".dist-info/top_level.txt")]
    assert zipfile.ZipFile(wheel).read(top_level).decode().split() == ["emissions"]


def test_the_wheel_carries_every_module_and_data_file_of_the_package(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"emissions/data/desnz-2025-freight.json", "emissions/schemas/openapi.json", "emissions/__main__.py"} <= names
    package = ROOT / "emissions"
    source_files = {f"emissions/{path.relative_to(package).as_posix()}" for path in package.rglob("*")
                    if path.is_file() and "__pycache__" not in path.parts}
    assert source_files <= names, sorted(source_files - names)


def test_the_install_records_no_top_level_name_but_emissions(installed):
    (dist_info,) = site_packages(installed.parent).glob("emissions_service-*.dist-info")
    paths = [line.rsplit(",", 2)[0] for line in (dist_info / "RECORD").read_text().splitlines()]
    assert {path.split("/", 1)[0] for path in paths if not path.startswith("../")} == {"emissions", dist_info.name}
    assert [path for path in paths if path.startswith("../")] == ["../../../bin/emissions"]  # the command


def test_a_fresh_install_answers_a_calculation_from_an_empty_directory(installed, tmp_path):
    where = subprocess.run([str(installed / "python"), "-c", "import emissions; print(emissions.__file__)"],
                           cwd=tmp_path, env=clean_environment(), capture_output=True, text=True, timeout=60)
    assert Path(where.stdout.strip()).is_relative_to(installed.parent), where.stdout  # not this source tree
    with Served([str(installed / "emissions"), "quickstart"], cwd=tmp_path) as quickstart:
        response = post_printed_curl(quickstart.announced["curl"])
        assert response.status_code == 201, response.text
        assert response.json()["activity"] == {"value": 4000, "unit": "tkm"}
        assert response.json()["factor"]["source"].startswith("DESNZ, Greenhouse gas reporting")  # the library: package data
    assert (tmp_path / "emissions.sqlite3").exists()


def test_python_m_emissions_is_the_cli_of_the_installed_package(installed, tmp_path):
    migrated = subprocess.run([str(installed / "python"), "-m", "emissions", "migrate", "--json"], cwd=tmp_path,
                              env=clean_environment(), capture_output=True, text=True, timeout=60)
    assert migrated.returncode == 0, migrated.stderr
    assert "0001_initial" in json.loads(migrated.stdout)["applied"]


def test_without_the_postgres_extra_a_postgresql_url_is_one_line_naming_the_extra(installed, tmp_path):
    for command in ("migrate", "serve"):
        result = subprocess.run([str(installed / "emissions"), command], cwd=tmp_path, capture_output=True, text=True,
                                env=clean_environment(DATABASE_URL=CLOSED_POSTGRES.format(port=closed_port())),
                                timeout=60)
        assert result.returncode == 1
        assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert "pip install 'emissions-service[postgres]'" in result.stderr


# --- dist/emissions.pyz -----------------------------------------------------------------------------

PYTHONS = ("3.11", "3.12", "3.13", "3.14")  # what scripts/build-pyz builds for
RUNNING = f"{sys.version_info.major}.{sys.version_info.minor}"


@pytest.fixture(scope="module")
def pyz(source) -> Path:
    """scripts/build-pyz run as a person runs it (no arguments), with this environment's python3 first on PATH."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    built = subprocess.run([str(source / "scripts" / "build-pyz")], cwd=source, capture_output=True, text=True,
                           env=clean_environment(PATH=path), timeout=600)
    assert built.returncode == 0, built.stderr
    assert re.fullmatch(r"dist/emissions\.pyz \([0-9.]+ MB\), for CPython [0-9., ]+ on \S+ \S+",
                        built.stdout.splitlines()[-1]), built.stdout
    return source / "dist" / "emissions.pyz"


def find_python(version: str) -> str | None:
    """An interpreter of that version on this machine: on PATH, or installed by pyenv beside it."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates = [shutil.which(f"python{version}"), *map(str, sorted(pyenv.glob(f"{version}.*/bin/python{version}")))]
    for candidate in filter(None, candidates):
        answered = subprocess.run([candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                  capture_output=True, text=True, timeout=60)
        if answered.returncode == 0 and answered.stdout.strip() == version:
            return candidate
    return None


def bare_venv(python: str, where: Path) -> Path:
    """A Python with nothing but its standard library: a venv without pip or system site-packages."""
    subprocess.run([python, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    assert not any((where / "lib").glob("python3.*/site-packages/*"))
    return where / "bin" / "python"


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> Path:
    return bare_venv(sys.executable, tmp_path_factory.mktemp("bare") / "venv")


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory) -> dict[str, str]:
    """Where the pyz unpacks its dependencies (SHIV_ROOT): its first run here unpacks them, the later
    ones, on any Python, use them (the unpacked files are the same for every Python)."""
    return {"SHIV_ROOT": str(tmp_path_factory.mktemp("shiv"))}


def test_the_pyz_carries_the_postgres_driver_and_no_source_tree_files(pyz):
    names = zipfile.ZipFile(pyz).namelist()
    assert "site-packages/emissions/data/desnz-2025-freight.json" in names
    assert any(name.startswith("site-packages/psycopg2/") for name in names)
    assert not any(name.startswith(("site-packages/tests/", "site-packages/bench/")) for name in names)


def test_the_pyz_runs_quickstart_and_serve_with_nothing_else_installed(pyz, bare_python, unpacked, tmp_path):
    with Served([str(bare_python), str(pyz), "quickstart"], cwd=tmp_path, **unpacked) as quickstart:
        response = post_printed_curl(quickstart.announced["curl"])
        assert response.status_code == 201, response.text
        assert response.json()["emissions"]["unit"] == "kgCO2e"
    key = quickstart.announced["key"]
    with Served([str(bare_python), str(pyz), "serve"], cwd=tmp_path, **unpacked) as serve:
        read = requests.get(f"{serve.announced['url']}/v1/calculations/{response.json()['id']}",
                            headers={"Authorization": f"Bearer {key}"}, timeout=30)
        assert read.status_code == 200 and read.json() == response.json()
        # The airport and port data and the sea network travel in the file: a shipment measures its legs.
        legs = [{"type": "leg", "mode": "SEA", "origin": {"locode": "CNSHA"}, "destination": {"locode": "GBFXT"}},
                {"type": "leg", "mode": "AIR", "origin": {"iata": "PVG"}, "destination": {"iata": "MAN"}}]
        shipment = requests.post(f"{serve.announced['url']}/v1/shipments", timeout=60, json={
            "customer_reference": response.json()["customer"]["reference"], "external_reference": "pyz",
            "activity_date": "2026-03-01", "cargo": {"value": 1, "unit": "tonne"}, "elements": legs},
            headers={"Authorization": f"Bearer {key}", "Idempotency-Key": "pyz-shipment"})
        assert shipment.status_code == 201, shipment.text
        assert [element["distance"]["method"] for element in shipment.json()["elements"]] == [
            "sea_route", "great_circle"]


def test_the_pyz_reaches_postgresql_with_its_own_driver(pyz, bare_python, unpacked, tmp_path):
    result = subprocess.run([str(bare_python), str(pyz), "migrate"], cwd=tmp_path, capture_output=True, text=True,
                            env=clean_environment(DATABASE_URL=CLOSED_POSTGRES.format(port=closed_port()), **unpacked),
                            timeout=120)
    assert result.returncode == 1
    assert result.stderr.startswith("emissions: database error:"), result.stderr  # it tried: the driver is there
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("version", [version for version in PYTHONS if version != RUNNING])
def test_the_pyz_runs_on_every_python_it_was_built_for(pyz, version, unpacked, tmp_path):
    python = find_python(version)
    if python is None:
        pytest.skip(f"no Python {version} on this machine")
    bare = bare_venv(python, tmp_path / "venv")
    with Served([str(bare), str(pyz), "quickstart"], cwd=tmp_path, **unpacked) as quickstart:
        response = post_printed_curl(quickstart.announced["curl"])  # validated by jsonschema: rpds-py loads
        assert response.status_code == 201, response.text
    result = subprocess.run([str(bare), str(pyz), "migrate"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                            env=clean_environment(DATABASE_URL=CLOSED_POSTGRES.format(port=closed_port()), **unpacked))
    assert result.stderr.startswith("emissions: database error:"), result.stderr  # psycopg2 loads
