"""What a route handler returns: the API's and the workspace's answers alike."""
from __future__ import annotations

from . import jsoncodec


class Reply:
    """A handler's answer: status, a body (text, or data written as JSON) and extra headers."""

    __slots__ = ("status", "body", "headers")

    def __init__(self, body, status: int = 200, headers: dict | None = None):
        self.status = status
        self.body = body if isinstance(body, str) else jsoncodec.dumps(body)
        self.headers = headers or {}
