"""The naive peer: the calculation route as a first version would write it, served like the service.

POST /v1/emissions/logistics parses the body with Decimal numbers, validates it with jsonschema
against the service's own LogisticsRequest schema, multiplies, and stores it with one Peewee
insert (Model.create) on its own SQLite file with the service's connection settings; it answers
201 with the JSON. No authentication, no idempotency, no capacity, no rollup, no outbox: the
service does all of those, and bench/run.py asks it to be at least as fast as this anyway.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import uuid
from decimal import Decimal

import bottle
import peewee as pw

import bare_app  # beside this file: the same stock Waitress serving
from emissions import jsoncodec, models, schemas
from emissions.db import open_database

database = pw.DatabaseProxy()


class NaiveCalculation(pw.Model):
    id = pw.CharField(primary_key=True, max_length=36)
    customer_reference = pw.CharField(max_length=120)
    external_reference = pw.CharField(max_length=120)
    mode = pw.CharField(max_length=8)
    activity_tkm = models.ExactDecimalField()
    emissions_kg = models.ExactDecimalField()
    body = pw.TextField()
    created_at = models.TimestampField()

    class Meta:
        database = database


FACTOR = Decimal("0.12522")


def build() -> bottle.Bottle:
    app = bottle.Bottle()
    validator = schemas.validator("LogisticsRequest")

    @app.post("/v1/emissions/logistics")
    def calculate():
        payload = jsoncodec.loads(bottle.request.body.read())
        bottle.response.content_type = "application/json"
        errors = [error.message for error in validator.iter_errors(payload)]
        if errors:
            bottle.response.status = 422
            return json.dumps({"errors": errors})
        calculation_id = str(uuid.uuid4())
        activity = payload["cargo"]["value"] * payload["distance"]["value"]
        body = jsoncodec.dumps({"id": calculation_id, "customer": payload["customer_reference"],
                                "activity": activity, "emissions": activity * FACTOR})
        NaiveCalculation.create(id=calculation_id, customer_reference=payload["customer_reference"],
                                external_reference=payload["external_reference"], mode=payload["mode"],
                                activity_tkm=activity, emissions_kg=activity * FACTOR, body=body,
                                created_at=dt.datetime.now(dt.timezone.utc))
        bottle.response.status = 201
        return body

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", required=True, help="the SQLite file it writes to")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    database.initialize(open_database(f"sqlite:///{args.database}"))
    database.create_tables([NaiveCalculation])
    bare_app.serve(build(), args, "naive")


if __name__ == "__main__":
    main()
