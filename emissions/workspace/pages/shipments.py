"""The shipments: the list and one chain, drawn."""
from __future__ import annotations

import re

from .. import chain
from .. import insights
from ...accounts import Session
from ..rendering import pretty_json, render
from ..session import Pages, signed_in


class ShipmentPages(Pages):
    """/workspace/shipments and /workspace/shipments/<id>."""

    @signed_in
    def shipments_page(self, session: Session):
        listed = insights.shipments(session.organization.id, session.environment, 100)
        return render("shipments", title="Shipments", shipments=listed, **self.chrome(session, "shipments"))

    @signed_in
    def shipment_page(self, session: Session, shipment_id: str):
        body = (insights.shipment(session.organization.id, session.environment, shipment_id)
                if re.fullmatch(r"[0-9a-f-]{36}", shipment_id) else None)
        if body is None:
            return self.no_such(session, "shipments", "No such shipment",
                                "No shipment with this id exists in this environment.")
        unit = chain.unit_of(body)  # one unit for the page's cards, chain and bars
        return render("shipment", title="Shipment", shipment=body, unit=unit, svg=chain.chain_svg(body, unit),
                      bars=chain.element_bars(body), place_name=chain.place_name,
                      pretty=pretty_json(body), **self.chrome(session, "shipments"))
