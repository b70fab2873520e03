import json
import os
import subprocess
import sys

import numpy as np
import pytest

from shoal.common.cli import main
from shoal.deploy.simulation.datasets import city_locations, paper_mixture
from shoal.deploy.simulation.simulate import simulate


def test_simulate_json_has_exactly_the_documented_keys(tmp_path, capsys):
    path = tmp_path / "x.npy"
    np.save(path, paper_mixture(3000, d=5, k=2, seed=0).points)
    assert main(["simulate", "--data", str(path), "--k", "2", "--eps", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {
        "normalized_objective", "nonprivate_objective", "trivial_objective", "n", "d", "k", "eps",
        "encoder", "encoder_requested", "model", "encode_seconds", "decode_seconds", "peak_rss_mb", "centers", "privacy", "certificate", "quality", "bound", "clipped_fraction",
        "reference",
    }
    assert out["n"] == 3000 and len(out["centers"]) == 2
    assert out["encoder_requested"] == "auto" and out["encoder"] == "lsh"  # d=5: the rule's lsh


def test_simulate_computes_the_reference_only_when_asked_and_then_reuses_it_for_that_file(tmp_path, capsys,
                                                                                          monkeypatch):
    """Issue 42: the reference was two thirds of a run at 1e6 x 100, computed on
    every run. Now --reference computes it and caches it by the file's hash,
    k, seed and bound; a plain run reports a cached one, else none."""
    from shoal.deploy.simulation.evaluation import nonprivate_objective

    monkeypatch.setenv("SHOAL_CACHE_DIR", str(tmp_path / "cache"))
    ds = paper_mixture(3000, d=5, k=2, seed=0)
    path = tmp_path / "x.npy"
    np.save(path, ds.points)
    base = ["simulate", "--data", str(path), "--k", "2", "--eps", "4", "--radius", "1", "--json"]

    def run(*extra: str) -> dict:
        assert main(base + list(extra)) == 0
        return json.loads(capsys.readouterr().out)

    plain = run()
    assert plain["nonprivate_objective"] is None and plain["reference"] == "not asked"
    asked = run("--reference")
    assert asked["reference"] == "computed"
    assert asked["nonprivate_objective"] == pytest.approx(nonprivate_objective(ds.points, 2, 0), rel=1e-12)
    again = run()
    assert again["reference"] == "cached" and again["nonprivate_objective"] == asked["nonprivate_objective"]
    assert run("--reference")["reference"] == "cached"
    other_k = ["simulate", "--data", str(path), "--k", "3", "--eps", "4", "--radius", "1", "--json"]
    assert main(other_k) == 0 and json.loads(capsys.readouterr().out)["reference"] == "not asked"
    np.save(path, ds.points[::-1])  # new content, new stat: the index no longer vouches for the hash
    os.utime(path, ns=(1, 1))
    assert run()["reference"] == "not asked"
    assert run("--reference")["reference"] == "computed"  # reordered rows: other bytes, another hash


@pytest.mark.parametrize("encoder", ["lsh", "nettree"])
def test_simulate_runs_the_shuffle_model_with_a_refine_round_within_the_total_budget(tmp_path, capsys, encoder):
    """Budget on every seed; the objective below a tenth of the trivial one on
    at least 2 of 3 seeds: at n = 2e4 a nettree round loses a cluster on a few
    percent of seeds (measured over 40 seeds: 1/40 at protocol 1, 3/40 at
    protocol 2, the same laws re-drawn; objective ~0.28 x trivial then)."""
    path = tmp_path / "x.npy"
    np.save(path, paper_mixture(20_000, d=10, k=4, seed=1).points)
    good = 0
    for seed in range(3):
        args = ["simulate", "--data", str(path), "--k", "4", "--eps", "1", "--encoder", encoder, "--model",
                "shuffle", "--delta", "1e-6", "--refine", "0.2", "--seed", str(seed), "--json"]
        assert main(args) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["model"] == "shuffle" and out["privacy"]["device_epsilon"] > 1.0  # amplified eps0
        assert out["composed"]["epsilon"] == pytest.approx(1.0) and out["composed"]["delta"] == pytest.approx(1e-6)
        good += out["normalized_objective"] < 0.1 * out["trivial_objective"]
    assert good >= 2


def test_simulate_refine_auto_takes_the_rules_share_within_the_total_budget(tmp_path, capsys):
    from shoal.common.kinds.refine import refine_share

    path = tmp_path / "x.npy"
    np.save(path, paper_mixture(20_000, d=10, k=4, seed=1).points)
    args = ["simulate", "--data", str(path), "--k", "4", "--eps", "1", "--model", "shuffle", "--refine", "auto"]
    assert main(args) == 0
    text = capsys.readouterr().out
    share = refine_share(20_000, 10, 4, 1.0, 1e-6)
    # a partition stage whose sums are all discrete Gaussian (d = 10): the share is of the total's zCDP rho
    assert f"({share:.2g} of the budget's zCDP rho; the rounds compose in zCDP, auto)" in text
    assert "distributed discrete" in text
    assert main(args + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["refine"]["share"] == pytest.approx(share) and out["refine"]["composition"] == "zcdp"
    assert out["refine"]["epsilon"] > share  # its own eps: more than basic composition would leave it
    assert 0.9 < out["composed"]["epsilon"] <= 1.0


def test_simulate_refuses_a_refine_that_is_neither_a_number_nor_auto(tmp_path, capsys):
    path = tmp_path / "x.npy"
    np.save(path, paper_mixture(1000, d=5, k=2, seed=0).points)
    assert main(["simulate", "--data", str(path), "--k", "2", "--eps", "1", "--model", "shuffle", "--refine", "lots"]) == 2
    assert "--refine takes an epsilon or 'auto', got 'lots'" in capsys.readouterr().err


def test_simulate_refuses_shuffle_flags_in_the_local_model(tmp_path, capsys):
    path = tmp_path / "x.npy"
    np.save(path, paper_mixture(1000, d=5, k=2, seed=0).points)
    assert main(["simulate", "--data", str(path), "--k", "2", "--eps", "1", "--delta", "1e-6"]) == 2
    assert "belong to --model shuffle" in capsys.readouterr().err


def test_simulate_local_refine_keeps_a_share_of_fresh_devices_at_the_same_eps(tmp_path, capsys):
    path = tmp_path / "x.npy"
    np.save(path, paper_mixture(40_000, d=5, k=3, seed=2).points)
    args = ["simulate", "--data", str(path), "--k", "3", "--eps", "8", "--encoder", "lsh", "--refine", "0.3"]
    assert main(args) == 0
    assert "12000 fresh devices (0.3 of them) at eps 8" in capsys.readouterr().out
    assert main(args + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["refine"]["mechanism"] == "local" and out["refine"]["devices"] == 12_000
    assert out["privacy"]["model"] == "local" and out["privacy"]["device_epsilon"] == 8.0
    assert out["n"] == 40_000 and out["tree_objective"] < out["trivial_objective"]
    # A Lloyd step from the tree's centers, not worse than them beyond its noise.
    assert out["normalized_objective"] < 1.2 * out["tree_objective"] + 0.01


@pytest.mark.parametrize("value,needle", [("lots", "got 'lots'"), ("1.5", "must be in (0, 1), got 1.5")])
def test_simulate_refuses_a_local_refine_share_outside_0_1(tmp_path, capsys, value, needle):
    path = tmp_path / "x.npy"
    np.save(path, paper_mixture(1000, d=5, k=2, seed=0).points)
    assert main(["simulate", "--data", str(path), "--k", "2", "--eps", "1", "--refine", value]) == 2
    assert needle in capsys.readouterr().err


def test_bench_smoke_writes_table_json_and_plots(tmp_path, capsys):
    rc = main(["bench", "--smoke", "--out", str(tmp_path), "--data-dir", str(tmp_path / "none")])
    assert rc == 0
    assert (tmp_path / "results.md").exists()
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["rows"] and data["oracle"]
    assert (tmp_path / "objective_vs_n.png").exists()
    assert {r["encoder"] for r in data["rows"]} == {"lsh", "nettree", "auto"}
    assert "## auto against the better encoder" in (tmp_path / "results.md").read_text()
    assert "skipped" in capsys.readouterr().out


def test_perf_smoke_reports_how_it_was_run(tmp_path, capsys):
    assert main(["bench", "--perf", "--smoke", "--out", str(tmp_path)]) == 0
    line = (tmp_path / "perf.txt").read_text()
    assert "n=2000 d=100 k=8 eps=4" in line and "peak RSS" in line


def test_decode_memory_smoke_compares_both_reads_and_says_how_it_ran(tmp_path, capsys):
    assert main(["bench", "--decode-memory", "--smoke", "--out", str(tmp_path)]) == 0
    line = capsys.readouterr().out
    assert "n=20000 d=100 k=8" in line and "whole-round read" in line and "chunked snapshot read" in line
    runs = json.loads((tmp_path / "decode_memory.json").read_text())["runs"]
    assert [r["chunked"] for r in runs] == [False, True, False, True]
    assert all(r["devices"] == 20000 for r in runs)


def test_scale_smoke_decodes_in_process_and_on_one_and_two_dask_workers(tmp_path, capsys):
    pytest.importorskip("distributed", reason="the 'scale' extra is not installed")
    assert main(["bench", "--scale", "--smoke", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "n=2e+04 d=10" in out and "k=8, eps=4" in out and "cores" in out
    data = json.loads((tmp_path / "scale.json").read_text())
    (row,) = data["rows"]
    assert [d["workers"] for d in row["decodes"]] == [0, 1, 2]
    assert all(d["centers"] == 8 and d["peak_rss_mb"] > 0 for d in row["decodes"])
    assert len(row["decodes"][2]["worker_peak_rss_mb"]) == 2
    assert "| 2e+04 | 10 |" in (tmp_path / "scale.md").read_text()


def test_capacity_smoke_measures_sqlite_and_postgres_replicas(tmp_path, capsys):
    assert main(["bench", "--capacity", "--smoke", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| SQLite | 1 |" in out
    row = json.loads((tmp_path / "capacity.json").read_text())["rows"][0] if (tmp_path / "capacity.json").exists() else None
    sqlite_line = next(line for line in out.splitlines() if line.startswith("| SQLite | 1 |"))
    floor, ratio = (float(c.replace(",", "")) for c in sqlite_line.split("|")[5:7])
    assert floor > 0 and ratio > 0  # the append floor, measured in the same run, and the server's rate over it
    assert row is None or "append_floor_reports_per_second" in row
    if "PostgreSQL" in out:
        assert "| PostgreSQL | 2 |" in out


def test_services_smoke_stores_every_acknowledged_report_of_every_load(tmp_path, capsys):
    """The benchmark fails (exit 1) if a load's 2xx reports are not all in the
    store, or if more are stored than were sent (its own check)."""
    assert main(["bench", "--services", "--smoke", "--out", str(tmp_path), "--data-dir", str(tmp_path / "none")]) == 0
    out = capsys.readouterr().out
    for connections in (4, 16):
        assert f"Binary against JSON batches, 20,000 reports at {connections} connections, in this run:" in out
    assert "| `sim_shuffler` | 1000 |" in out


def test_shuffle_bench_smoke_compares_the_three_variants(tmp_path, capsys):
    assert main(["bench", "--model", "shuffle", "--smoke", "--out", str(tmp_path), "--data-dir", str(tmp_path / "none")]) == 0
    out = capsys.readouterr().out
    assert "delta=1e-06" in out and "machine:" in out
    for variant in ("local ", "shuffle ", "shuffle+refine ", "central "):
        assert variant in out
    assert "refine gets kinds.refine.refine_share's rule" in out


def test_shuffle_bench_runs_each_draw_with_its_own_seed_on_the_same_data(tmp_path, capsys):
    assert main(["bench", "--model", "shuffle", "--smoke", "--draws", "2", "--sets", "paper", "--out", str(tmp_path),
                 "--data-dir", str(tmp_path / "none")]) == 0
    out = capsys.readouterr().out
    runs = [line for line in out.splitlines() if line.startswith("  seed ")]
    assert "seeds 0 x 2 draw(s)" in out and any(line.startswith("  seed 0 draw 1 paper") for line in runs)
    assert not [line for line in runs if "overlap" in line]  # left out by --sets


@pytest.mark.parametrize("flag, value, needle", [("--draws", "0", "--draws must be >= 1, got 0"),
                                                 ("--sets", "paper,moons", "--sets: unknown moons; known: paper, overlap")])
def test_shuffle_bench_refuses_a_bad_draws_or_sets(tmp_path, capsys, flag, value, needle):
    assert main(["bench", "--model", "shuffle", "--smoke", flag, value, "--out", str(tmp_path)]) == 2
    assert needle in capsys.readouterr().err


@pytest.mark.parametrize("flag, value, needle", [("--draws", "0", "--draws must be >= 1, got 0"),
                                                 ("--sets", "moons", "--sets: unknown moons; known: paper, balcan")])
def test_central_bench_refuses_a_bad_draws_or_sets(tmp_path, capsys, flag, value, needle):
    assert main(["bench", "--model", "central", "--smoke", flag, value, "--out", str(tmp_path)]) == 2
    assert needle in capsys.readouterr().err


def test_central_bench_smoke_runs_shoal_and_says_which_baseline_it_skipped(tmp_path, capsys):
    out_dir = tmp_path / "out"
    assert main(["bench", "--model", "central", "--smoke", "--out", str(out_dir), "--data-dir", str(tmp_path / "none"),
                 "--google-path", str(tmp_path / "no-checkout")]) == 0
    out = capsys.readouterr().out
    assert "google skipped: cannot import Google's clustering" in out and "machine:" in out
    for method in ("shoal ", "shoal-000 ", "shoal-003 "):
        assert method in out
    table = (out_dir / "central.md").read_text()
    assert "| paper | 3000 | 100 | 8 | 1 |" in table and (out_dir / "central.png").exists()


def test_central_bench_draws_are_runs_of_their_own_on_one_seeds_data(tmp_path, capsys):
    out_dir = tmp_path / "out"
    assert main(["bench", "--model", "central", "--smoke", "--draws", "2", "--sets", "paper", "--out", str(out_dir),
                 "--data-dir", str(tmp_path / "none")]) == 0
    rows = json.loads((out_dir / "central.json").read_text())["rows"]
    shoal = [r for r in rows if r["method"] == "shoal"]
    assert [(r["seed"], r["draw"], r["run_seed"]) for r in shoal] == [(0, 0, 0), (0, 1, 1000)]
    assert {r["dataset"] for r in rows} == {"paper"}  # balcan left out by --sets
    lo, hi = sorted(r["normalized_objective"] for r in shoal)
    table = (out_dir / "central.md").read_text()
    assert f"| {lo:.4g}-{hi:.4g} |" in table
    header, separator = [line for line in table.splitlines() if line.startswith("|")][:2]
    assert header.count("|") == separator.count("|")  # a separator short of a column breaks the table


def test_shuffle_bench_takes_the_refine_share_and_refuses_one_outside_0_1(tmp_path, capsys):
    none = str(tmp_path / "none")
    assert main(["bench", "--model", "shuffle", "--smoke", "--refine-share", "0.6", "--out", str(tmp_path), "--data-dir", none]) == 0
    assert "refine gets 0.6 of eps" in capsys.readouterr().out
    assert main(["bench", "--model", "shuffle", "--smoke", "--refine-share", "1", "--out", str(tmp_path), "--data-dir", none]) == 2
    assert "--refine-share must be in (0, 1), got 1.0" in capsys.readouterr().err


def test_sketch_bench_smoke_runs_every_variant(tmp_path, capsys):
    assert main(["bench", "--encoder", "sketch", "--smoke", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "machine:" in out and "m = 10 k d" in out
    for variant in ("non-private shoal", "local L=1 ", "local L=100 ", "local L=3000 ", "shuffle (secure sum)"):
        assert variant in out
    rel = {line.split()[1] + line.split()[2]: float(line.split("rel_SSE=")[1].split()[0])
           for line in out.splitlines() if "rel_SSE=" in line}
    assert rel["localL=1"] < rel["localL=3000"]  # one curator-sized device beats 3000 one-record devices


@pytest.mark.parametrize(("env", "needle"), [
    ({"SHOAL_MAX_BATCH": "lots"}, "SHOAL_MAX_BATCH='lots': Input should be a valid integer"),
    ({"SHOAL_BODY_SECONDS": "soon"}, "SHOAL_BODY_SECONDS='soon': Input should be a valid number"),
    ({"SHOAL_OPERATOR_TOKEN": "short-secret"}, "SHOAL_OPERATOR_TOKEN is too short"),
])
def test_the_server_refuses_a_bad_setting_in_one_line(tmp_path, env, needle):
    base = dict(os.environ, SHOAL_OPERATOR_TOKEN="op-" + "x" * 20, SHOAL_SHUFFLER_TOKEN="sh-" + "y" * 20,
                SHOAL_KEY_PATH=str(tmp_path / "key.pem"))
    out = subprocess.run([sys.executable, "-m", "shoal.common.cli", "server", "--port", "0", "--db",
                          f"sqlite:///{tmp_path / 's.db'}"], env=base | env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2
    assert needle in out.stderr and "Traceback" not in out.stderr
    assert "short-secret" not in out.stderr


def test_simulate_with_auto_is_the_run_of_the_encoder_it_chose():
    ds = city_locations(5000, seed=2)
    auto = simulate(ds.points, ds.k, 4.0, "auto", bound=ds.bound, seed=1, nonprivate=1.0)
    chosen = simulate(ds.points, ds.k, 4.0, "nettree", bound=ds.bound, seed=1, nonprivate=1.0)
    assert (auto["encoder"], auto["encoder_requested"]) == ("nettree", "auto")
    assert auto["ball_centers"] == chosen["ball_centers"]


def test_simulate_into_a_closed_pipe_ends_without_a_traceback(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, paper_mixture(2000, d=5, k=2, seed=0).points)
    shoal = os.path.join(os.path.dirname(sys.executable), "shoal")
    # The reader closes its end before the simulation prints anything (as `| head` does once satisfied).
    proc = subprocess.Popen([shoal, "simulate", "--data", str(path), "--k", "2", "--eps", "4"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=300) == 141, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_simulate_says_which_encoder_auto_chose(tmp_path, capsys):
    path = tmp_path / "x.npy"
    np.save(path, paper_mixture(2000, d=5, k=2, seed=0).points)
    assert main(["simulate", "--data", str(path), "--k", "2", "--eps", "4"]) == 0
    assert "encoder=lsh (auto) model=local" in capsys.readouterr().out


def test_a_missing_data_file_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["simulate", "--data", str(tmp_path / "nope.npy"), "--k", "2", "--eps", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("shoal simulate: no such data file:") and "Traceback" not in err


def test_a_file_that_is_not_an_array_is_one_line_and_exit_2(tmp_path, capsys):
    path = tmp_path / "x.npy"
    path.write_text("lat,lon\n1,2\n")
    assert main(["simulate", "--data", str(path), "--k", "2", "--eps", "1"]) == 2
    assert "is not a readable .npy array" in capsys.readouterr().err


def test_a_zero_epsilon_names_epsilon(tmp_path, capsys):
    path = tmp_path / "x.npy"
    np.save(path, paper_mixture(1000, d=5, k=2, seed=0).points)
    assert main(["simulate", "--data", str(path), "--k", "2", "--eps", "0"]) == 2
    assert "epsilon must be finite and > 0, got 0.0" in capsys.readouterr().err


def test_sim_names_the_datasets_it_knows(capsys):
    assert main(["sim", "--dataset", "cty", "--users", "10"]) == 2
    assert "unknown dataset 'cty': city | gauss | uber | letter | FILE.npy" in capsys.readouterr().err


def test_sim_says_where_a_real_dataset_was_looked_for(tmp_path, capsys):
    assert main(["sim", "--dataset", "uber", "--users", "10", "--data-dir", str(tmp_path)]) == 2
    assert "point --data-dir at the folder" in capsys.readouterr().err


def test_simulate_takes_a_box_and_the_result_carries_it(tmp_path, capsys):
    path = tmp_path / "x.npy"
    np.save(path, city_locations(3000, seed=0).points)
    assert main(["simulate", "--data", str(path), "--k", "3", "--eps", "4", "--box", "0,0:100,100", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["bound"] == {"radius": None, "low": [0.0, 0.0], "high": [100.0, 100.0]}
    assert out["clipped_fraction"] == 0.0
    assert all(0 <= v <= 100 for c in out["centers"] for v in c)


def test_simulate_without_a_bound_says_which_it_used_and_what_it_clipped(tmp_path, capsys):
    path = tmp_path / "x.npy"
    np.save(path, city_locations(3000, seed=0).points)
    assert main(["simulate", "--data", str(path), "--k", "3", "--eps", "4", "--json"]) == 0
    captured = capsys.readouterr()
    assert "no --radius or --box given: using radius 1, which clips 100.0% of the points" in captured.err
    assert json.loads(captured.out)["bound"]["radius"] == 1.0


def test_simulate_refuses_a_box_of_the_wrong_width(tmp_path, capsys):
    path = tmp_path / "x.npy"
    np.save(path, city_locations(300, seed=0).points)
    assert main(["simulate", "--data", str(path), "--k", "3", "--eps", "4", "--box", "0,0,0:1,1,1"]) == 2
    assert "the box has 3 low and 3 high values; the data has 2 features" in capsys.readouterr().err


def test_simulate_shows_progress_on_a_terminal_and_not_in_a_pipe(tmp_path):
    import fcntl
    import pty
    import struct
    import termios

    path = tmp_path / "x.npy"
    np.save(path, city_locations(3000, seed=0).points)
    argv = [sys.executable, "-m", "shoal.common.cli", "simulate", "--data", str(path), "--k", "3", "--eps", "4",
            "--box", "0:100"]
    pid, fd = pty.fork()
    if pid == 0:  # the child: an 80-column terminal, then the command
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        os.execv(argv[0], argv)
    out = bytearray()
    while True:
        try:
            data = os.read(fd, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        out.extend(data)
    os.waitpid(pid, 0)
    assert b"devices encoded" in out and b"verdict:" in out
    piped = subprocess.run(argv, capture_output=True, text=True, check=True)
    assert "devices encoded" not in piped.stderr and "verdict:" in piped.stdout


def test_wire_smoke_gives_bytes_per_device_for_every_kind_a_device_answers(tmp_path, capsys):
    assert main(["bench", "--wire", "--smoke", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "n_expected = 10,000" in out and "machine:" in out
    rows = [line.split(" | ") for line in out.splitlines() if line.startswith("| tree, local (nettree)")]
    (tree,) = rows
    assert tree[1] == "22.0" and tree[3] == "38"  # the binary record: 16-byte id + the 22-byte row
    for label in ("sketch, shuffle (secure sum)", "refine, shuffle (secure sum)", "central (sealed point)",
                  "local refine (codebook)", "partition, shuffle (secure sum)"):
        assert f"| {label} |" in out
    assert "| 1e+04 | 12 |" in out  # shares_rule at the published operating point


def test_greedy_smoke_prints_the_elbow_and_the_objective_against_gridhist(tmp_path, capsys):
    assert main(["bench", "--greedy", "--smoke", "--out", str(tmp_path), "--data-dir", str(tmp_path / "none")]) == 0
    out = capsys.readouterr().out
    assert "machine:" in out and "delta = 1e-06" in out and "asked for k = 16" in out
    row = next(line for line in out.splitlines() if line.startswith("| 0 | 10000 |"))
    assert 1 <= int(row.split(" | ")[2]) <= 16
    assert "| paper | 10000 | 100 | 8 | 1 |" in out and "| paper | 10000 | 100 | 8 | 4 |" in out
    tree = out.split("k-means or greedy centers")[1]
    row = next(line for line in tree.splitlines() if line.startswith("| paper | local | 10000 | 100 | 8 | 4 | "))
    mean, worst = row.split(" | ")[10].split(" (")[0].split(", ")
    assert float(mean) == float(worst) > 0  # one seed: its ratio is the mean and the largest


def test_greedy_boost_smoke_measures_each_boost_beside_the_plain_greedy(tmp_path, capsys):
    """Issue 18, Build 4: every boost of seed 001 Sec. 2 measured on the same data and seeds."""
    assert main(["bench", "--greedy", "--boost", "--smoke", "--out", str(tmp_path),
                 "--data-dir", str(tmp_path / "none")]) == 0
    out = capsys.readouterr().out
    assert "machine:" in out and "delta = 1e-06" in out and "seeds 0" in out
    row = next(line for line in out.splitlines() if line.startswith("| paper | 10000 | 100 | 5 | 8 | 1 |"))
    cells = row.strip("|").split("|")
    assert len(cells) == 11 and all("(" in c for c in cells[7:])  # every boost measured, ratio to plain beside it
    assert not (tmp_path / "greedy_boost.md").exists()  # smoke runs write nothing


def test_greedy_shuffle_smoke_prints_how_it_ran_and_a_row_per_seed(tmp_path, capsys):
    assert main(["bench", "--greedy", "--model", "shuffle", "--smoke", "--ns", "20000", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "machine:" in out and "n = 20000" in out and "central eps = 1" in out and "wire=False" in out
    assert next(line for line in out.splitlines() if line.startswith("| 0 | "))
    assert "The elbow round" in out and "tree round at central eps 0.9" in out  # a second round, eps 1 in all
    # both decoders on the same reports, both models
    assert "| paper | local | 20000 | 100 | 8 | 4 |" in out and "| paper | shuffle | 20000 | 100 | 8 | 4 |" in out
    assert not (tmp_path / "greedy_shuffle.md").exists()  # smoke runs write nothing


def test_continual_smoke_prints_how_it_ran_and_never_loses_to_the_private_one_center(tmp_path, capsys):
    assert main(["bench", "--continual", "--smoke", "--out", str(tmp_path), "--data-dir", str(tmp_path / "none")]) == 0
    out = capsys.readouterr().out
    assert "machine:" in out and "k = 4" in out
    row = next(line for line in out.splitlines() if line.startswith("| 1 | 0 | 0 | 128 |"))
    cells = row.strip("|").split("|")
    assert int(cells[4]) > 8000 and int(cells[6]) == 0  # events; steps above the private one-center
    assert float(cells[11]) > 0  # last / one-shot, measured
    # The step-close table: both paths measured at three steps of the stream (and found to agree).
    closes = [line for line in out.split("## Closing a step")[1].splitlines() if line.startswith("| 16 |")
              or line.startswith("| 64 |") or line.startswith("| 128 |")]
    assert len(closes) == 3 and all(float(c.split(" | ")[4]) > 0 for c in closes)


def test_soak_smoke_keeps_its_rates_and_every_acknowledged_report_is_stored(tmp_path, capsys):
    """``shoal bench --soak`` for 6 s at 50 singles/s + 1 batch/s of 200: per-window rows
    with both streams at their rates, and the store holds every acknowledged report."""
    assert main(["bench", "--soak", "--smoke", "--soak-seconds", "6", "--soak-window", "3", "--single-rate", "50",
                 "--batch-rate", "1", "--batch-size", "200", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| 0-3 s | 150 |" in out and "| 3-6 s | 150 |" in out
    assert "Acknowledged 1,500 reports, stored 1,500." in out
