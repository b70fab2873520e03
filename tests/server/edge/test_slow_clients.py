"""Issue 13: slow clients cost a bounded time. Half-sent headers are cut
after SHOAL_HEADER_SECONDS, a body that stalls gets a 408 after
SHOAL_BODY_SECONDS, large bodies beyond the concurrency limit get a 503; an
honest client is served throughout. (1,100 half-sent requests used to hold
1,100 descriptors for ever.)"""

import os
import socket
import subprocess
import sys
import time

import httpx
from tests_helpers import free_port, wait_healthy


def _spawn(tmp_path, **env):
    port = free_port()
    e = dict(os.environ, SHOAL_OPERATOR_TOKEN="op-" + "x" * 20, SHOAL_SHUFFLER_TOKEN="sh-" + "y" * 20,
             SHOAL_KEY_PATH=str(tmp_path / "key.pem"), SHOAL_HEADER_SECONDS="1", SHOAL_BODY_SECONDS="1")
    e.update(env)
    proc = subprocess.Popen([sys.executable, "-m", "shoal.common.cli", "server", "--port", str(port), "--db",
                             f"sqlite:///{tmp_path / 's.db'}"], env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_healthy(f"http://127.0.0.1:{port}", proc)
    return proc, port


def _closed_by_peer(s: socket.socket) -> bool:
    s.settimeout(5)
    try:
        return s.recv(1024) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_half_sent_headers_are_cut_and_honest_clients_still_served(tmp_path):
    proc, port = _spawn(tmp_path)
    try:
        slow = []
        for i in range(300):
            s = socket.create_connection(("127.0.0.1", port))
            if i % 2:
                s.sendall(b"POST /rounds HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl")  # never finished
            slow.append(s)  # even ones send nothing at all
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
        time.sleep(1.5)
        assert all(_closed_by_peer(s) for s in slow)
        for s in slow:
            s.close()
        fds = len(os.listdir(f"/proc/{proc.pid}/fd"))
        assert fds < 100, fds
    finally:
        proc.kill()
        proc.wait()


def test_a_stalled_body_gets_a_408(tmp_path):
    proc, port = _spawn(tmp_path)
    try:
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"POST /rounds HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 1000\r\n\r\n{\"k\": 2")
        s.settimeout(5)
        t = time.time()
        answer = b""
        while chunk := s.recv(4096):  # the server closes after its answer
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 408") and b"not received within 1 s" in answer
        assert time.time() - t < 4
        s.close()
    finally:
        proc.kill()
        proc.wait()


def test_large_bodies_beyond_the_concurrency_limit_get_a_503(tmp_path):
    proc, port = _spawn(tmp_path, SHOAL_BODY_SECONDS="5")
    try:
        big = 2 << 20
        held = []
        for _ in range(4):  # four large bodies in flight, each stalled after its headers
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"POST /rounds/x/reports/batch HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      + f"Content-Length: {big}\r\n\r\n".encode() + b"{")
            held.append(s)
        time.sleep(0.3)
        r = httpx.post(f"http://127.0.0.1:{port}/rounds/x/reports/batch", content=b" " * big,
                       headers={"content-type": "application/json"}, timeout=10)
        assert r.status_code == 503 and r.headers["Retry-After"]
        small = httpx.post(f"http://127.0.0.1:{port}/rounds/x/reports", json={"round_id": "x"}, timeout=10)
        assert small.status_code == 422
        for s in held:
            s.close()
    finally:
        proc.kill()
        proc.wait()


def test_a_post_without_a_body_needs_no_content_length_but_a_chunked_body_does(server):
    import socket as sk

    def raw(request: bytes) -> bytes:
        s = sk.create_connection(("127.0.0.1", server.port))
        s.sendall(request)
        s.settimeout(5)
        out = s.recv(4096)
        s.close()
        return out

    auth = f"Authorization: Bearer {server.operator}\r\n".encode()
    answer = raw(b"POST /rounds/nope/cluster HTTP/1.1\r\nHost: 127.0.0.1\r\n" + auth + b"\r\n")
    assert answer.startswith(b"HTTP/1.1 404")  # reached the route: no 411 for an empty POST
    chunked = raw(b"POST /rounds HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n" + auth
                  + b"Content-Type: application/json\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
    assert chunked.startswith(b"HTTP/1.1 411")
