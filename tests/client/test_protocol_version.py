"""Protocol versions (issue 45, Build 2): every published config and message
carries one; a device refuses a config of a version it does not speak (or one
published before versions existed), naming both; the server says which it
accepts and answers 422 naming the version of a message it does not speak."""

import httpx
import pytest
from pydantic import ValidationError

from shoal.client.device import Device
from shoal.common.errors import ConfigError
from shoal.common.kinds import check_protocol, dump_config, parse_config
from shoal.common.kinds.tree import derive_config
from shoal.common.randomness.public_stream import PROTOCOL_VERSION, PROTOCOLS
from shoal.common.wire.fields import new_message_id
from shoal.common.wire.models import CodebookMessage, DeviceMessage


def _published() -> dict:
    return dump_config("tree", derive_config(1000, 3, 2, 2.0, seed=1))


def test_a_published_config_carries_the_version_and_parses_back():
    data = _published()
    assert data["protocol"] == PROTOCOL_VERSION == 2 and check_protocol(data) == 2
    assert parse_config(data) == derive_config(1000, 3, 2, 2.0, seed=1)


@pytest.mark.parametrize("version,needle", [
    (None, "no protocol version: it was published before protocol 1"),
    (0, "this round speaks protocol 0; this build speaks protocol 2"),
    (1, "this round speaks protocol 1; this build speaks protocol 2"),
    (3, "this round speaks protocol 3; this build speaks protocol 2"),
    ("1", "this round speaks protocol '1'"),
])
def test_a_config_of_another_version_is_refused_naming_both(version, needle):
    data = _published()
    if version is None:
        del data["protocol"]
    else:
        data["protocol"] = version
    with pytest.raises(ConfigError, match=needle):
        parse_config(data)


def test_messages_carry_the_version_and_refuse_another():
    m = CodebookMessage(round_id="r", message_id=new_message_id(), nonce="0" * 16, index=3)
    assert '"protocol":2' in m.model_dump_json()
    with pytest.raises(ValidationError, match="protocol version 0 is not spoken here: this server accepts protocol 2"):
        DeviceMessage.model_validate({"round_id": "r", "message_id": new_message_id(), "protocol": 0})


def _round(server) -> dict:
    return httpx.post(server.url + "/rounds", json={"k": 2, "dim": 3, "epsilon": 2.0, "n_expected": 1000},
                      headers=server.op_headers()).json()


def test_the_server_states_its_versions_and_answers_422_naming_another(server):
    assert httpx.get(server.url + "/protocol").json() == {"protocols": list(PROTOCOLS), "current": PROTOCOL_VERSION}
    rnd = _round(server)
    assert rnd["config"]["protocol"] == PROTOCOL_VERSION
    body = {"round_id": rnd["id"], "message_id": new_message_id(), "protocol": 7}
    r = httpx.post(server.url + f"/rounds/{rnd['id']}/reports", json=body)
    assert r.status_code == 422 and "protocol version 7 is not spoken here" in r.text
    r = httpx.post(server.url + f"/rounds/{rnd['id']}/reports/binary", content=b"SHB\x02\x00" + bytes(38),
                   headers={"content-type": "application/octet-stream"})
    assert r.status_code == 422 and "protocol 0" in r.text


def test_a_device_refuses_a_round_of_another_version(server, tmp_path, monkeypatch):
    rnd = _round(server)
    dev = Device(server.url, tmp_path / "ledger.json", cap=5.0)
    real = dev._request

    def older(method, path, **kw):
        r = real(method, path, **kw)
        if path.endswith("/config"):
            body = r.json()
            body["config"]["protocol"] = 0
            return httpx.Response(200, json=body)
        return r

    monkeypatch.setattr(dev, "_request", older)
    with pytest.raises(ConfigError, match="this round speaks protocol 0; this build speaks protocol 2"):
        dev.participate(rnd["id"], [0.1, 0.2, 0.3])
    assert dev.ledger.spent == 0
