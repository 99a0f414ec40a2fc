"""Loaded by every Python the suite starts while it runs a year ahead under libfaketime (.ci/run).

Monotonic time is left real there (FAKETIME_DONT_FAKE_MONOTONIC=1), so that timed waits end; Debian's
libfaketime 0.9.10 then fails Python's clock_nanosleep-based time.sleep with EINVAL. A sleep through
select() waits the same.
"""
import os
import select
import time

if "FAKETIME" in os.environ:
    def _sleep(seconds: float) -> None:
        select.select([], [], [], seconds)

    time.sleep = _sleep
