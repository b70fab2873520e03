"""Reading numeric settings from the environment, for every service."""

from __future__ import annotations

import os
from typing import Any

from shoal.common.errors import ConfigError


def env_number(env: os._Environ[str] | dict[str, str], name: str, default: str, kind: type[int] | type[float]) -> Any:
    """An environment setting as a number, or a ConfigError naming the variable."""
    raw = env.get(name, default)
    try:
        return kind(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not {'an integer' if kind is int else 'a number'}") from None
