"""FastAPI dependencies: the service and bearer-token checks (``Annotated``)."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, Header, HTTPException, Request

from shoal.server.service import RoundService


def get_service(request: Request) -> RoundService:
    service: RoundService = request.app.state.service
    return service


Service = Annotated[RoundService, Depends(get_service)]


def _check(token: str, authorization: str | None) -> None:
    if not authorization or not authorization.startswith("Bearer "):
        raise HTTPException(status_code=401, detail="missing bearer token", headers={"WWW-Authenticate": "Bearer"})
    if not secrets.compare_digest(authorization[7:].encode(), token.encode()):
        raise HTTPException(status_code=403, detail="wrong token for this endpoint")


def require_operator(service: Service, authorization: Annotated[str | None, Header()] = None) -> None:
    _check(service.settings.operator_token, authorization)


def require_shuffler(service: Service, authorization: Annotated[str | None, Header()] = None) -> None:
    _check(service.settings.shuffler_token, authorization)


Operator = Annotated[None, Depends(require_operator)]
Shuffler = Annotated[None, Depends(require_shuffler)]
