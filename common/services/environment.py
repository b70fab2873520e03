"""The services' settings from the environment (SHOAL_*), through pydantic-settings.

Each service declares its variables as a ``ServiceEnvironment`` subclass
(``server/edge/settings.py``, ``shuffler/cli.py``): typed, with defaults, read
once at start. A malformed value becomes one ConfigError that names the
variable and what was wrong, which the CLI prints as one line (exit 2).
Imported by the services only: pydantic-settings is in the server extra.
"""

from __future__ import annotations

from typing import TypeVar

from pydantic import ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from shoal.common.errors import ConfigError


class ServiceEnvironment(BaseSettings):
    """What every service reads: the two slow-client timeouts (``http_edge.serve``) and the origins of
    pages whose browser devices may call it (``device_cors``)."""

    model_config = SettingsConfigDict(env_prefix="SHOAL_", extra="ignore", frozen=True)
    header_seconds: float = 10.0
    body_seconds: float = 30.0
    device_origins: str = ""  # common/services/device_cors.py: pages on these origins may call the device endpoints


E = TypeVar("E", bound=ServiceEnvironment)


def read_environment(kind: type[E]) -> E:
    try:
        return kind()
    except ValidationError as exc:
        raise ConfigError("; ".join(
            f"SHOAL_{str(e['loc'][0]).upper()}={e.get('input')!r}: {e['msg']}" for e in exc.errors())) from None
