"""The workspace: the organization's people sign in to see usage, calculations, customers, webhooks,
API keys, their team and the audit log (docs/workspace.md).

Users, passwords, throttling and sessions are the core's (emissions/accounts.py); insights: what the pages read; chart and chain:
the SVG; rendering: how a page answers; session: cookies, forms, CSRF and the state the pages share;
flash: what a page shows once; pages/: one module per section; routes: the URL map. Templates are in
emissions/templates, the stylesheet in emissions/static.
"""
from ..accounts import (SESSION_HOURS, SIGN_IN_ADDRESS_BURST, SIGN_IN_BURST, Hasher, HashingBusy, Sessions, SignInThrottle, WorkspaceError,
                       authenticate_user, check_password, create_user, delete_user, end_sessions_of, hash_password,
                       set_password)
from .routes import Workspace, routes
from .session import COOKIE

__all__ = ["COOKIE", "SESSION_HOURS", "SIGN_IN_ADDRESS_BURST", "SIGN_IN_BURST", "Hasher", "HashingBusy", "Sessions", "SignInThrottle", "Workspace",
           "WorkspaceError", "authenticate_user", "check_password", "create_user", "delete_user", "end_sessions_of",
           "hash_password", "routes", "set_password"]
