"""The dashboard's login: a signed cookie instead of a bearer header.

A browser cannot put the operator's bearer token on a page request, so
``POST /ui/login`` checks the token once and sets a cookie
``<expiry>.<HMAC-SHA256(operator token, expiry)>`` (HttpOnly, SameSite=Strict,
path /ui, Secure over https). Every replica that shares the token accepts it;
rotating the token logs everyone out. Forms carry a CSRF token, the HMAC of
the cookie under the same key, so a page of another origin cannot post one
even if a browser ignored SameSite. HMAC from ``cryptography``, as every
other MAC and signature in shoal.
"""

from __future__ import annotations

import secrets
import time

from cryptography.hazmat.primitives import hashes, hmac

COOKIE = "shoal_ui"
LIFETIME_SECONDS = 12 * 3600


def _mac(key: str, label: bytes, message: str) -> str:
    h = hmac.HMAC(key.encode(), hashes.SHA256())
    h.update(label + b"\x00" + message.encode())
    return h.finalize().hex()


def new_session(operator_token: str, now: float | None = None) -> str:
    expiry = str(int((time.time() if now is None else now) + LIFETIME_SECONDS))
    return f"{expiry}.{_mac(operator_token, b'shoal-ui-session', expiry)}"


def valid_session(operator_token: str, cookie: str | None, now: float | None = None) -> bool:
    if not cookie or cookie.count(".") != 1:
        return False
    expiry, mac = cookie.split(".")
    if not expiry.isdigit() or int(expiry) < (time.time() if now is None else now):
        return False
    return secrets.compare_digest(mac, _mac(operator_token, b"shoal-ui-session", expiry))


def csrf_token(operator_token: str, cookie: str) -> str:
    return _mac(operator_token, b"shoal-ui-csrf", cookie)


def valid_csrf(operator_token: str, cookie: str, token: str | None) -> bool:
    return bool(token) and secrets.compare_digest(str(token), csrf_token(operator_token, cookie))
