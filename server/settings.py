"""Server settings from the environment, with documented defaults.

SHOAL_DB_URL (default ``sqlite:///shoal.db``), SHOAL_KEY_PATH (default
``shoal-server-key.pem``), SHOAL_OPERATOR_TOKEN and SHOAL_SHUFFLER_TOKEN
(generated and printed at start when unset, which is refused unless the
server binds a loopback address), SHOAL_MAX_BATCH (default 10,000 messages)
and SHOAL_MAX_BODY_BYTES (default 64 MiB).
"""

from __future__ import annotations

import ipaddress
import os
import secrets
from dataclasses import dataclass

from shoal.common.errors import ConfigError


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Settings:
    db_url: str = "sqlite:///shoal.db"
    key_path: str = "shoal-server-key.pem"
    operator_token: str = ""
    shuffler_token: str = ""
    host: str = "127.0.0.1"
    max_batch: int = 10_000
    max_body_bytes: int = 64 << 20
    generated_tokens: bool = False

    def __post_init__(self) -> None:
        if not self.operator_token or not self.shuffler_token:
            raise ConfigError("operator and shuffler tokens must be set")
        if self.operator_token == self.shuffler_token:
            raise ConfigError("the operator and shuffler tokens must differ")
        if self.generated_tokens and not is_loopback(self.host):
            raise ConfigError(
                f"refusing to serve on {self.host} with generated tokens: set "
                "SHOAL_OPERATOR_TOKEN and SHOAL_SHUFFLER_TOKEN"
            )
        if self.max_batch < 1 or self.max_body_bytes < 1024:
            raise ConfigError(f"bad limits: max_batch={self.max_batch}, max_body_bytes={self.max_body_bytes}")


def load_settings(host: str = "127.0.0.1", db_url: str | None = None) -> Settings:
    env = os.environ
    op = env.get("SHOAL_OPERATOR_TOKEN", "")
    sh = env.get("SHOAL_SHUFFLER_TOKEN", "")
    generated = not op or not sh
    return Settings(
        db_url=db_url or env.get("SHOAL_DB_URL", "sqlite:///shoal.db"),
        key_path=env.get("SHOAL_KEY_PATH", "shoal-server-key.pem"),
        operator_token=op or secrets.token_urlsafe(24),
        shuffler_token=sh or secrets.token_urlsafe(24),
        host=host,
        max_batch=int(env.get("SHOAL_MAX_BATCH", "10000")),
        max_body_bytes=int(env.get("SHOAL_MAX_BODY_BYTES", str(64 << 20))),
        generated_tokens=generated,
    )
