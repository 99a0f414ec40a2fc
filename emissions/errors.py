"""API errors: one exception per code family, each carrying its HTTP status and code."""
from __future__ import annotations


class ApiError(Exception):
    """An error the client gets as the documented envelope."""

    status = 500
    code = "INTERNAL_ERROR"

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None,
                 details: list[dict] | None = None, headers: dict | None = None):
        super().__init__(message)
        self.message = message
        if code:
            self.code = code
        if status:
            self.status = status
        self.details = details
        self.headers = headers or {}

    def body(self, request_id: str) -> dict:
        error = {"code": self.code, "message": self.message, "request_id": request_id}
        if self.details:
            error["details"] = self.details
        return {"error": error}


class AuthenticationError(ApiError):
    status = 401
    code = "INVALID_API_KEY"


class PermissionError_(ApiError):
    """403: organization not active, not entitled, missing scope, customer not active."""

    status = 403
    code = "INSUFFICIENT_SCOPE"


class InvalidRequest(ApiError):
    """400 by default; 413, 422, 404 and 405 carry the same code with their own status."""

    status = 400
    code = "INVALID_REQUEST"


class NotFound(ApiError):
    status = 404
    code = "INVALID_REQUEST"


class IdempotencyError(ApiError):
    status = 409
    code = "IDEMPOTENCY_KEY_REUSED"


class CalculationFailed(ApiError):
    status = 422
    code = "CALCULATION_FAILED"


class LimitReached(ApiError):
    """429 with Retry-After in whole seconds."""

    status = 429
    code = "RATE_LIMITED"

    def __init__(self, message: str, *, retry_after: int, code: str | None = None):
        super().__init__(message, code=code, headers={"Retry-After": str(max(1, int(retry_after)))})
        self.retry_after = max(1, int(retry_after))
