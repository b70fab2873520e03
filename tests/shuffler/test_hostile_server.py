"""A hostile server, over real sockets (issue 12). A forwarding proxy on
loopback stands in for the server: it may re-sign tampered configs with the
server's real identity key (a hostile server holds it), hand each device
its own X25519 key, or commit a forwarded batch and then answer 500 or drop
the connection. Whatever it does, the real server never receives a group
from fewer than the pinned min_batch devices, batches are re-sent
unchanged, and devices refuse configs that the pinned key did not sign."""

import base64
import copy
import json
import sqlite3
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from shuffler_helpers import _buffered, _sealed_messages, _spawn_shuffler, _wait_until, enrolled
from tests_helpers import free_port

from shoal.client.device import Device, TransportError
from shoal.common.wire.envelope import public_key_bytes
from shoal.common.wire.signing import (
    SigningKey,
    TrustError,
    identity_path,
    load_or_create_signing_key,
)


class HostileProxy:
    """Forwards to the real server; ``tamper_config(body) -> body`` rewrites configs,
    ``fail_shuffled`` (a list of "500" / "drop") answers forwarded batches after they committed."""

    def __init__(self, upstream: str, tamper_config=None, fail_shuffled=()):
        self.upstream, self.tamper_config, self.fail = upstream, tamper_config, list(fail_shuffled)
        self.batches: list[list[str]] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _relay(self, method):
                length = int(self.headers.get("content-length", 0))
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() in ("authorization", "content-type")}
                r = httpx.request(method, proxy.upstream + self.path, content=body, headers=headers, timeout=30)
                content = r.content
                if method == "GET" and self.path.endswith("/config") and r.status_code == 200 and proxy.tamper_config:
                    content = json.dumps(proxy.tamper_config(r.json())).encode()
                if method == "POST" and self.path.endswith("/shuffled"):
                    proxy.batches.append(json.loads(body)["sealed"])
                    if proxy.fail:
                        how = proxy.fail.pop(0)
                        if how == "drop":  # committed upstream, then the connection dies: a timeout to the shuffler
                            self.close_connection = True
                            self.connection.shutdown(2)
                            return
                        r, content = httpx.Response(500), b'{"detail": "internal error"}'
                self.send_response(r.status_code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            def do_GET(self):
                self._relay("GET")

            def do_POST(self):
                self._relay("POST")

        self.port = free_port()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.port}"

    def close(self):
        self.httpd.shutdown()


def _identity(server) -> SigningKey:
    """The server's identity key: a hostile server can sign whatever it likes."""
    return load_or_create_signing_key(identity_path(server.env["SHOAL_KEY_PATH"]))


def _resign(identity: SigningKey, body: dict, config: dict | None = None, x25519: str | None = None) -> dict:
    return identity.signed_config(body["round_id"], config or body["config"], x25519 or body["server_public_key"])


@pytest.mark.parametrize("failure", ["500", "drop"])
def test_a_committed_batch_is_resent_unchanged_never_merged_with_newcomers(server, tmp_path, failure):
    """Commit-then-500 and commit-then-timeout on forward: the retry carries the
    same messages in the same order; the one that arrived meanwhile waits."""
    proxy = HostileProxy(server.url, fail_shuffled=[failure])
    port, db = free_port(), str(tmp_path / "s.db")
    proc = _spawn_shuffler(server, db, port, 20, server_url=proxy.url)
    try:
        rid, sealed = _sealed_messages(server, 21)
        url = f"http://127.0.0.1:{port}/rounds/{rid}/messages"
        toks = enrolled(url, server, 21)
        for i in range(20):
            assert httpx.post(url, json=sealed.body(i), headers={"X-Device-Token": toks[i]}).status_code == 202
        assert _wait_until(lambda: len(proxy.batches) >= 1)
        assert httpx.post(url, json=sealed.body(20), headers={"X-Device-Token": toks[20]}).status_code == 202
        assert _wait_until(lambda: len(proxy.batches) >= 2 and _buffered(db) == 1, 15)
        assert all(b == proxy.batches[0] for b in proxy.batches) and len(proxy.batches[0]) == 20
        assert httpx.get(server.url + f"/rounds/{rid}").json()["reports"] == 20
    finally:
        proc.kill()
        proxy.close()


def test_duplicate_resubmissions_count_once(server, shuffler):
    url, db, _ = shuffler
    rid, sealed = _sealed_messages(server, 3)
    toks = enrolled(url, server, 2)
    first = httpx.post(url + f"/rounds/{rid}/messages", json=sealed.body(0), headers={"X-Device-Token": toks[0]})
    again = httpx.post(url + f"/rounds/{rid}/messages", json=sealed.body(0), headers={"X-Device-Token": toks[1]})
    assert first.status_code == 202 and again.status_code == 202 and again.json() == {"accepted": 0, "duplicates": 1}
    assert _buffered(db) == 1
    # the replay used none of the second token's submission: its own message is still taken
    r = httpx.post(url + f"/rounds/{rid}/messages", json=sealed.body(1), headers={"X-Device-Token": toks[1]})
    assert r.status_code == 202 and r.json() == {"accepted": 1, "duplicates": 0} and _buffered(db) == 2


def test_config_equivocation_on_min_batch_is_refused(server, tmp_path):
    """Devices verify min_batch 25; the hostile server tells the shuffler 2,
    validly signed. The shuffler refuses every message (digest mismatch) and
    the server receives nothing."""
    identity = _identity(server)

    def shrink(body):
        cfg = copy.deepcopy(body["config"])
        cfg["min_batch"] = 2
        return _resign(identity, body, config=cfg)

    proxy = HostileProxy(server.url, tamper_config=shrink)
    port, db = free_port(), str(tmp_path / "s.db")
    proc = _spawn_shuffler(server, db, port, 2, server_url=proxy.url)
    try:
        rid, sealed = _sealed_messages(server, 5, min_batch=25)
        pin = httpx.get(server.url + "/server-key").json()["fingerprint"]
        dev = Device(server.url, tmp_path / "d.json", shuffler_url=f"http://127.0.0.1:{port}", server_key=pin,
                     device_token=enrolled(f"http://127.0.0.1:{port}", server, 1)[0])
        with pytest.raises(TransportError, match="config equivocation"):
            dev.participate(rid, [0.1, 0.2, 0.3])
        assert _buffered(db) == 0 and httpx.get(server.url + f"/rounds/{rid}").json()["reports"] == 0
    finally:
        proc.kill()
        proxy.close()


def test_per_device_keys_cannot_reach_the_server(server, tmp_path):
    """Each device gets its own (validly signed) X25519 key, so the server could
    link messages; the shuffler, which verified the real key, refuses them all."""
    identity = _identity(server)

    def own_key(body):
        fresh = base64.b64encode(public_key_bytes(X25519PrivateKey.generate().public_key())).decode()
        return _resign(identity, body, x25519=fresh)

    to_devices = HostileProxy(server.url, tamper_config=own_key)
    port, db = free_port(), str(tmp_path / "s.db")
    proc = _spawn_shuffler(server, db, port, 2)
    try:
        rid, _ = _sealed_messages(server, 1, min_batch=5)
        pin = httpx.get(server.url + "/server-key").json()["fingerprint"]
        pts = np.random.default_rng(0).uniform(-0.5, 0.5, (6, 3))
        refused = 0
        toks = enrolled(f"http://127.0.0.1:{port}", server, 6)
        for i in range(6):
            dev = Device(to_devices.url, tmp_path / f"d{i}.json", shuffler_url=f"http://127.0.0.1:{port}", server_key=pin,
                         device_token=toks[i])
            try:
                dev.participate(rid, pts[i])
            except TransportError as exc:  # the shuffler's 409
                refused += "config equivocation" in str(exc)
        assert refused == 6
        assert _buffered(db) == 0 and httpx.get(server.url + f"/rounds/{rid}").json()["reports"] == 0
    finally:
        proc.kill()
        to_devices.close()


@pytest.mark.parametrize("tamper", ["unsigned", "other key", "edited after signing", "other round"])
def test_devices_refuse_configs_the_pinned_key_did_not_sign(server, tmp_path, tamper):
    rid, _ = _sealed_messages(server, 1)
    other_rid, _ = _sealed_messages(server, 1)
    stranger = SigningKey(Ed25519PrivateKey.generate())

    def change(body):
        if tamper == "unsigned":
            return {k: body[k] for k in ("round_id", "config", "server_public_key")}
        if tamper == "other key":
            return _resign(stranger, body)
        if tamper == "edited after signing":
            return body | {"config": body["config"] | {"epsilon": 50.0}}
        return httpx.get(server.url + f"/rounds/{other_rid}/config").json()

    proxy = HostileProxy(server.url, tamper_config=change)
    try:
        pin = httpx.get(server.url + "/server-key").json()["fingerprint"]
        with pytest.raises(TrustError):
            Device(proxy.url, tmp_path / "d.json", server_key=pin).participate(rid, [0.1, 0.2, 0.3])
        assert httpx.get(server.url + f"/rounds/{rid}").json()["reports"] == 0
    finally:
        proxy.close()


def test_the_shuffler_database_cannot_pair_tokens_with_messages(server, shuffler):
    """Reading every table in storage order (and even the round's HMAC key):
    pairing the i-th member row with the i-th message row matches at chance."""
    import hashlib
    import hmac

    url, db, _ = shuffler
    rid, sealed = _sealed_messages(server, 60, min_batch=100)  # held: below the round's min_batch
    tokens = enrolled(url, server, 60)
    for i, tok in enumerate(tokens):
        assert httpx.post(url + f"/rounds/{rid}/messages", json=sealed.body(i), headers={"X-Device-Token": tok}).status_code == 202
    con = sqlite3.connect(db)
    key = bytes(con.execute("SELECT key FROM round_keys WHERE round_id = ?", (rid,)).fetchone()[0])
    by_member = {hmac.new(key, t.encode(), hashlib.sha256).hexdigest(): i for i, t in enumerate(tokens)}
    by_sealed = {base64.b64decode(s): i for i, s in enumerate(sealed)}
    members = [by_member[r[0]] for r in con.execute("SELECT member FROM members WHERE round_id = ?", (rid,))]
    rows = [by_sealed[bytes(r[0])] for t in ("pending", "formed") for r in con.execute(f"SELECT sealed FROM {t}")]
    assert sorted(members) == list(range(60)) and sorted(rows) == list(range(60))
    assert sum(a == b for a, b in zip(members, rows, strict=True)) <= 6  # chance: about 1
    for seq in (members, rows):  # neither table keeps arrival order
        assert abs(np.corrcoef(seq, np.arange(60))[0, 1]) < 0.5


def test_self_made_tokens_and_injected_messages_are_refused(server, shuffler):
    """Tokens come only from the operator's enrolment: a made-up token (a device's
    own, or min_batch - 1 messages the server injects) is refused, so it can
    never complete a batch; enrolment itself needs the operator's token."""
    url, db, _ = shuffler
    rid, sealed = _sealed_messages(server, 25)
    for i in range(19):
        r = httpx.post(url + f"/rounds/{rid}/messages", json=sealed.body(i), headers={"X-Device-Token": f"injected-{i:012d}"})
        assert r.status_code == 403 and "not enrolled" in r.text
    no_op = httpx.post(url + "/enrol", json={"count": 5}, headers={"Authorization": f"Bearer {server.shuffler}"})
    assert no_op.status_code == 403
    toks = enrolled(url, server, 1)
    assert httpx.post(url + f"/rounds/{rid}/messages", json=sealed.body(19), headers={"X-Device-Token": toks[0]}).status_code == 202
    assert _buffered(db) == 1 and httpx.get(server.url + f"/rounds/{rid}").json()["reports"] == 0


def test_enrolment_is_rate_limited(tmp_path):
    from shoal.shuffler.app import RateLimit

    limit = RateLimit(per_minute=100)
    assert limit.take(60) == 0 and limit.take(40) == 0
    assert limit.take(1) > 0
