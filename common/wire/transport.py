"""Which URLs a device or the shuffler may send to (issue 39, Build 5).

A device token, a report and a sealed message must not cross a real network
in clear: ``http://`` is accepted only to a loopback host (127.0.0.0/8,
``::1``, ``localhost``: a process on the same machine, as ``shoal sim`` and
the tests run), unless the caller says ``insecure`` (a private network of
its own, e.g. compose's internal one). ``https://`` is always accepted.
Imported by devices, so standard library only.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from shoal.common.errors import ConfigError


def is_loopback_host(host: str) -> bool:
    """True for ``localhost`` and any loopback address (127.0.0.0/8, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_url(url: str, what: str, insecure: bool = False, flag: str = "insecure=True") -> str:
    """``url`` (without a trailing slash) if it may carry ``what``'s traffic,
    else a ConfigError naming the URL and the way out.

    ``flag`` is how the caller's user says "insecure" (``--insecure`` on a
    command line, ``insecure=True`` in Python), so the error tells them."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{what} {url!r} is not an http:// or https:// URL with a host")
    if parts.scheme == "http" and not insecure and not is_loopback_host(parts.hostname):
        raise ConfigError(
            f"{what} {url!r} is plain http to a host that is not this machine ({parts.hostname}): device tokens and "
            f"reports would cross the network in clear. Use https:// (docs/how-to/tls.md), or {flag} if this "
            "network is private to you")
    return url.rstrip("/")
