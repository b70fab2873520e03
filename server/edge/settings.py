"""Server settings from the environment, with documented defaults.

SHOAL_DB_URL (default ``sqlite:///shoal.db``), SHOAL_KEY_PATH (default
``shoal-server-key.pem``), SHOAL_OPERATOR_TOKEN and SHOAL_SHUFFLER_TOKEN
(generated and printed at start when unset, which is refused unless the
server binds a loopback address), SHOAL_MAX_BATCH (default 10,000 messages)
SHOAL_MAX_BODY_BYTES (default 16 MiB: a batch of 10,000 tree reports is
about 2.6 MB; parsing a body takes several times its size in memory) and SHOAL_DECODE_LEASE_SECONDS
(default 30: how long a decode's lease lasts without renewal, so how long a
round stays ``decoding`` after its server died on another host) and
SHOAL_DECODE_MEMORY_BYTES (default 8 GiB: rounds whose decode would need
more are refused at creation with a 422 naming the memory),
SHOAL_HEADER_SECONDS (default 10: a connection must send a request's line
and headers within this) and SHOAL_BODY_SECONDS (default 30: each chunk of a
body must arrive within this, else 408; the shuffler reads the same two)
and SHOAL_REPORT_RETENTION_DAYS (default 0, keep: otherwise the reports
of a decoded round are deleted this many days after it was created; its
result stays) and SHOAL_DASK_SCHEDULER (default unset: decodes run in the
server's process; ``tcp://HOST:PORT``: they sum the reports on that Dask
cluster, ``rounds/reduction.py``) and SHOAL_DASK_DEADLINE_SECONDS (default 0:
from the round's size, 60 s + 10 us a report; a decode on Dask still running
then is given up, its round back to ``closed`` with the error, and answers
503) and SHOAL_DASK_FALLBACK (default false: a decode Dask lost answers 503;
true: it is decoded in the server's own process instead) and
SHOAL_DEVICE_ORIGINS (default empty: origins, comma separated, of web pages
whose browser devices may call the device endpoints; ``common/services/device_cors.py``)
and SHOAL_ID_SET_BUDGET (default 4,194,304: message ids a SQLite store keeps
in memory to refuse retried messages, ~90 bytes each; a round past it is
refused its retries by its table's key, at a slower ingestion;
``storage/id_sets.py``).
Tokens must have at least 16 characters.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from shoal.common.errors import ConfigError
from shoal.common.services.device_cors import parse_origins
from shoal.common.services.environment import ServiceEnvironment, read_environment
from shoal.common.wire.transport import is_loopback_host
from shoal.server.rounds.reduction import check_scheduler
from shoal.server.storage.id_sets import ID_BUDGET

MIN_TOKEN_CHARS = 16  # bearer tokens shorter than this are refused at start


@dataclass(frozen=True)
class Settings:
    db_url: str = "sqlite:///shoal.db"
    key_path: str = "shoal-server-key.pem"
    operator_token: str = ""
    shuffler_token: str = ""
    host: str = "127.0.0.1"
    max_batch: int = 10_000
    max_body_bytes: int = 16 << 20
    generated_tokens: bool = False
    decode_lease_seconds: float = 30.0
    decode_memory_bytes: int = 8 << 30
    header_seconds: float = 10.0
    report_retention_days: float = 0.0
    body_seconds: float = 30.0
    shuffler_url: str = ""
    dask_scheduler: str = ""
    dask_deadline_seconds: float = 0.0
    dask_fallback: bool = False
    device_origins: tuple[str, ...] = ()
    id_set_budget: int = ID_BUDGET

    def __post_init__(self) -> None:
        if not self.operator_token or not self.shuffler_token:
            raise ConfigError("operator and shuffler tokens must be set")
        for name, tok in (("SHOAL_OPERATOR_TOKEN", self.operator_token), ("SHOAL_SHUFFLER_TOKEN", self.shuffler_token)):
            if len(tok) < MIN_TOKEN_CHARS:
                raise ConfigError(f"{name} is too short: {len(tok)} characters, at least {MIN_TOKEN_CHARS} are required")
        if self.operator_token == self.shuffler_token:
            raise ConfigError("the operator and shuffler tokens must differ")
        if self.generated_tokens and not is_loopback_host(self.host):
            raise ConfigError(
                f"refusing to serve on {self.host} with generated tokens: set "
                "SHOAL_OPERATOR_TOKEN and SHOAL_SHUFFLER_TOKEN"
            )
        if not 1.0 <= self.decode_lease_seconds <= 3600.0:
            raise ConfigError(f"SHOAL_DECODE_LEASE_SECONDS={self.decode_lease_seconds} is outside 1..3600")
        if not (0 < self.header_seconds <= 600 and 0 < self.body_seconds <= 3600):
            raise ConfigError(f"timeouts out of range: SHOAL_HEADER_SECONDS={self.header_seconds} (0..600], "
                              f"SHOAL_BODY_SECONDS={self.body_seconds} (0..3600]")
        if self.report_retention_days < 0:
            raise ConfigError(f"SHOAL_REPORT_RETENTION_DAYS={self.report_retention_days} must be >= 0")
        if self.decode_memory_bytes < 1 << 20:
            raise ConfigError(f"SHOAL_DECODE_MEMORY_BYTES={self.decode_memory_bytes} is below 1 MiB")
        if self.shuffler_url and not self.shuffler_url.startswith(("http://", "https://")):
            raise ConfigError(f"SHOAL_SHUFFLER_URL must be an http(s) URL, got {self.shuffler_url!r}")
        if self.dask_scheduler:
            try:
                check_scheduler(self.dask_scheduler)
            except ConfigError as exc:
                raise ConfigError(f"SHOAL_DASK_SCHEDULER: {exc}") from None
        if not 0 <= self.dask_deadline_seconds <= 7 * 86400:
            raise ConfigError(f"SHOAL_DASK_DEADLINE_SECONDS={self.dask_deadline_seconds} is outside 0..604800 "
                              "(0: from the round's size)")
        if self.device_origins != parse_origins(",".join(self.device_origins)):
            raise ConfigError(f"device_origins must be parsed origins (parse_origins), got {self.device_origins!r}")
        if self.id_set_budget < 1:
            raise ConfigError(f"SHOAL_ID_SET_BUDGET={self.id_set_budget} must be >= 1")
        if self.max_batch < 1 or self.max_body_bytes < 1024:
            raise ConfigError(f"bad limits: max_batch={self.max_batch}, max_body_bytes={self.max_body_bytes}")


class ServerEnvironment(ServiceEnvironment):
    """The server's SHOAL_* variables, typed (pydantic-settings); the module
    docstring says what each means. Cross-field rules live in ``Settings``,
    whose defaults these are (one place for each)."""

    db_url: str = Settings.db_url
    key_path: str = Settings.key_path
    operator_token: str = Settings.operator_token
    shuffler_token: str = Settings.shuffler_token
    max_batch: int = Settings.max_batch
    max_body_bytes: int = Settings.max_body_bytes
    decode_lease_seconds: float = Settings.decode_lease_seconds
    decode_memory_bytes: int = Settings.decode_memory_bytes
    report_retention_days: float = Settings.report_retention_days
    shuffler_url: str = Settings.shuffler_url
    header_seconds: float = Settings.header_seconds
    body_seconds: float = Settings.body_seconds
    dask_scheduler: str = Settings.dask_scheduler
    dask_deadline_seconds: float = Settings.dask_deadline_seconds
    dask_fallback: bool = Settings.dask_fallback
    id_set_budget: int = Settings.id_set_budget


def load_settings(host: str = "127.0.0.1", db_url: str | None = None, dask: str | None = None) -> Settings:
    """The settings from the environment (``ServerEnvironment``), tokens
    generated when unset; a malformed value is a ConfigError naming it."""
    env = read_environment(ServerEnvironment)
    generated = not env.operator_token or not env.shuffler_token
    return Settings(
        db_url=db_url or env.db_url,
        key_path=env.key_path,
        operator_token=env.operator_token or secrets.token_urlsafe(24),
        shuffler_token=env.shuffler_token or secrets.token_urlsafe(24),
        host=host,
        max_batch=env.max_batch,
        max_body_bytes=env.max_body_bytes,
        generated_tokens=generated,
        decode_lease_seconds=env.decode_lease_seconds,
        decode_memory_bytes=env.decode_memory_bytes,
        header_seconds=env.header_seconds,
        report_retention_days=env.report_retention_days,
        body_seconds=env.body_seconds,
        shuffler_url=env.shuffler_url.rstrip("/"),
        dask_scheduler=env.dask_scheduler if dask is None else dask,
        dask_deadline_seconds=env.dask_deadline_seconds,
        dask_fallback=env.dask_fallback,
        device_origins=parse_origins(env.device_origins),
        id_set_budget=env.id_set_budget,
    )
