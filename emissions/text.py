"""The one rule for text people write (names, labels, references, sources), on every way in.

C0 and C1 control characters (tabs and line breaks among them) split a CSV row or a log line and
hide in a lookup; the bidirectional overrides, embeddings and isolates (U+202A-U+202E,
U+2066-U+2069) make a number shown beside the text read backwards; NUL and unpaired surrogates
cannot be stored. Any other Unicode is text. The API states the rule as the OpenAPI `pattern`
PATTERN (its message is MESSAGE); the CLI, the CSV imports and the workspace call problem().
"""
from __future__ import annotations

import re

FORBIDDEN = "\\u0000-\\u001f\\u007f-\\u009f\\u202a-\\u202e\\u2066-\\u2069\\ud800-\\udfff"
PATTERN = f"^[^{FORBIDDEN}]*$"
MESSAGE = "must not contain control characters, bidirectional controls or unpaired surrogates"
_FORBIDDEN = re.compile(f"[{FORBIDDEN}]")


def problem(value: str) -> str | None:
    """MESSAGE if the text breaks the rule, else None."""
    return MESSAGE if _FORBIDDEN.search(value) else None
