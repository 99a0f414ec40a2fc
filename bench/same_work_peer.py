"""The same-work peer: the calculation route written plainly on the service's stack.

What an engineer could pick instead of the service: Bottle on stock Waitress (its default thread
count), Peewee's ORM, jsonschema against the same OpenAPI document (emissions/schemas). It does
the work the service does for the same request, one ORM call at a time:

- POST /v1/emissions/logistics: hash the bearer key as the service does (HMAC-SHA256 with the
  installation's secret) and select its api_key row with its organization; check scopes and
  status; parse and validate the body; look up the idempotency key, the customer and the active
  factor; compute; then, in one transaction, the same four writes: the calculation row, the
  usage counter, the customer's rollup and the webhook event. It answers the same JSON.
- GET /v1/calculations/<id>: the same key lookup, then the stored body.

It runs on a database migrated and seeded by the service's own CLI (bench/run.py copies the
service's), and has none of the service's speed machinery (docs/performance.md, "Machinery").
"""
from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import hmac
import json
import uuid
from decimal import ROUND_HALF_EVEN, Decimal

import bottle
import jsonschema
import peewee as pw
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

import bare_app  # beside this file: the same stock Waitress serving
from emissions import jsoncodec, schemas

database = pw.DatabaseProxy()
SIX_PLACES = Decimal("0.000001")
DEFAULT_TEST_CAPACITY = 10_000
SCOPE3_CATEGORY = {"upstream": 4, "downstream": 9}


class DecimalText(pw.TextField):
    """Decimals kept exactly, as the service's schema stores them on SQLite (TEXT)."""

    def db_value(self, value):
        return None if value is None else str(value)

    def python_value(self, value):
        return None if value is None else Decimal(value)


class Model(pw.Model):
    class Meta:
        database = database
        legacy_table_names = False


class InstanceSecret(Model):
    name = pw.CharField(primary_key=True)
    value = pw.CharField()


class Organization(Model):
    slug = pw.CharField()
    status = pw.CharField()
    entitled = pw.BooleanField()
    live_capacity = pw.IntegerField(null=True)
    test_capacity = pw.IntegerField(null=True)


class ApiKey(Model):
    id = pw.CharField(primary_key=True)
    organization = pw.ForeignKeyField(Organization)
    environment = pw.CharField()
    key_hash = pw.CharField()
    scopes = pw.TextField()
    expires_at = pw.DateTimeField(null=True)
    revoked_at = pw.DateTimeField(null=True)


class Customer(Model):
    organization = pw.ForeignKeyField(Organization)
    environment = pw.CharField()
    reference = pw.CharField()
    status = pw.CharField()


class Factor(Model):
    reference = pw.CharField()
    version = pw.IntegerField()
    organization = pw.ForeignKeyField(Organization, null=True)
    status = pw.CharField()
    mode = pw.CharField()
    value = DecimalText()
    ttw_value = DecimalText(null=True)
    name = pw.CharField()
    source = pw.CharField()
    region = pw.CharField(null=True)
    valid_from = pw.DateField(null=True)
    valid_to = pw.DateField(null=True)
    radiative_forcing = pw.BooleanField(null=True)


class Calculation(Model):
    id = pw.CharField(primary_key=True)
    organization = pw.ForeignKeyField(Organization)
    environment = pw.CharField()
    customer = pw.ForeignKeyField(Customer)
    external_reference = pw.CharField()
    idempotency_key = pw.CharField()
    fingerprint = pw.CharField()
    mode = pw.CharField()
    business_context = pw.CharField()
    activity_date = pw.DateField()
    cargo_tonnes = DecimalText()
    distance_km = DecimalText()
    activity_tkm = DecimalText()
    emissions_kg = DecimalText()
    factor = pw.ForeignKeyField(Factor)
    factor_version = pw.IntegerField()
    factor_value = DecimalText()
    body = pw.TextField()
    created_at = pw.DateTimeField()
    emissions_ttw_kg = DecimalText(null=True)
    emissions_wtt_kg = DecimalText(null=True)


class UsageCounter(Model):
    organization = pw.ForeignKeyField(Organization)
    environment = pw.CharField()
    period = pw.CharField()
    count = pw.BigIntegerField()


class CustomerRollup(Model):
    customer = pw.ForeignKeyField(Customer)
    environment = pw.CharField()
    mode = pw.CharField()
    business_context = pw.CharField()
    calculation_count = pw.BigIntegerField()
    activity_tkm = DecimalText()
    emissions_kg = DecimalText()
    first_activity_date = pw.DateField()
    last_activity_date = pw.DateField()
    emissions_ttw_kg = DecimalText()
    emissions_wtt_kg = DecimalText()


class WebhookEndpoint(Model):
    organization = pw.ForeignKeyField(Organization)
    environment = pw.CharField()
    status = pw.CharField()


class WebhookEvent(Model):
    id = pw.CharField(primary_key=True)
    organization = pw.ForeignKeyField(Organization)
    environment = pw.CharField()
    type = pw.CharField()
    payload = pw.TextField()
    created_at = pw.DateTimeField()
    delivery_status = pw.CharField()
    attempt_count = pw.IntegerField()
    next_attempt_at = pw.DateTimeField(null=True)


class Refused(Exception):
    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def request_validator() -> jsonschema.Draft202012Validator:
    """jsonschema's validator for LogisticsRequest, read from the service's OpenAPI document."""
    document = json.loads(schemas.OPENAPI_PATH.read_text())
    registry = Registry().with_resource("urn:openapi", Resource.from_contents(document, DRAFT202012))
    return jsonschema.Draft202012Validator({"$ref": "urn:openapi#/components/schemas/LogisticsRequest"},
                                           registry=registry,
                                           format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def isoformat(moment: dt.datetime) -> str:
    return moment.isoformat(timespec="milliseconds") + "Z"


def authenticate(secret: bytes, needs: tuple[str, ...]) -> ApiKey:
    """The caller's key row (with its organization), holding one of `needs`, or Refused."""
    scheme, _, plain = (bottle.request.get_header("Authorization") or "").partition(" ")
    if scheme.lower() != "bearer" or not plain:
        raise Refused(401, "UNAUTHENTICATED", "Missing or malformed Authorization header.")
    digest = hmac.new(secret, plain.strip().encode(), hashlib.sha256).hexdigest()
    key = ApiKey.select(ApiKey, Organization).join(Organization).where(ApiKey.key_hash == digest).first()
    if key is None or key.revoked_at is not None or (key.expires_at and key.expires_at <= dt.datetime.utcnow()):
        raise Refused(401, "UNAUTHENTICATED", "The API key is not valid.")
    if key.organization.status != "active" or not key.organization.entitled:
        raise Refused(403, "ORGANIZATION_NOT_ACTIVE", "The organization is not active.")
    if not set(key.scopes.split()) & set(needs):
        raise Refused(403, "INSUFFICIENT_SCOPE", "The API key lacks the scope.")
    return key


def calculate(key: ApiKey, payload: dict, idempotency_key: str) -> tuple[int, str]:
    """(status, body) of a new calculation, or of the one this idempotency key made."""
    payload = {**payload, "business_context": payload.get("business_context", "upstream")}
    fingerprint = hashlib.sha256(jsoncodec.canonical(payload).encode()).hexdigest()[:32]
    organization, environment = key.organization, key.environment
    existing = Calculation.get_or_none((Calculation.organization == organization.id)
                                       & (Calculation.environment == environment)
                                       & (Calculation.idempotency_key == idempotency_key))
    if existing is not None:
        if existing.fingerprint != fingerprint:
            raise Refused(409, "IDEMPOTENCY_KEY_REUSED", "This Idempotency-Key was used with another body.")
        return 200, existing.body
    customer = Customer.get_or_none((Customer.organization == organization.id) & (Customer.environment == environment)
                                    & (Customer.reference == payload["customer_reference"]))
    if customer is None or customer.status != "active":
        raise Refused(404, "CUSTOMER_NOT_FOUND", "No active customer with this customer_reference exists.")
    factor = (Factor.select()
              .where((Factor.reference == payload["factor_reference"]) & (Factor.status == "active")
                     & (Factor.organization.is_null() | (Factor.organization == organization.id)))
              .first())
    activity_date = dt.date.fromisoformat(payload["activity_date"])
    if (factor is None or factor.mode != payload["mode"] or (factor.valid_from and activity_date < factor.valid_from)
            or (factor.valid_to and activity_date > factor.valid_to)):
        raise Refused(404, "FACTOR_NOT_FOUND", "No applicable factor with this factor_reference.")

    cargo, distance = Decimal(payload["cargo"]["value"]), Decimal(payload["distance"]["value"])
    activity = (cargo * distance).quantize(SIX_PLACES, rounding=ROUND_HALF_EVEN)
    emissions = (activity * factor.value).quantize(SIX_PLACES, rounding=ROUND_HALF_EVEN)
    if activity == 0 or emissions == 0:
        raise Refused(422, "INVALID_REQUEST", "The activity or the emissions round to 0.")
    parts = {}
    ttw = wtt = None
    if factor.ttw_value is not None:
        ttw = (activity * factor.ttw_value).quantize(SIX_PLACES, rounding=ROUND_HALF_EVEN)
        wtt = emissions - ttw
        parts = {"breakdown": {"ttw": ttw, "wtt": wtt}}
    calculation_id = str(uuid.uuid4())
    now = dt.datetime.utcnow()
    created_at = now.replace(microsecond=now.microsecond // 1000 * 1000)
    context = payload["business_context"]
    body = jsoncodec.dumps({
        "id": calculation_id, "external_reference": payload["external_reference"], "status": "succeeded",
        "environment": environment, "customer": {"reference": customer.reference}, "mode": payload["mode"],
        "activity_date": payload["activity_date"], "origin": payload["origin"],
        "destination": payload["destination"], "cargo": {"value": payload["cargo"]["value"], "unit": "tonne"},
        "distance": {"value": payload["distance"]["value"], "unit": "km"},
        "activity": {"value": activity, "unit": "tkm"}, "emissions": {"value": emissions, "unit": "kgCO2e", **parts},
        "methodology": {"standard": "ISO 14083:2023", "boundary": "WTW", "business_context": context,
                        "scope3_category": SCOPE3_CATEGORY[context]},
        "factor": {"reference": factor.reference, "version": factor.version, "name": factor.name,
                   "source": factor.source, "region": factor.region, "mode": factor.mode, "unit": "kgCO2e/tkm",
                   "valid_from": factor.valid_from.isoformat() if factor.valid_from else None,
                   "valid_to": factor.valid_to.isoformat() if factor.valid_to else None,
                   "radiative_forcing": factor.radiative_forcing},
        "created_at": isoformat(created_at),
    })
    event_id = str(uuid.uuid4())
    event = jsoncodec.dumps({"id": event_id, "type": "calculation.succeeded", "created_at": isoformat(created_at),
                             "environment": environment, "data": jsoncodec.Raw(body)})
    period = f"{created_at.year:04d}-{created_at.month:02d}"
    capacity = (organization.live_capacity if environment == "live"
                else organization.test_capacity or DEFAULT_TEST_CAPACITY)
    try:
        with database.atomic("IMMEDIATE"):
            Calculation.create(
                id=calculation_id, organization=organization.id, environment=environment, customer=customer.id,
                external_reference=payload["external_reference"], idempotency_key=idempotency_key,
                fingerprint=fingerprint, mode=payload["mode"], business_context=context,
                activity_date=activity_date, cargo_tonnes=cargo, distance_km=distance, activity_tkm=activity,
                emissions_kg=emissions, factor=factor.id, factor_version=factor.version, factor_value=factor.value,
                body=body, created_at=created_at, emissions_ttw_kg=ttw,
                emissions_wtt_kg=wtt)
            counter = UsageCounter.get_or_none((UsageCounter.organization == organization.id)
                                               & (UsageCounter.environment == environment)
                                               & (UsageCounter.period == period))
            if counter is None:
                counter = UsageCounter(organization=organization.id, environment=environment, period=period, count=0)
            if capacity is not None and counter.count >= capacity:
                raise Refused(429, "USAGE_LIMIT_REACHED", "The capacity for this month is used up.")
            counter.count += 1
            counter.save()
            rollup = CustomerRollup.get_or_none((CustomerRollup.customer == customer.id)
                                                & (CustomerRollup.environment == environment)
                                                & (CustomerRollup.mode == payload["mode"])
                                                & (CustomerRollup.business_context == context))
            if rollup is None:
                rollup = CustomerRollup(customer=customer.id, environment=environment, mode=payload["mode"],
                                        business_context=context, calculation_count=0, activity_tkm=Decimal(0),
                                        emissions_kg=Decimal(0), first_activity_date=activity_date,
                                        last_activity_date=activity_date, emissions_ttw_kg=Decimal(0),
                                        emissions_wtt_kg=Decimal(0))
            rollup.calculation_count += 1
            rollup.activity_tkm += activity
            rollup.emissions_kg += emissions
            rollup.emissions_ttw_kg += ttw or 0
            rollup.emissions_wtt_kg += wtt or 0
            rollup.first_activity_date = min(rollup.first_activity_date, activity_date)
            rollup.last_activity_date = max(rollup.last_activity_date, activity_date)
            rollup.save()
            listening = (WebhookEndpoint.select()
                         .where((WebhookEndpoint.organization == organization.id)
                                & (WebhookEndpoint.environment == environment) & (WebhookEndpoint.status == "enabled"))
                         .exists())
            WebhookEvent.create(id=event_id, organization=organization.id, environment=environment,
                                type="calculation.succeeded", payload=event, created_at=created_at,
                                delivery_status="pending" if listening else "skipped", attempt_count=0,
                                next_attempt_at=created_at if listening else None)
    except pw.IntegrityError:  # the same key, committed first by a concurrent request
        return calculate(key, payload, idempotency_key)
    return 201, body


def build(secret: bytes) -> bottle.Bottle:
    app = bottle.Bottle()
    validator = request_validator()

    def answer(status: int, body: str, **headers: str) -> str:
        bottle.response.status = status
        bottle.response.content_type = "application/json"
        for name, value in headers.items():
            bottle.response.set_header(name.replace("_", "-"), value)
        return body

    def refused(error: Refused) -> str:
        return answer(error.status, json.dumps({"error": {"code": error.code, "message": error.message}}))

    @app.post("/v1/emissions/logistics")
    def post_calculation():
        try:
            key = authenticate(secret, ("emissions:calculate",))
            idempotency_key = bottle.request.get_header("Idempotency-Key")
            if not idempotency_key:
                raise Refused(400, "IDEMPOTENCY_KEY_REQUIRED", "The Idempotency-Key header is required.")
            try:
                payload = jsoncodec.loads(bottle.request.body.read())
            except ValueError:
                raise Refused(400, "INVALID_REQUEST", "The request body is not valid JSON.") from None
            errors = [f"{'.'.join(map(str, error.absolute_path))} {error.message}"
                      for error in validator.iter_errors(payload)]
            if errors:
                raise Refused(422, "INVALID_REQUEST", "; ".join(errors[:5]))
            status, body = calculate(key, payload, idempotency_key)
        except Refused as error:
            return refused(error)
        return answer(status, body, Idempotent_Replayed="true" if status == 200 else "false")

    @app.get("/v1/calculations/<calculation_id>")
    def get_calculation(calculation_id: str):
        try:
            key = authenticate(secret, ("emissions:read", "emissions:calculate"))
            found = Calculation.get_or_none((Calculation.id == calculation_id)
                                            & (Calculation.organization == key.organization.id)
                                            & (Calculation.environment == key.environment))
            if found is None:
                raise Refused(404, "NOT_FOUND", "No calculation with this id exists.")
        except Refused as error:
            return refused(error)
        return answer(200, found.body)

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", required=True, help="an SQLite file migrated and seeded by the service's CLI")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--threads", type=int, default=4, help="Waitress's default")
    args = parser.parse_args()
    # The service's durability settings (WAL, synchronous=NORMAL), so both pay for the same commit.
    database.initialize(pw.SqliteDatabase(args.database, timeout=10, pragmas={
        "journal_mode": "wal", "synchronous": "normal", "foreign_keys": 1, "busy_timeout": 10_000}))
    secret = InstanceSecret.get(InstanceSecret.name == "api_key_hash").value.encode()
    bare_app.serve(build(secret), args, "same-work-peer")


if __name__ == "__main__":
    main()
