"""The shuffler answers CORS for SHOAL_DEVICE_ORIGINS on a round's messages
only, with the device token header allowed (``common/services/device_cors.py``)."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from shoal.shuffler.app import ShufflerSettings, create_app

PAGE = "https://app.example"
SETTINGS = {"server_url": "http://127.0.0.1:9", "token": "sh-" + "y" * 20, "enrol_token": "en-" + "z" * 20,
            "server_key": "sha256:" + "ab" * 32}


def test_a_listed_page_may_submit_with_its_device_token(tmp_path: Path) -> None:
    app = create_app(ShufflerSettings(db_path=str(tmp_path / "sh.db"), device_origins=(PAGE,), **SETTINGS))  # type: ignore[arg-type]
    client = TestClient(app)  # no lifespan: the forwarder never starts
    r = client.options("/rounds/r1/messages", headers={"Origin": PAGE, "Access-Control-Request-Method": "POST",
                                                      "Access-Control-Request-Headers": "content-type,x-device-token"})
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == PAGE
    r = client.options("/enrol", headers={"Origin": PAGE, "Access-Control-Request-Method": "POST",
                                          "Access-Control-Request-Headers": "authorization"})
    assert "access-control-allow-origin" not in r.headers
    r = client.options("/rounds/r1/messages", headers={"Origin": "https://evil.example",
                                                      "Access-Control-Request-Method": "POST"})
    assert r.status_code == 400


def test_no_cross_origin_access_by_default(tmp_path: Path) -> None:
    client = TestClient(create_app(ShufflerSettings(db_path=str(tmp_path / "sh.db"), **SETTINGS)))  # type: ignore[arg-type]
    r = client.options("/rounds/r1/messages", headers={"Origin": PAGE, "Access-Control-Request-Method": "POST"})
    assert "access-control-allow-origin" not in r.headers
