"""FastAPI dependencies: the service and bearer-token checks (``Annotated``).

They are ``async`` because they never block: a sync dependency would cost
every request a hop to the thread pool (measured: a third of the server's
time under single-message load).
"""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

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


# FastAPI's HTTPBearer gives the OpenAPI spec its two security schemes (so
# Swagger's "Authorize" works); the checks and their messages stay ours.
OPERATOR_SCHEME = HTTPBearer(scheme_name="operator", auto_error=False,
                             description="the operator token (SHOAL_OPERATOR_TOKEN)")
SHUFFLER_SCHEME = HTTPBearer(scheme_name="shuffler", auto_error=False,
                             description="the shuffler's token (SHOAL_SHUFFLER_TOKEN)")


def _check(token: str, credentials: HTTPAuthorizationCredentials | None) -> None:
    if credentials is None:
        raise HTTPException(status_code=401, detail="missing bearer token", headers={"WWW-Authenticate": "Bearer"})
    if not secrets.compare_digest(credentials.credentials.encode(), token.encode()):
        raise HTTPException(status_code=403, detail="wrong token for this endpoint")


async def require_operator(settings: ServerSettings,
                           credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(OPERATOR_SCHEME)]) -> None:
    _check(settings.operator_token, credentials)


async def require_shuffler(settings: ServerSettings,
                           credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(SHUFFLER_SCHEME)]) -> None:
    _check(settings.shuffler_token, credentials)


Operator = Annotated[None, Depends(require_operator)]
Shuffler = Annotated[None, Depends(require_shuffler)]
