"""Behind a reverse proxy: X-Forwarded-For, -Proto and -Host honoured from TRUSTED_PROXY only."""
from __future__ import annotations

import ipaddress

from waitress.proxy_headers import proxy_headers_middleware

FORWARDED_HEADERS = {"x-forwarded-for", "x-forwarded-proto", "x-forwarded-host"}


def trusting(app, proxies: tuple[str, ...] = (), count: int = 1):
    """The app behind Waitress's own proxy-header translation, trusting the peers in `proxies`.

    A request from a trusted peer gets the client's address in REMOTE_ADDR, its scheme in
    wsgi.url_scheme and its host in HTTP_HOST; from any other peer the X-Forwarded-* and
    Forwarded headers are removed, so the app never sees a client's claim about itself.
    Waitress's own setting takes one address or "*"; this takes a list of addresses and networks.
    """
    networks = tuple(ipaddress.ip_network(proxy, strict=False) for proxy in proxies)
    translated = proxy_headers_middleware(app, trusted_proxy="*", trusted_proxy_count=count,
                                          trusted_proxy_headers=FORWARDED_HEADERS)
    cleared = proxy_headers_middleware(app, trusted_proxy=None)

    def is_trusted(peer: str) -> bool:
        try:
            address = ipaddress.ip_address(peer.split("%", 1)[0])
        except ValueError:
            return False
        if address.version == 6 and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        return any(address in network for network in networks)

    def dispatch(environ, start_response):
        handler = translated if networks and is_trusted(environ.get("REMOTE_ADDR", "")) else cleared
        return handler(environ, start_response)

    return dispatch
