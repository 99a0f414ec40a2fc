"""The HTTP API: create_app() builds the Bottle application; the URL map is in _routes()."""
from __future__ import annotations

import logging
import re
import time
import traceback
import uuid

import bottle

from . import auth
from . import bounds
from . import calculations
from . import customers
from . import errors
from . import jsoncodec
from . import lanes
from . import listing
from . import logs
from . import migrations
from . import models
from . import outages
from . import parameters
from . import periods
from . import schemas
from . import shipments
from . import statements
from . import store
from . import voids
from . import workspace
from .config import Config
from .db import bind, db
from .errors import ApiError, InvalidRequest, NotFound
from .limits import RateLimiter
from .recent import RecentCalculations
from .replies import Reply

MAX_BODY_BYTES = 64 * 1024
MAX_IDEMPOTENCY_KEY = 200
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")
UUID_PATTERN = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")
JSON_TYPE = "application/json"
HEALTHZ_SECONDS = 1.5  # /healthz answers within this, however the database stalls
SECURITY_HEADERS = (("Cache-Control", "no-store"), ("X-Content-Type-Options", "nosniff"))

error_log = logging.getLogger("emissions.error")


class Service(bottle.Bottle):
    """The Bottle app plus what every request shares: config, key store, rate limiter, and the
    calculations this process knows already."""

    def __init__(self, config: Config, keys: auth.KeyStore, limiter: RateLimiter):
        super().__init__(catchall=True)
        # Handlers answer text, never a dict: Bottle's dict-to-JSON plugin (which its json.enable
        # setting does not switch off) would only add a layer to every request.
        self.uninstall("json")
        self.settings = config
        self.keys = keys
        self.limiter = limiter
        self.recent = RecentCalculations(config.kept_calculations)
        self.outage_log = outages.FailureLog(error_log, "database")
        self.health = outages.Health()
        self.prober = outages.Prober(store.probe_write, HEALTHZ_SECONDS)

    def database_failed(self, error: BaseException, cause: str) -> None:
        """An unavailable database met by a request: logged without a flood, remembered for /healthz."""
        self.health.write_failed(cause)
        self.outage_log.failed(error, {"request_id": _request_id(), "cause": cause})
        drop_connection()

    def database_answered(self, wrote: bool) -> None:
        """A request the database served: the end of an outage, unless only writes failed and this one read."""
        cause = self.health.cause
        if cause is not None and (wrote or cause not in outages.WRITE_CAUSES):
            self.health.write_succeeded()
            self.outage_log.succeeded()

    def wsgi(self, environ, start_response):
        """Give the request its id, add the headers every answer carries, and log one line when
        it is answered."""
        path = environ.get("PATH_INFO", "")
        if not path.isascii() or CONTROL_CHARACTERS.search(path):
            environ["PATH_INFO"] = routable_path(path)
        request_id = str(uuid.uuid4())
        environ["emissions.request_id"] = request_id
        every_answer = (("X-Request-Id", request_id), *SECURITY_HEADERS)
        status_holder = []

        # Added here, once, rather than through Bottle's response, which checks each name and value.
        def finishing_start_response(status, headers, exc_info=None):
            status_holder.append(status)
            if any(name.lower() == "cache-control" for name, _ in headers):  # a static file's own: one header
                headers.extend(header for header in every_answer if header[0] != "Cache-Control")
            else:
                headers.extend(every_answer)
            return start_response(status, headers, exc_info) if exc_info else start_response(status, headers)

        if not self.settings.log_requests:
            return super().wsgi(environ, finishing_start_response)
        started = time.perf_counter()
        result = super().wsgi(environ, finishing_start_response)
        logs.access({
            "request_id": request_id, "method": environ.get("REQUEST_METHOD"), "path": environ.get("PATH_INFO"),
            "status": int(status_holder[0][:3]) if status_holder else None,
            "latency_ms": round((time.perf_counter() - started) * 1000, 3), "key_id": environ.get("emissions.key_id")})
        return result


def routable_path(path: str) -> str:
    """PATH_INFO with what no identifier can hold made visible to the routes, as U+FFFD.

    Bottle decodes the path as UTF-8 dropping what is not ("a%FFb" would route as "ab", another
    customer's reference), and its route patterns end in `$`, which Python also matches before a
    final newline. Replacing both invalid UTF-8 and control characters with U+FFFD, which breaks
    every reference and id pattern, makes such a path the tenant-safe 404 its route gives for an
    identifier that breaks its pattern (docs/api.md, "Errors"), and never an alias of another path.
    """
    text = path.encode("latin-1", "replace").decode("utf-8", "replace")  # WSGI: the bytes as latin-1
    return CONTROL_CHARACTERS.sub("\ufffd", text).encode("utf-8").decode("latin-1")


def log_unexpected(trace: str) -> None:
    """One error log line with the request id the client was given, and the traceback it was not."""
    error_log.error("unexpected error", extra={"fields": {"request_id": _request_id(), "traceback": trace}})


def drop_connection() -> None:
    """Close this thread's database connection after an unexpected error.

    If the error was a lost connection (the database restarted, a proxy closed it), the thread's
    next request opens a new one instead of failing the same way forever.
    """
    try:
        db.close()
    except Exception:  # nothing more to do: the connection is already unusable
        pass


def _request_id() -> str:
    return bottle.request.environ.get("emissions.request_id") or str(uuid.uuid4())


def _finish(status: int, body: str, headers: dict | None = None) -> str:
    """Set status, content type and the reply's own headers (Service.wsgi adds those every answer
    carries); return the body."""
    response = bottle.response
    response.status = status
    response.content_type = JSON_TYPE
    for name, value in (headers or {}).items():
        response.set_header(name, value)
    return body


def _error(error: ApiError) -> str:
    return _finish(error.status, jsoncodec.dumps(error.body(_request_id())), error.headers)


class ApiPlugin:
    """Authentication, scopes, rate limit and the error envelope for every route."""

    name = "emissions-api"
    api = 2

    def __init__(self, service: Service):
        self.service = service

    def apply(self, callback, route):
        # Bottle flattens route config, so the two scope lists are flat keys.
        all_of = route.config.get("scopes_all")
        any_of = route.config.get("scopes_any")
        authenticated = all_of is not None or any_of is not None
        # The query parameters the route declares (parameters.Query); anything else is a 400.
        query = route.config.get("query")
        service = self.service

        def wrapper(*args, **kwargs):
            try:
                if authenticated:
                    # Raw from the environ: bottle's get_header raises on bytes that are not UTF-8.
                    principal = auth.authenticate(service.keys, bottle.request.environ.get("HTTP_AUTHORIZATION"))
                    bottle.request.environ["emissions.key_id"] = principal.key_id
                    auth.require_scopes(principal, any_of=any_of or (), all_of=all_of or ())
                    service.limiter.check(principal.key_id)
                    kwargs["principal"] = principal
                if query is not None:
                    parsed = query.parse(bottle.request.environ.get("QUERY_STRING", ""))
                    if query.parameters:
                        kwargs["query"] = parsed
                reply = callback(*args, **kwargs)
            except ApiError as error:
                return _error(error)
            except Exception as exc:  # anything unexpected: logged with its trace, never shown to the client
                cause = outages.cause_of(exc)
                if cause is not None:  # the operator's to fix, the client's to retry
                    service.database_failed(exc, cause)
                    return _error(unavailable())
                log_unexpected(traceback.format_exc())
                drop_connection()
                return _error(ApiError("An unexpected error occurred; quote the request_id to support."))
            if service.health.cause is not None:
                service.database_answered(wrote=bottle.request.method == "POST" and reply.status < 300)
            return _finish(reply.status, reply.body, reply.headers)

        return wrapper


def unavailable() -> ApiError:
    """503 with Retry-After: the database cannot serve the request now."""
    return ApiError(outages.MESSAGE, status=503, headers={"Retry-After": str(outages.RETRY_AFTER_SECONDS)})


# --- request helpers -------------------------------------------------------------------------

def read_body() -> bytes:
    """The raw request body, enforcing the JSON content type and the 64 KiB limit."""
    request = bottle.request
    length = request.content_length
    if length > MAX_BODY_BYTES:
        raise InvalidRequest("The request body is larger than 64 KiB.", status=413)
    media_type = (request.content_type or "").split(";", 1)[0].strip().lower()
    if media_type != JSON_TYPE:
        raise InvalidRequest("Content-Type must be application/json.")
    # A compressed body would only ever read as "not valid JSON"; say what is wrong instead.
    if request.environ.get("HTTP_CONTENT_ENCODING", "").strip().lower() not in ("", "identity"):
        raise InvalidRequest("Content-Encoding is not supported: send the body uncompressed.")
    stream = request.environ["wsgi.input"]
    raw = stream.read(length) if length >= 0 else stream.read(MAX_BODY_BYTES + 1)
    if len(raw) > MAX_BODY_BYTES:
        raise InvalidRequest("The request body is larger than 64 KiB.", status=413)
    return raw


def parse_json_object(raw: bytes) -> dict:
    """The body as a JSON object (numbers as Decimal), or INVALID_REQUEST."""
    if not raw.strip(b" \t\r\n"):  # often a client that sent neither Content-Length nor chunks
        raise InvalidRequest("The request body is empty: send one JSON object, with a Content-Length "
                             "header or chunked.")
    try:
        body = jsoncodec.loads(raw)
    except jsoncodec.DuplicateMember as exc:
        shown = exc.name if len(exc.name) <= 100 else exc.name[:100] + "..."
        raise InvalidRequest(f"The request body names the member {jsoncodec.dumps(shown)} twice in one object.") from None
    except (jsoncodec.InvalidJson, UnicodeDecodeError):
        raise InvalidRequest("The request body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object.")
    return body


def idempotency_key() -> str:
    try:
        key = bottle.request.get_header("Idempotency-Key")
    except UnicodeDecodeError:  # bottle decodes header bytes as UTF-8
        raise InvalidRequest("The Idempotency-Key header must be UTF-8 text.") from None
    if key is None or not key.strip():
        raise InvalidRequest("The Idempotency-Key header is required on POST.", code="IDEMPOTENCY_KEY_REQUIRED")
    if len(key) > MAX_IDEMPOTENCY_KEY:
        raise InvalidRequest("The Idempotency-Key header must be at most 200 characters.")
    if CONTROL_CHARACTERS.search(key):  # HTTP servers differ in what they let through; databases refuse NUL
        raise InvalidRequest("The Idempotency-Key header must not contain control characters.")
    return key


def validate(component: str, body: dict) -> dict:
    details = schemas.validation_details(component, body) or bounds.details(body)
    if details:
        raise InvalidRequest(schemas.summary(details), status=422, details=details)
    return body


def customer_not_found() -> NotFound:
    return errors.customer_not_found("customerReference")


def checked_reference(reference: str) -> str:
    """The path's customer reference; one that breaks its pattern or length is the tenant-safe 404."""
    if not customers.is_valid_reference(reference):
        raise customer_not_found()
    return reference


def customer_or_404(principal: auth.Principal, reference: str) -> models.Customer:
    customer = customers.find(principal.organization_id, principal.environment, checked_reference(reference))
    if customer is None:
        raise customer_not_found()
    return customer


# --- handlers --------------------------------------------------------------------------------

def calculate_logistics(principal: auth.Principal) -> Reply:
    if bottle.request.environ.get("emissions.idempotency_keys", 1) > 1:  # counted by server.CountingParser
        raise InvalidRequest("Send one Idempotency-Key header, not several.")
    service: Service = bottle.request.app
    organization_id, environment = principal.organization_id, principal.environment
    raw = read_body()
    try:
        replayed = service.recent.replay(organization_id, environment, bottle.request.get_header("Idempotency-Key"), raw)
    except UnicodeDecodeError:  # such a header is refused below, in its turn
        replayed = None
    if replayed is not None:
        return Reply(replayed, 200, {"Idempotent-Replayed": "true"})
    body = parse_json_object(raw)
    key = idempotency_key()
    outcome = calculations.calculate(principal, validate("LogisticsRequest", body), key, request_id=_request_id(),
                                     test_capacity=service.settings.test_capacity)
    service.recent.forget_ids(outcome.changed)
    service.recent.remember(organization_id, environment, outcome.calculation_id, outcome.body, key, raw)
    return Reply(outcome.body, 200 if outcome.replayed else 201,
                 {"Idempotent-Replayed": "true" if outcome.replayed else "false"})


def get_calculation(principal: auth.Principal, calculation_id: str) -> Reply:
    if not UUID_PATTERN.match(calculation_id):
        raise NotFound("No calculation with this id exists.")
    recent = bottle.request.app.recent
    body = recent.body(principal.organization_id, principal.environment, calculation_id)
    if body is None:
        body = calculations.get(principal, calculation_id)
        recent.remember(principal.organization_id, principal.environment, calculation_id, body)
    return Reply(body)


def create_shipment(principal: auth.Principal) -> Reply:
    if bottle.request.environ.get("emissions.idempotency_keys", 1) > 1:  # counted by server.CountingParser
        raise InvalidRequest("Send one Idempotency-Key header, not several.")
    body = parse_json_object(read_body())
    key = idempotency_key()
    outcome = shipments.create(principal, validate("ShipmentRequest", body), key, request_id=_request_id(),
                               test_capacity=bottle.request.app.settings.test_capacity)
    bottle.request.app.recent.forget_ids(outcome.changed)
    return Reply(outcome.body, 200 if outcome.replayed else 201,
                 {"Idempotent-Replayed": "true" if outcome.replayed else "false"})


def get_shipment(principal: auth.Principal, shipment_id: str) -> Reply:
    if not UUID_PATTERN.match(shipment_id):
        raise NotFound("No shipment with this id exists.")
    return Reply(shipments.get(principal, shipment_id))


def _void(kind: str, principal: auth.Principal, record_id: str) -> Reply:
    """POST .../{id}/void (docs/api.md, "Corrections")."""
    if bottle.request.environ.get("emissions.idempotency_keys", 1) > 1:  # counted by server.CountingParser
        raise InvalidRequest("Send one Idempotency-Key header, not several.")
    if not UUID_PATTERN.match(record_id):
        raise voids.not_found(kind)
    body = parse_json_object(read_body())
    key = idempotency_key()
    details = schemas.validation_details("VoidRequest", body)  # no activity to bound (validate's bounds)
    if details:
        raise InvalidRequest(schemas.summary(details), status=422, details=details)
    voided = voids.void(principal, kind, record_id, body["reason"], key)
    bottle.request.app.recent.forget_ids(voided.changed)
    return Reply(voided.body, 200, {"Idempotent-Replayed": "true" if voided.replayed else "false"})


def void_shipment(principal: auth.Principal, shipment_id: str) -> Reply:
    return _void(voids.SHIPMENT, principal, shipment_id)


def void_calculation(principal: auth.Principal, calculation_id: str) -> Reply:
    return _void(voids.CALCULATION, principal, calculation_id)


def list_shipments(principal: auth.Principal, query: dict) -> Reply:
    return Reply(listing.page(principal.organization_id, principal.environment, query, listing.SHIPMENT))


def get_customer(principal: auth.Principal, reference: str) -> Reply:
    return Reply(customer_or_404(principal, reference).to_dict())


def _customer_period(read, principal: auth.Principal, reference: str, query: dict) -> Reply:
    """What `read` answers for the customer over the query's from..to, or CUSTOMER_NOT_FOUND."""
    found = read(principal.organization_id, principal.environment, checked_reference(reference),
                 query.get("from"), query.get("to"))
    if found is None:
        raise customer_not_found()
    return Reply(found)


def get_customer_emissions(principal: auth.Principal, reference: str, query: dict) -> Reply:
    return _customer_period(periods.analytics_json, principal, reference, query)


def get_customer_statement(principal: auth.Principal, reference: str, query: dict) -> Reply:
    return _customer_period(statements.statement, principal, reference, query)


def get_customer_lanes(principal: auth.Principal, reference: str, query: dict) -> Reply:
    return _customer_period(lanes.lanes, principal, reference, query)


def list_calculations(principal: auth.Principal, query: dict) -> Reply:
    return Reply(listing.page(principal.organization_id, principal.environment, query))


def list_factors(principal: auth.Principal, query: dict) -> Reply:
    return Reply(listing.factor_page(principal.organization_id, query))


def get_openapi() -> Reply:
    return Reply(schemas.openapi_bytes().decode())


def healthz() -> Reply:
    service: Service = bottle.request.app
    cause = service.health.failing()  # a request's own write failed a moment ago: no probe overrules it
    if cause is None:
        cause, error = service.prober.check()
        if cause is None:
            service.health.probe_succeeded()
            if service.health.cause is None:
                service.outage_log.succeeded()
            return Reply({"status": "ok", "database": "ok"})
        error = error or TimeoutError(f"the database did not answer the health probe within {HEALTHZ_SECONDS} s")
        service.outage_log.failed(error, {"request_id": _request_id(), "cause": cause, "check": "healthz"})
    return Reply({"status": "unavailable", "database": cause}, 503,
                 {"Retry-After": str(outages.RETRY_AFTER_SECONDS)})


PERIOD = parameters.Query({"from": parameters.iso_date, "to": parameters.iso_date}, ranges=(("from", "to"),))
FILTERS = {
    "customer_reference": parameters.text(120), "external_reference": parameters.text(120),
    "activity_from": parameters.iso_date, "activity_to": parameters.iso_date,
    "created_from": parameters.iso_date, "created_to": parameters.iso_date,
    "limit": parameters.integer_between(1, listing.MAX_LIMIT),
}
FILTER_RANGES = (("activity_from", "activity_to"), ("created_from", "created_to"))
LISTING = parameters.Query({**FILTERS, "mode": parameters.one_of(*models.MODES),
                            "starting_after": parameters.id_of("calculation")}, ranges=FILTER_RANGES)
FACTOR_LISTING = parameters.Query({
    "mode": parameters.one_of(*models.MODES, models.HUB), "hub_type": parameters.one_of(*models.HUB_TYPES),
    "reference": parameters.text(120), "limit": parameters.integer_between(1, listing.MAX_LIMIT),
    "starting_after": parameters.text(120)})
SHIPMENT_LISTING = parameters.Query({**FILTERS, "starting_after": parameters.id_of("shipment")},
                                    ranges=FILTER_RANGES)


# The scopes each kind of route needs.
CALCULATING = ("emissions:calculate",)
READING = ("emissions:read", "emissions:calculate")  # any of them
CUSTOMERS = ("customers:read",)
ANALYTICS = ("customers:read", "customer-analytics:read")


def _routes(app: Service) -> None:
    """The URL map. scopes_all / scopes_any mark an authenticated API route and name what it needs;
    query names the query parameters it takes (every /v1 route declares them)."""
    app.route("/v1/emissions/logistics", "POST", calculate_logistics, scopes_all=CALCULATING, query=parameters.NONE)
    app.route("/v1/calculations", "GET", list_calculations, scopes_any=READING, query=LISTING)
    app.route("/v1/calculations/<calculation_id>", "GET", get_calculation, scopes_any=READING, query=parameters.NONE)
    app.route("/v1/factors", "GET", list_factors, scopes_any=READING, query=FACTOR_LISTING)
    app.route("/v1/shipments", "POST", create_shipment, scopes_all=CALCULATING, query=parameters.NONE)
    app.route("/v1/shipments", "GET", list_shipments, scopes_any=READING, query=SHIPMENT_LISTING)
    app.route("/v1/shipments/<shipment_id>", "GET", get_shipment, scopes_any=READING, query=parameters.NONE)
    app.route("/v1/shipments/<shipment_id>/void", "POST", void_shipment, scopes_all=CALCULATING, query=parameters.NONE)
    app.route("/v1/calculations/<calculation_id>/void", "POST", void_calculation, scopes_all=CALCULATING,
              query=parameters.NONE)
    app.route("/v1/customers/<reference:path>/emissions", "GET", get_customer_emissions,
              scopes_all=ANALYTICS, query=PERIOD)
    app.route("/v1/customers/<reference:path>/statement", "GET", get_customer_statement,
              scopes_all=ANALYTICS, query=PERIOD)
    app.route("/v1/customers/<reference:path>/lanes", "GET", get_customer_lanes, scopes_all=ANALYTICS, query=PERIOD)
    # `re:.*` lets an empty reference reach the handler: after authentication it is CUSTOMER_NOT_FOUND.
    app.route("/v1/customers/<reference:re:.*>", "GET", get_customer, scopes_all=CUSTOMERS, query=parameters.NONE)
    app.route("/v1/openapi.json", "GET", get_openapi, query=parameters.NONE)
    app.route("/healthz", "GET", healthz)


def _error_handlers(app: Service) -> None:
    """Bottle's own errors (unknown route, wrong method, crashes) in the same envelope."""

    def handle(error: bottle.HTTPError) -> str:
        status = error.status_code
        if status == 405:
            api_error = InvalidRequest("This method is not allowed on this path.", status=405)
            # Bottle lists the routes' methods; a GET route also answers HEAD (RFC 9110, 9.3.2).
            allowed = set(filter(None, bottle.response.get_header("Allow", "").split(",")))
            if "GET" in allowed:
                bottle.response.set_header("Allow", ",".join(sorted(allowed | {"HEAD"})))
        elif status == 404:
            api_error = NotFound("No such route.")
        elif status == 413:
            api_error = InvalidRequest("The request body is larger than 64 KiB.", status=413)
        elif status < 500:
            api_error = InvalidRequest("The request could not be understood.", status=status)
        else:
            if error.traceback:
                log_unexpected(error.traceback)
            api_error = ApiError("An unexpected error occurred; quote the request_id to support.")
        return _error(api_error)

    for status in (400, 404, 405, 413, 500):
        app.error(status)(handle)


def create_app(config: Config | None = None) -> Service:
    """Build the application: bind the database, apply migrations, wire routes and plugins."""
    config = config or Config.from_env()
    database = bind(config.database_url, config.postgres_waits)
    migrations.run(database)
    secret = auth.instance_secret(config.secret_key)
    app = Service(config, auth.KeyStore(secret, config.key_cache_seconds),
                  RateLimiter(config.rate_limit_per_second, config.rate_limit_burst))
    app.install(ApiPlugin(app))
    _routes(app)
    workspace.routes(app, secret)
    _error_handlers(app)
    return app
