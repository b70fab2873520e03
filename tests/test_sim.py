"""``shoal sim`` end to end over real sockets: direct and via the shuffler."""

import json

from shoal.client.cli import main


def test_sim_direct_and_via_shuffler(capsys):
    for extra in ([], ["--via-shuffler", "--min-batch", "50"]):
        assert main(["sim", "--users", "600", "--dataset", "city", "--eps", "8", "--json", *extra]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["failed"] == 0
        assert out["received"] >= 550
        assert out["normalized_objective"] < 0.5 * out["trivial_objective"]
        assert {"reports_per_second", "nonprivate_objective", "centers"} <= set(out)
