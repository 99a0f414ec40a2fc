"""The audit log: the organization's latest administrative actions."""
from __future__ import annotations

from ... import audit
from ...accounts import Session
from ..rendering import render
from ..session import Pages, signed_in


class AuditPages(Pages):
    """/workspace/audit."""

    @signed_in
    def audit_page(self, session: Session):
        events = audit.recent(session.organization, 200)
        return render("audit", title="Audit log", events=events, **self.chrome(session, "audit"))
