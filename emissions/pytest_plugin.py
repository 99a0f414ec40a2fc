"""The pytest plugin (entry point `pytest11`): the `emissions_sandbox` fixture, see docs/testing.md.

Loading it imports nothing of the service; the sandbox module is imported when a test asks for the
fixture, so a test run that does not use it pays nothing.
"""
from __future__ import annotations

import pytest


@pytest.fixture
def emissions_sandbox():
    """A fresh emissions.testing.Sandbox for the test, closed after it."""
    from emissions.testing import Sandbox

    with Sandbox() as sandbox:
        yield sandbox
