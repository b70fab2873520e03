"""FastAPI dependencies: the service and bearer-token checks (``Annotated``).

They are ``async`` because they never block: a sync dependency would cost
every request a hop to the thread pool (measured: a third of the server's
time under single-message load).
"""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, Header, HTTPException, Request

from shoal.server.edge.settings import Settings
from shoal.server.rounds.service import RoundService


async def get_service(request: Request) -> RoundService:
    service: RoundService = request.app.state.service
    return service


Service = Annotated[RoundService, Depends(get_service)]


async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


ServerSettings = Annotated[Settings, Depends(get_settings)]


def _check(token: str, authorization: str | None) -> None:
    if not authorization or not authorization.startswith("Bearer "):
        raise HTTPException(status_code=401, detail="missing bearer token", headers={"WWW-Authenticate": "Bearer"})
    if not secrets.compare_digest(authorization[7:].encode(), token.encode()):
        raise HTTPException(status_code=403, detail="wrong token for this endpoint")


async def require_operator(settings: ServerSettings, authorization: Annotated[str | None, Header()] = None) -> None:
    _check(settings.operator_token, authorization)


async def require_shuffler(settings: ServerSettings, authorization: Annotated[str | None, Header()] = None) -> None:
    _check(settings.shuffler_token, authorization)


Operator = Annotated[None, Depends(require_operator)]
Shuffler = Annotated[None, Depends(require_shuffler)]
