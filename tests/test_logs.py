"""Every log line is one JSON object with its time (RFC 3339, UTC, milliseconds) and its level."""
from __future__ import annotations

import io
import json
import logging
import re
import time

import pytest

from emissions import logs

RFC3339_MILLISECONDS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z\Z")


@pytest.fixture
def configured():
    """logs.configure() writing to a buffer; the process's logging as it was afterwards."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, logging.getLogger("emissions").level)
    stream = io.StringIO()
    yield stream
    root.handlers[:], root.level = saved[0], saved[1]
    logging.getLogger("emissions").setLevel(saved[2])


def lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_a_record_time_is_rfc_3339_utc_with_milliseconds():
    assert logs.moment(1795603935.538) == "2026-11-25T10:52:15.538Z"
    assert logs.moment(1795603935.0) == "2026-11-25T10:52:15.000Z"


def test_the_service_s_own_lines_and_others_warnings_are_json_with_time_and_level(configured):
    logs.configure(stream=configured)
    logging.getLogger("emissions.access").info("request", extra={"fields": {"status": 201, "path": "/v1/x"}})
    logging.getLogger("waitress").warning("Task queue depth is %d", 3)
    logging.getLogger("waitress").info("not shown: others' records start at WARNING")
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("emissions.webhooks").exception("webhook delivery run failed")
    access, waitress_line, failure = lines(configured)
    assert access == {"time": access["time"], "level": "info", "logger": "emissions.access", "status": 201,
                      "path": "/v1/x"}
    assert waitress_line == {"time": waitress_line["time"], "level": "warning", "logger": "waitress",
                             "message": "Task queue depth is 3"}
    assert (failure["level"], failure["message"]) == ("error", "webhook delivery run failed")
    assert "ValueError: boom" in failure["traceback"]
    for line in (access, waitress_line, failure):
        assert RFC3339_MILLISECONDS.match(line["time"]), line


def test_queued_lines_are_all_written_when_the_listener_stops(configured):
    listener = logs.configure(queued=True, stream=configured)
    for number in range(50):
        logging.getLogger("emissions.access").info("request", extra={"fields": {"n": number}})
    listener.stop()
    assert [line["n"] for line in lines(configured)] == list(range(50))
    assert all(RFC3339_MILLISECONDS.match(line["time"]) and line["level"] == "info" for line in lines(configured))


class CountingStream(io.StringIO):
    """A stream that counts its write() calls."""

    writes = 0

    def write(self, text):
        self.writes += 1
        return super().write(text)


def test_a_serving_process_s_access_lines_are_written_together_in_order_with_other_records(configured):
    stream = CountingStream()
    listener = logs.configure(queued=True, stream=stream)
    for number in range(200):
        logs.access({"n": number, "path": "/v1/\"quoted\"\n"})
    logging.getLogger("emissions.webhooks").warning("after the access lines")
    listener.stop()
    *access, warning = lines(stream)
    assert [line["n"] for line in access] == list(range(200))
    assert access[0] == {"time": access[0]["time"], "level": "info", "logger": "emissions.access", "n": 0,
                         "path": "/v1/\"quoted\"\n"}
    assert all(RFC3339_MILLISECONDS.match(line["time"]) for line in access)
    assert (warning["logger"], warning["message"]) == ("emissions.webhooks", "after the access lines")
    # Gathered: far fewer writes than lines (the stock handler flushes once a line).
    assert stream.writes < 20, stream.writes


def test_access_lines_follow_the_access_logger_s_level_queued_or_not(configured):
    access_logger = logging.getLogger("emissions.access")
    access_logger.setLevel(logging.WARNING)
    try:
        listener = logs.configure(queued=True, stream=configured)
        logs.access({"n": 1})
        listener.stop()
        logs.configure(stream=configured)
        logs.access({"n": 2})
        assert lines(configured) == []
    finally:
        access_logger.setLevel(logging.NOTSET)
    logs.access({"n": 3})  # not queued: a record like any other
    assert [line["n"] for line in lines(configured)] == [3]


class FailingStream(io.StringIO):
    """A stream whose first write fails, as a closed pipe's would."""

    failed = False

    def write(self, text):
        if not self.failed:
            self.failed = True
            raise BrokenPipeError("the reader went away")
        return super().write(text)


def test_a_failed_write_or_an_odd_field_loses_lines_never_the_listener(configured, monkeypatch):
    monkeypatch.setattr(logging, "raiseExceptions", False)  # handleError prints nothing into the test's output
    stream = FailingStream()
    listener = logs.configure(queued=True, stream=stream)
    logs.access({"n": 0})
    for _ in range(1000):  # the first flush meets the failing write (the listener looks every 0.1 s)
        if stream.failed:
            break
        time.sleep(0.01)
    assert stream.failed
    logs.access({"n": 1, "odd": object()})  # written with its text
    logs.access({"n": 2})
    listener.stop()
    written = lines(stream)
    assert [line["n"] for line in written] == [1, 2]
    assert written[0]["odd"].startswith("<object object")
