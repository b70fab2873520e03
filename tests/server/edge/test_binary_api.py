"""Binary report batches over a real socket (issue 19, Build 4): stored and
decoded like JSON reports, validated like them, refused with the reason."""

import httpx
import numpy as np

from shoal.client.encoder import encode_arrays
from shoal.common.kinds.tree import config_from_dict
from shoal.common.wire.binary import CONTENT_TYPE, decode_reports, encode_reports
from shoal.deploy.simulation.datasets import paper_mixture

BIN = {"content-type": CONTENT_TYPE}


def _round(server, n=6000, **extra):
    body = {"k": 3, "dim": 4, "epsilon": 8.0, "n_expected": n, "encoder": "lsh", **extra}
    rnd = httpx.post(server.url + "/rounds", json=body, headers=server.op_headers()).json()
    return rnd["id"], config_from_dict(rnd["config"])


def test_a_binary_batch_is_stored_once_and_decoded_like_json(server):
    rid, cfg = _round(server)
    ds = paper_mixture(6000, d=4, k=3, seed=1)
    batch = encode_arrays(ds.points, cfg)
    bodies = [encode_reports(batch.select(slice(i, i + 2000))) for i in range(0, 6000, 2000)]
    for body in bodies:
        r = httpx.post(server.url + f"/rounds/{rid}/reports/binary", content=body, headers=BIN)
        assert r.status_code == 202 and r.json() == {"accepted": 2000, "duplicates": 0}, r.text
    r = httpx.post(server.url + f"/rounds/{rid}/reports/binary", content=bodies[0], headers=BIN)
    assert r.json() == {"accepted": 0, "duplicates": 2000}  # a retried batch is not counted twice
    assert httpx.get(server.url + f"/rounds/{rid}").json()["reports"] == 6000
    r = httpx.post(server.url + f"/rounds/{rid}/cluster", headers=server.op_headers(), timeout=120)
    assert r.status_code == 200 and r.json()["diagnostics"]["n_devices"] == 6000


def test_an_invalid_row_refuses_the_whole_batch_with_the_reason(server):
    rid, cfg = _round(server)
    batch = encode_arrays(paper_mixture(100, d=4, k=3, seed=2).points, cfg)
    ids, _ = decode_reports(encode_reports(batch), rid)
    bad = batch.select(np.arange(100))
    bad.hist_bucket[np.flatnonzero(bad.hist_level >= 0)[0]] = cfg.hist_buckets  # one bucket out of range
    r = httpx.post(server.url + f"/rounds/{rid}/reports/binary", content=encode_reports(bad, ids), headers=BIN)
    assert r.status_code == 422 and "histogram bucket outside" in r.text
    assert httpx.get(server.url + f"/rounds/{rid}").json()["reports"] == 0


def test_binary_batches_need_their_content_type_and_a_header(server):
    rid, cfg = _round(server)
    body = encode_reports(encode_arrays(paper_mixture(10, d=4, k=3, seed=3).points, cfg))
    r = httpx.post(server.url + f"/rounds/{rid}/reports/binary", content=body,
                   headers={"content-type": "application/json"})
    assert r.status_code == 415 and CONTENT_TYPE in r.text
    r = httpx.post(server.url + f"/rounds/{rid}/reports/binary", content=b"not a batch", headers=BIN)
    assert r.status_code == 422 and "must start with" in r.text


def test_a_binary_batch_over_the_servers_batch_limit_is_a_413(server):
    rid, cfg = _round(server)
    batch = encode_arrays(paper_mixture(5001, d=4, k=3, seed=4).points, cfg)  # the fixture's SHOAL_MAX_BATCH is 5000
    r = httpx.post(server.url + f"/rounds/{rid}/reports/binary", content=encode_reports(batch), headers=BIN)
    assert r.status_code == 413 and "exceeds 5000" in r.text
    assert httpx.get(server.url + f"/rounds/{rid}").json()["reports"] == 0


def test_rounds_of_other_kinds_say_to_post_json(server):
    body = {"k": 3, "dim": 4, "epsilon": 4.0, "n_expected": 1000, "encoder": "sketch"}
    rid = httpx.post(server.url + "/rounds", json=body, headers=server.op_headers()).json()["id"]
    r = httpx.post(server.url + f"/rounds/{rid}/reports/binary", content=b"SHB\x01" + bytes(38), headers=BIN)
    assert r.status_code == 409 and "post its reports as JSON" in r.text
