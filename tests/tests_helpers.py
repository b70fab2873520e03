"""Helpers shared by test modules (importable: tests/ is on sys.path)."""

import socket


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
