"""Issue 13: every user mistake is a 4xx that names the problem, never a 500.
In-process (the HTTP edge and the service); the socket-level keep-alive check
is at the end, against a real server."""

import httpx
import pytest
from fastapi.testclient import TestClient

from shoal.common.errors import ConfigError
from shoal.server.edge.app import create_app
from shoal.server.edge.settings import Settings

OP = "o" * 20
BASE = {"k": 2, "dim": 3, "epsilon": 2.0, "n_expected": 1000}


@pytest.fixture
def client(tmp_path):
    app = create_app(Settings(db_url=f"sqlite:///{tmp_path}/s.db", key_path=f"{tmp_path}/k.pem",
                              operator_token=OP, shuffler_token="s" * 20))
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


def _create(client, **change):
    return client.post("/rounds", json=BASE | change, headers={"Authorization": f"Bearer {OP}"})


@pytest.mark.parametrize(("change", "needle"), [
    ({"epsilon": 1e-300}, "greater than or equal to 0.001"),
    ({"tuning": {"bogus": 1}}, "tuning.bogus: unknown key"),
    ({"encoder": "sketch", "tuning": {"m": 5}}, "tuning.m: unknown key"),
    ({"tuning": {"levels": 3.5}}, "tuning.levels: Input should be a valid integer"),
    ({"tuning": {"levels": "3"}}, "tuning.levels: Input should be a valid integer"),
    ({"tuning": {"levels": 41}}, "tuning.levels: Input should be less than or equal to 40"),
    ({"tuning": {"root_share": 0}}, "tuning.root_share: Input should be greater than 0"),
    ({"tuning": {"hist_only_share": 1}}, "tuning.hist_only_share: Input should be less than 1"),
    ({"tuning": {"hist_only_share": 0.5, "vec_share": 0.5}}, "give one of them"),
    ({"tuning": {"tree": {"b": 1}}}, "tuning.tree.b: unknown key"),
    ({"tuning": {"tree": {"a": 1.5}}}, "tuning.tree.a: Input should be a valid integer"),
    ({"tuning": {"amplification_bound": "magic"}}, "tuning.amplification_bound"),
    ({"encoder": "sketch", "tuning": {"restarts": 0}}, "tuning.restarts"),
    ({"model": "central"}, "a central round needs delta"),
    ({"model": "central", "delta": 1e-6, "min_batch": 100}, "takes an algorithm instead of encoder and min_batch"),
    ({"model": "central", "delta": 1e-6, "encoder": "lsh"}, "takes an algorithm instead of encoder"),
    ({"algorithm": "maxcover-000"}, "algorithm applies to central rounds only"),
    ({"model": "central", "delta": 1e-6, "algorithm": "lloyd"}, "algorithm"),
    ({"model": "central", "delta": 1e-6, "tuning": {"levels": 3}}, "tuning.levels: unknown key"),
    ({"model": "central", "delta": 1e-6, "tuning": {"lift_steps": 9}}, "tuning.lift_steps"),
    ({"model": "central", "delta": 1e-6, "tuning": {"records_per_device": 65}}, "tuning.records_per_device"),
    ({"encoder": "partition", "model": "shuffle", "delta": 1e-6, "min_batch": 100, "tuning": {"bits": 11}},
     "tuning.bits"),
    ({"encoder": "partition", "model": "shuffle", "delta": 1e-6, "min_batch": 100, "tuning": {"levels": 3}},
     "tuning.levels: unknown key"),
    ({"encoder": "partition", "model": "shuffle", "delta": 1e-6, "min_batch": 100, "tuning": {"center": ["a"]}},
     "tuning.center"),
    ({"encoder": "partition", "model": "shuffle", "delta": 1e-6, "min_batch": 100, "tuning": {"center": []}},
     "tuning.center"),
])
def test_each_invalid_round_parameter_is_a_422_naming_it(client, change, needle):
    r = _create(client, **change)
    assert r.status_code == 422, r.text
    assert needle in r.text


def test_a_round_over_the_decode_memory_budget_is_refused_with_the_memory_it_needs(tmp_path):
    # A decode streams its rows (one chunk at a time): what it needs is the tree's tables, 5.6 GiB here.
    app = create_app(Settings(db_url=f"sqlite:///{tmp_path}/m.db", key_path=f"{tmp_path}/k.pem", operator_token=OP,
                              shuffler_token="s" * 20, decode_memory_bytes=4 << 30))
    with TestClient(app, raise_server_exceptions=False) as client:
        r = _create(client, k=1000, dim=10_000, epsilon=8.0, n_expected=10**6)
    assert r.status_code == 422
    assert "would need about" in r.text and "GiB" in r.text and "SHOAL_DECODE_MEMORY_BYTES" in r.text


def test_a_central_round_is_created_with_its_algorithm_and_the_curators_statement(client):
    r = _create(client, model="central", delta=1e-6, dim=20, algorithm="maxcover-000", tuning={"lift_steps": 2})
    assert r.status_code == 201, r.text
    spec = r.json()["config"]["spec"]
    assert spec["algorithm"] == "maxcover-000" and spec["lift_steps"] == 2


def test_a_partition_round_needs_the_shuffle_model_and_is_created_with_its_buckets(client):
    r = _create(client, encoder="partition")
    assert r.status_code in (400, 409, 422) and "partition round sums shares through the shuffler" in r.text
    r = _create(client, encoder="partition", model="shuffle", delta=1e-6, min_batch=100, tuning={"bits": 3})
    assert r.status_code == 201, r.text
    assert r.json()["config"]["kind"] == "partition" and r.json()["config"]["bits"] == 3


def test_tuning_overrides_that_are_valid_are_applied(client):
    r = _create(client, tuning={"levels": 5, "tree": {"a": 3}, "seed": 7})
    assert r.status_code == 201, r.text
    cfg = r.json()["config"]
    assert cfg["levels"] == 5 and cfg["tree"]["a"] == 3 and cfg["seed"] == 7


def test_a_round_config_refuses_a_non_integer_level_count():
    from shoal.common.kinds.tree import RoundConfig, derive_config

    cfg = derive_config(1000, 3, 2, 2.0, seed=1)
    fields = {f: getattr(cfg, f) for f in RoundConfig.__dataclass_fields__}
    with pytest.raises(ConfigError, match="levels must be an integer, got 3.5"):
        RoundConfig(**(fields | {"levels": 3.5}))


@pytest.mark.parametrize("field", ["operator_token", "shuffler_token"])
def test_a_short_token_is_refused_at_start_without_echoing_it(tmp_path, field):
    kw = {"operator_token": OP, "shuffler_token": "s" * 20} | {field: "short-secret"}
    with pytest.raises(ConfigError, match="at least 16") as exc:
        Settings(db_url=f"sqlite:///{tmp_path}/s.db", **kw)
    assert "short-secret" not in str(exc.value)


@pytest.mark.parametrize("host", ["0.0.0.0", "10.0.0.5", "example.org"])
def test_generated_tokens_are_refused_off_loopback(tmp_path, host):
    with pytest.raises(ConfigError, match=f"refusing to serve on {host} with generated tokens"):
        Settings(db_url=f"sqlite:///{tmp_path}/s.db", operator_token=OP, shuffler_token="s" * 20, host=host,
                 generated_tokens=True)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.3.4.5", "::1", "localhost", "LocalHost"])
def test_generated_tokens_serve_on_loopback(tmp_path, host):
    assert Settings(db_url=f"sqlite:///{tmp_path}/s.db", operator_token=OP, shuffler_token="s" * 20, host=host,
                    generated_tokens=True).host == host


def test_the_connection_stays_usable_after_user_mistakes(server):
    with httpx.Client(base_url=server.url) as c:
        for _ in range(20):
            assert c.post("/rounds", json=BASE | {"tuning": {"bogus": 1}}, headers=server.op_headers()).status_code == 422
            assert c.post("/rounds/nope/reports", json={"round_id": "nope"}).status_code == 422
            assert c.get("/rounds/nope").status_code == 404
            assert c.get("/healthz").status_code == 200


def test_a_round_without_an_encoder_gets_the_one_auto_chooses(client):
    plane = _create(client, dim=2, n_expected=100_000)
    assert plane.status_code == 201, plane.text
    assert plane.json()["config"]["encoder"] == "nettree"
    space = _create(client, dim=7, n_expected=100_000)
    assert space.json()["config"]["encoder"] == "lsh"


def test_auto_in_the_shuffle_model_stays_a_tree_round_with_its_local_guarantee(client):
    """Even where a partition round would answer better (letter-sized rounds, kinds.refine.first_round),
    the server's auto keeps the tree: a partition round has no local guarantee, and devices that did
    not consent to that would refuse it. The operator names a partition round."""
    shuffle = {"model": "shuffle", "delta": 1e-6, "epsilon": 1.0}
    letter = _create(client, k=26, dim=16, n_expected=20_000, min_batch=20_000, **shuffle)
    assert letter.status_code == 201, letter.text
    assert letter.json()["config"]["kind"] == "tree" and letter.json()["config"]["epsilon"] > 1.0  # eps0
    named = _create(client, k=26, dim=16, n_expected=20_000, min_batch=20_000, encoder="partition", **shuffle)
    assert named.status_code == 201, named.text
    assert named.json()["config"]["kind"] == "partition"
    assert named.json()["config"]["secure_sum"]["max_devices"] == 40_000  # 2 x n_expected


def test_flush_through_a_server_that_knows_no_shuffler_says_how_to_configure_it(client):
    op = {"Authorization": f"Bearer {OP}"}
    rid = _create(client).json()["id"]
    r = client.post(f"/rounds/{rid}/flush", headers=op)
    assert r.status_code == 409 and "SHOAL_SHUFFLER_URL" in r.json()["detail"]
    assert client.get(f"/rounds/{rid}/pending", headers=op).status_code == 409


def test_pending_of_an_unknown_round_is_404_and_needs_the_operator(client):
    assert client.get("/rounds/nope/pending", headers={"Authorization": f"Bearer {OP}"}).status_code == 404
    assert client.post("/rounds/nope/flush").status_code == 401


def test_a_shuffler_url_that_is_not_http_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="SHOAL_SHUFFLER_URL must be an http"):
        Settings(db_url=f"sqlite:///{tmp_path}/s.db", operator_token=OP, shuffler_token="s" * 20,
                 shuffler_url="ftp://x")


@pytest.mark.parametrize("budget", [0, -1])
def test_an_id_set_budget_below_one_is_refused(tmp_path, budget):
    with pytest.raises(ConfigError, match=f"SHOAL_ID_SET_BUDGET={budget} must be >= 1"):
        Settings(db_url=f"sqlite:///{tmp_path}/s.db", operator_token=OP, shuffler_token="s" * 20,
                 id_set_budget=budget)


def test_the_id_set_budget_reaches_the_sqlite_store_from_the_environment(tmp_path, monkeypatch):
    from shoal.server.edge.settings import load_settings

    monkeypatch.setenv("SHOAL_ID_SET_BUDGET", "1234")
    settings = load_settings(db_url=f"sqlite:///{tmp_path}/s.db")
    app = create_app(Settings(**{**settings.__dict__, "key_path": f"{tmp_path}/k.pem"}))
    assert settings.id_set_budget == 1234
    assert app.state.service.store._ids.budget == 1234


def test_a_tree_round_takes_its_hist_only_share_from_the_tuning(client):
    r = _create(client, tuning={"hist_only_share": 0.0})
    assert r.status_code == 201, r.text
    assert r.json()["config"]["hist_only_share"] == 0.0
    assert _create(client).json()["config"]["hist_only_share"] > 0  # a local round's default: one report per device
