"""Helpers shared by test modules (importable: tests/ is on sys.path)."""

from shoal.server.sim import free_port, wait_healthy

__all__ = ["free_port", "wait_healthy"]
