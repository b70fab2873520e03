"""A real round from real browsers (issue 40, item 3): ``shoal server`` and
``shoal shuffler`` on 127.0.0.1, Debian's chromium loading the built bundle
(``clients/js/dist/shoal-device.js``) from a page on another origin (the devices'
calls are cross-origin, allowed by ``SHOAL_DEVICE_ORIGINS``) as 1,500 devices per model (each its own
``Device``, ledger and OS randomness) in a local-model and a shuffle-model tree
round, and 1,500 Python devices on the same points in rounds with the same
public seed; three seeds. The mean decoded objective of the browser's rounds is
within 30% of the Python devices' (per model), every report arrives, and
encoding one report at d = 100 in chromium takes at most 3x the Python
device's time, measured in the same run (``clients/js/scripts/browser-round.mjs
--check``; its JSON goes to build/browser-round.json and is printed).

Why 30% ("within noise", measured by ``tests/bench/browser_round_spread.py``,
tests/bench/results/browser_round_spread.md): a round of 1,500 devices at
eps 8 draws each device's tree level at random, and that sampling moves a
round's objective by 3-8% (sd) with a tail to 1.6x; two populations of the
*same* Python device left the earlier 10% band about one run in ten (CI
failed on it: local 0.80, one Python round at 1.73x planted) and leave 30% in
at most ~2e-5 of pairs per model (three measurements of 400 rounds per seed).
What it still catches: devices whose histogram randomiser keeps the true
bucket at eps 4's probability while the round says 8 (ratio ~25, always);
at eps 7, ratio ~1.27, in about two runs of five. The bit-level audits
(``npm run audit``, ``law_check.py``) are the sharp test of the devices'
law; this one shows that real browsers, HTTP and the shuffler decode like
Python devices.

Skipped, with the reason, without node, chromium or the bundle (.ci/run
installs and builds all three)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
JS = ROOT / "clients" / "js"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def test_browser_devices_decode_like_python_devices():
    node = shutil.which("node")
    if node is None:
        pytest.skip("no node on PATH (.ci/run installs nodejs)")
    if CHROMIUM is None:
        pytest.skip("no chromium on PATH: apt-get install chromium (.ci/run installs it)")
    if not (JS / "node_modules" / "playwright-core").is_dir() or not (JS / "dist" / "shoal-device.js").is_file():
        pytest.skip("clients/js is not built: cd clients/js && npm ci && npm run build")
    shoal = Path(sys.executable).with_name("shoal")
    env = dict(os.environ, PYTHON=sys.executable, SHOAL=str(shoal), CHROMIUM=CHROMIUM)
    run = subprocess.run([node, "scripts/browser-round.mjs", "1500", "1", "--seeds=3", "--python", "--check"],
                         cwd=JS, env=env, capture_output=True, text=True, timeout=900)
    out = run.stdout[run.stdout.index("{"):] if "{" in run.stdout else ""
    (ROOT / "build").mkdir(exist_ok=True)
    (ROOT / "build" / "browser-round.json").write_text(out)
    summary = json.loads(out) if out else {}
    short = {k: summary.get(k) for k in ("local", "shuffle", "encode_d100", "chromium")}
    print(json.dumps(short))
    assert run.returncode == 0, f"{run.stderr[-4000:]}\n{json.dumps(short)}"
    for model in ("local", "shuffle"):
        assert abs(summary[model]["ratio_of_means_browser_over_python"] - 1) <= 0.3
    assert summary["encode_d100"]["ratio"] <= 3
    assert sum(r["model"] == "local" for r in summary["rounds"]) == 3
    assert all(r["devices"] >= 1000 for r in summary["rounds"])
