"""The device writes its messages without pydantic, and the server reads them
with its models (issue 45, Build 5): tree JSON and its binary record, the
local sketch's binary form, and the JSON of every other kind's report."""

import json

import numpy as np
import pytest

from shoal.client.device import wire_body
from shoal.client.encoder import encode_arrays, tree_json
from shoal.client.kinds import device_kind
from shoal.client.participation import Participation
from shoal.client.sketch_encoder import sketch_body
from shoal.common.bounds import PublicBound
from shoal.common.errors import ReportError
from shoal.common.kinds.sketch import derive_sketch_round
from shoal.common.kinds.tree import derive_config
from shoal.common.wire.binary import (
    decode_reports,
    decode_sketch,
    messages_to_binary,
    recorded_binary,
    sketch_message,
)
from shoal.common.wire.models import DeviceMessage, SketchMessage, sketch_rows


def test_tree_json_is_the_models_json_and_converts_to_the_same_binary_record():
    cfg = derive_config(100_000, 10, 4, 1.0, seed=5)
    batch = encode_arrays(np.random.default_rng(0).uniform(-0.5, 0.5, (50, 10)), cfg, np.random.default_rng(1))
    for i in range(len(batch)):
        text = tree_json(batch, i)
        parsed = DeviceMessage.model_validate_json(text)
        assert json.loads(parsed.model_dump_json()) == json.loads(text)
        body, where = wire_body(text)
        assert where == "binary" and body == messages_to_binary([parsed])
        ids, back = decode_reports(body, cfg.round_id)
        assert ids == [parsed.message_id] and int(back.vec_index[0]) == int(batch.vec_index[i])
        assert wire_body(text, binary=False) == (text.encode(), "json")


def _sketch_config(eps: float = 1.0):
    return derive_sketch_round(10_000, 5, 3, eps, bound=PublicBound(radius=1.0), seed=7, round_id="s")


def test_a_local_sketch_travels_as_its_grid_integers_and_reads_back_as_the_same_report():
    cfg = _sketch_config()
    body = sketch_body(np.random.default_rng(0).uniform(-0.3, 0.3, (3, 5)), cfg, np.random.default_rng(1))
    m = cfg.sketch.size
    assert len(body) <= 1.2 * (8 * m + 16)  # m complex float32 values and a message id
    message = sketch_message(body, "s")
    assert message.n0 == 3 and len(message.sketch) == 2 * m
    rows = sketch_rows([message], cfg.sketch)  # the server's checks: length and the grid of n0
    assert rows.shape == (1, 2 * m + 1)
    # Sent as JSON instead (Device(binary=False)): the same values and message id.
    recorded = recorded_binary(body)
    sent, where = wire_body(recorded, binary=True, round_id="s")
    assert (sent, where) == (body, "binary")
    text, where = wire_body(recorded, binary=False, round_id="s")
    assert where == "json"
    assert SketchMessage.model_validate_json(text) == message


def test_a_binary_sketch_off_its_grid_or_truncated_is_refused():
    cfg = _sketch_config()
    body = sketch_body(np.zeros((1, 5)), cfg, np.random.default_rng(1))
    with pytest.raises(ReportError):
        sketch_message(body[:20], "s")
    with pytest.raises(ReportError):
        sketch_message(body[:-1], "s")
    fields = decode_sketch(body)
    off = bytearray(body)
    off[21 + 4] -= 1  # the grid exponent, one lower: values no longer on the round's grid for n0 = 1
    bad = sketch_message(bytes(off), "s")
    assert bad.n0 == fields["n0"]
    with pytest.raises(ReportError):
        sketch_rows([bad], cfg.sketch)


@pytest.mark.parametrize("label", ["local refine", "central sealed point", "continual", "sketch local"])
def test_every_kinds_device_message_is_read_by_the_servers_model(label):
    from shoal.deploy.bench.device import _cases
    from shoal.server.rounds.kinds import server_kind

    case = next(c for c in _cases() if c[0] == label)
    _, name, model, config = case
    part = Participation(config.round_id, b"\1" * 32, "0" * 64, "http://127.0.0.1:1", True, True)
    _, make = device_kind(name).plan(part, config, np.full(config.dim, 0.1))
    built = make()
    message = built[0] if isinstance(built, tuple) else built
    if model == "local":
        body, where = wire_body(message, binary=False, round_id=config.round_id)
        parsed = server_kind(name).direct_model(config).model_validate_json(body)
        server_kind(name).rows(config, [parsed])
    else:
        assert json.loads(message)["sealed"]
