"""The dashboard's login: a signed, revocable cookie instead of a bearer header.

A browser cannot put the operator's bearer token on a page request, so
``POST /ui/login`` checks the token once and sets a cookie
``<session id>.<issued>.<HMAC-SHA256(operator token, id.issued)>`` (HttpOnly,
SameSite=Strict, path /ui, Secure over https) that lives ``LIFETIME_SECONDS``
after ``issued``. HMAC from ``cryptography``, as every other MAC in shoal.

Revocation (issue 39: a copied cookie used to open the UI for 12 h after a
log-out):

- Changing the operator token revokes every cookie: the MAC is keyed by it.
- Logging out revokes the session's id in :class:`Sessions`, held **in the
  server process** (no database table: the store belongs to the storage
  layer). So it is exact for one server process, and:
  - with several replicas behind one address, a log-out revokes the cookie on
    the replica that served it; the others accept it until it expires (or
    until they restart: see next point). Rotate the operator token to revoke
    everywhere at once;
  - a restarted process refuses every cookie issued before it started, so a
    restart never brings a revoked cookie back (everyone logs in again).

Forms carry a CSRF token, the HMAC of the cookie under the same key, so a page
of another origin cannot post one even if a browser ignored SameSite. The
log-in form, which has no session yet, carries a random value that must equal
the ``LOGIN_COOKIE`` the log-in page set (a double-submit token).
"""

from __future__ import annotations

import secrets
import threading
import time

from cryptography.hazmat.primitives import hashes, hmac

COOKIE = "shoal_ui"
LOGIN_COOKIE = "shoal_ui_login"
LIFETIME_SECONDS = 12 * 3600
LOGIN_FORM_SECONDS = 3600  # how long a log-in page's form stays postable
# When this process started: cookies issued before it are refused (a restart
# forgets revocations, so it must not accept what it may have revoked).
PROCESS_STARTED = int(time.time())


def _mac(key: str, label: bytes, message: str) -> str:
    h = hmac.HMAC(key.encode(), hashes.SHA256())
    h.update(label + b"\x00" + message.encode())
    return h.finalize().hex()


def new_session(operator_token: str, now: float | None = None) -> str:
    """A fresh cookie value: a random session id, when it was issued, and their MAC."""
    body = f"{secrets.token_hex(16)}.{int(time.time() if now is None else now)}"
    return f"{body}.{_mac(operator_token, b'shoal-ui-session', body)}"


def _parts(cookie: str | None) -> tuple[str, int] | None:
    """(session id, issued) of a well-formed cookie value, else None."""
    if not cookie or cookie.count(".") != 2:
        return None
    sid, issued, _ = cookie.split(".")
    if len(sid) != 32 or not issued.isdigit() or len(issued) > 12:
        return None
    return sid, int(issued)


def valid_session(operator_token: str, cookie: str | None, now: float | None = None,
                  started: int = PROCESS_STARTED) -> bool:
    """Is ``cookie`` signed with this token, issued since ``started`` and not expired?
    (Revocation is :meth:`Sessions.valid`'s extra check.)"""
    parts = _parts(cookie)
    if parts is None:
        return False
    assert cookie is not None
    _, issued = parts
    t = time.time() if now is None else now
    if issued < started or issued + LIFETIME_SECONDS < t:
        return False
    body, mac = cookie.rsplit(".", 1)
    return secrets.compare_digest(mac, _mac(operator_token, b"shoal-ui-session", body))


class Sessions:
    """Revoked session ids of this server process, each kept until its cookie
    would have expired anyway (module docstring: what that does and does not
    cover with replicas). Only a signed, valid cookie can be revoked, so the set
    grows only with real log-outs."""

    def __init__(self, started: int = PROCESS_STARTED) -> None:
        self.started = started
        self._revoked: dict[str, float] = {}  # session id -> when its cookie expires
        self._lock = threading.Lock()

    def valid(self, operator_token: str, cookie: str | None, now: float | None = None) -> bool:
        if not valid_session(operator_token, cookie, now, self.started):
            return False
        parts = _parts(cookie)
        assert parts is not None
        with self._lock:
            return parts[0] not in self._revoked

    def revoke(self, cookie: str, now: float | None = None) -> None:
        """Refuse this cookie from now on (the caller checked it is valid)."""
        parts = _parts(cookie)
        if parts is None:
            return
        t = time.time() if now is None else now
        with self._lock:
            for sid in [s for s, until in self._revoked.items() if until < t]:
                del self._revoked[sid]
            self._revoked[parts[0]] = parts[1] + LIFETIME_SECONDS


def csrf_token(operator_token: str, cookie: str) -> str:
    return _mac(operator_token, b"shoal-ui-csrf", cookie)


def valid_csrf(operator_token: str, cookie: str, token: str | None) -> bool:
    return bool(token) and secrets.compare_digest(str(token), csrf_token(operator_token, cookie))


def new_login_nonce() -> str:
    """The log-in form's double-submit value (set as ``LOGIN_COOKIE`` and as the form's csrf field)."""
    return secrets.token_hex(16)


def valid_login_nonce(cookie: str | None, posted: str | None) -> bool:
    return bool(cookie) and bool(posted) and secrets.compare_digest(str(cookie), str(posted))
