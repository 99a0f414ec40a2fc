"""`emissions serve` and the settings it no longer acts on: accepted, ignored, said once."""
from __future__ import annotations

import json
import os
import subprocess

import pytest
import requests

from emissions.config import Config, ConfigError
from conftest import EMISSIONS, free_port, serving


@pytest.mark.parametrize("argv", [(), ("--workers", "2")], ids=["one process", "two workers"])
def test_a_cpu_affinity_setting_is_accepted_and_ignored_with_one_warning(tmp_path, monkeypatch, argv):
    with serving(tmp_path, monkeypatch, *argv, CPU_AFFINITY="0-3,6") as (process, url, key):
        assert requests.get(url + "/healthz", timeout=10).status_code == 200
        process.terminate()
        out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert err.count("CPU_AFFINITY=0-3,6 is ignored") == 1, err  # one line, from one process of several


def test_without_the_setting_serve_warns_of_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv("CPU_AFFINITY", raising=False)
    with serving(tmp_path, monkeypatch) as (process, url, key):
        assert requests.get(url + "/healthz", timeout=10).status_code == 200
        process.terminate()
        out, err = process.communicate(timeout=30)
    assert "is ignored" not in err


@pytest.mark.parametrize("argv, expected", [
    ((), {"threads": 1, "cpu": None}),
    (("--workers", "2"), {"workers": 2, "threads": 1, "cpus": [None, None]}),
], ids=["one process", "two workers"])
def test_the_json_serving_line_keeps_its_cpu_keys_always_null(tmp_path, argv, expected):
    port = free_port()
    environment = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'e.sqlite3'}", "CPU_AFFINITY": "1",
                   "WEBHOOK_POLL_SECONDS": "60"}
    process = subprocess.Popen([str(EMISSIONS), "serve", "--port", str(port), "--json", *argv], env=environment,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = json.loads(process.stdout.readline())
        assert line == {"url": f"http://127.0.0.1:{port}", **expected}
    finally:
        process.terminate()
        out, err = process.communicate(timeout=30)
    assert "CPU_AFFINITY=1 is ignored" in err


def test_the_server_settings_documented_in_operations_are_the_defaults(monkeypatch):
    from helpers import documented_configuration, variables_read_in_config

    for name in variables_read_in_config():
        monkeypatch.delenv(name, raising=False)
    defaults = Config.from_env()
    documented = documented_configuration()
    for name in ("WORKERS", "CONNECTION_LIMIT", "CHANNEL_TIMEOUT", "BACKLOG", "TRUSTED_PROXY_COUNT", "RETENTION_DAYS"):
        assert int(documented[name].strip(" `")) == getattr(defaults, name.lower()), name
    assert documented["TRUSTED_PROXY"].strip() == "unset" and defaults.trusted_proxy == ()


@pytest.mark.parametrize("name, value, message", [
    ("CONNECTION_LIMIT", "0", "CONNECTION_LIMIT must be at least 1"),
    ("CHANNEL_TIMEOUT", "soon", "CHANNEL_TIMEOUT must be an integer"),
    ("WORKERS", "0", "WORKERS must be at least 1"),
    ("WORKSPACE_THREADS", "0", "WORKSPACE_THREADS must be at least 1"),
    ("WORKERS", "65", "WORKERS must be at most 64"),  # as serve --workers
    ("RETENTION_DAYS", "3000000", "RETENTION_DAYS must be at most 100000"),  # no date lies that far back
    ("TRUSTED_PROXY", "127.0.0.1,proxy.example", "TRUSTED_PROXY must be comma-separated IP addresses"),
    ("SECRET_KEY", "short", "SECRET_KEY must be at least 32 characters"),
])
def test_a_server_setting_that_cannot_be_used_is_refused_at_start(monkeypatch, name, value, message):
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=message):
        Config.from_env()


def test_no_calculation_is_kept_in_memory_on_postgresql_unless_set(monkeypatch):
    """A void on one instance cannot reach another's memory: on PostgreSQL the cache is off by default."""
    from emissions.config import Config

    monkeypatch.delenv("CALCULATION_CACHE_SIZE", raising=False)
    monkeypatch.setenv("DATABASE_URL", "postgresql://app@db.example/emissions")
    assert Config.from_env().kept_calculations == 0
    monkeypatch.setenv("CALCULATION_CACHE_SIZE", "500")
    assert Config.from_env().kept_calculations == 500
    monkeypatch.delenv("CALCULATION_CACHE_SIZE")
    monkeypatch.setenv("DATABASE_URL", "sqlite:///emissions.sqlite3")
    assert Config.from_env().kept_calculations == 10_000
