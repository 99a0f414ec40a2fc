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

    def __init_subclass__(cls, *, status: int | None = None, code: str | None = None, **kwargs):
        """A family's status and code, given where it is declared: `class NotFound(ApiError, status=404, ...)`."""
        super().__init_subclass__(**kwargs)
        if status is not None:
            cls.status = status
        if code is not None:
            cls.code = code

    def body(self, request_id: str) -> dict:
        error = {"code": self.code, "message": self.message, "request_id": request_id}
        if self.details:
            error["details"] = self.details
        return {"error": error}


class AuthenticationError(ApiError, status=401, code="INVALID_API_KEY"):
    """401: a missing, malformed or invalid API key."""


class PermissionError_(ApiError, status=403, code="INSUFFICIENT_SCOPE"):
    """403: organization not active, not entitled, missing scope, customer not active."""


class InvalidRequest(ApiError, status=400, code="INVALID_REQUEST"):
    """400 by default; 413, 422, 404 and 405 carry the same code with their own status."""


class NotFound(ApiError, status=404, code="INVALID_REQUEST"):
    """404: the same words for another tenant's row as for one that never existed."""


class IdempotencyError(ApiError, status=409, code="IDEMPOTENCY_KEY_REUSED"):
    """409: an idempotency key sent again with another request."""


class CalculationFailed(ApiError, status=422, code="CALCULATION_FAILED"):
    """422: a valid request the service cannot calculate."""


class LimitReached(ApiError, status=429, code="RATE_LIMITED"):
    """429 with Retry-After in whole seconds."""

    def __init__(self, message: str, *, retry_after: int, code: str | None = None):
        super().__init__(message, code=code, headers={"Retry-After": str(max(1, int(retry_after)))})
        self.retry_after = max(1, int(retry_after))


CREATE_CUSTOMER = "create it with `emissions customer create` or in the workspace"
LIST_FACTORS = "list the factors this key may use with `GET /v1/factors`"


def customer_not_found(field: str) -> NotFound:
    """CUSTOMER_NOT_FOUND naming the field (customer_reference in a body, customerReference in a path)
    and how to create one; the same words for another tenant's customer as for one that never existed."""
    return NotFound(f"No customer with this {field} exists in this environment: {CREATE_CUSTOMER}.",
                    code="CUSTOMER_NOT_FOUND", details=[{"field": field, "message": "names no customer"}])


def factor_not_found(field: str, reference: str | None = None) -> NotFound:
    """FACTOR_NOT_FOUND naming the field and where to find the factors the key may use."""
    named = f" {reference}" if reference else f" with this {field}"
    return NotFound(f"No active governed factor{named} is available to this organization: {LIST_FACTORS}.",
                    code="FACTOR_NOT_FOUND", details=[{"field": field, "message": "names no active factor"}])
