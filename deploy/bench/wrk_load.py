"""Single-message load from ``wrk`` (C; Debian's package), when it is installed.

The Python load generator (``loadgen.py``) needs about as much CPU per
request as the server does, and both share this machine's 2 cores, so its
latencies are partly its own (measured here: 1,461 requests/s with it, 2,609
with wrk, same server and store). ``wrk`` sends each connection's next
request when the previous answer arrives, after an optional think time drawn
uniformly in [0, 2 ``think_ms``] ms (wrk's ``delay()`` hook), so the same
tool measures saturation (no think time) and a fixed population of clients
at a moderate rate. Bodies are distinct device messages, each sent once
(threads take every ``threads``-th); latency is wrk's per-request time from
send to answer.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

LUA = """
local threads = {}
function setup(thread)
  thread:set("id", #threads)
  table.insert(threads, thread)
end
function init(args)
  bodies = {}
  for line in io.lines(os.getenv("SHOAL_BODIES")) do bodies[#bodies + 1] = line end
  counter = id
  stride = tonumber(os.getenv("SHOAL_STRIDE"))
  think = tonumber(os.getenv("SHOAL_THINK_MS"))
end
function request()
  counter = counter + stride
  return wrk.format("POST", nil, {["Content-Type"] = "application/json"}, bodies[(counter % #bodies) + 1])
end
function delay()
  if think > 0 then return math.random(0, 2 * think) end
  return 0
end
"""
THREADS = 2
_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def wrk_path() -> str | None:
    return shutil.which("wrk")


def _ms(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s)", text)
    if m is None:
        raise ValueError(f"not a wrk duration: {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2)]


def parse_wrk(out: str) -> dict[str, Any]:
    """Requests, seconds, rate, latency percentiles and errors from ``wrk --latency`` output."""
    done = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s)", out)
    if done is None:
        raise ValueError(f"wrk output without a request count:\n{out}")
    seconds = _ms(done.group(2) + done.group(3)) / 1e3
    pct = {f"p{p}": _ms(v) for p, v in re.findall(r"^\s+(50|75|90|99)%\s+(\S+)", out, flags=re.M)}
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    return {
        "requests": int(done.group(1)),
        "seconds": seconds,
        "requests_per_second": int(done.group(1)) / seconds,
        "latency_ms": pct,
        "non_2xx": int(non2xx.group(1)) if non2xx else 0,
        "socket_errors": sum(int(v) for v in errors.groups()) if errors else 0,
    }


def run_wrk(url: str, bodies: list[str], connections: int, seconds: int, think_ms: int, tmp: Path) -> dict[str, Any]:
    """POST ``bodies`` (one JSON document each) to ``url`` for ``seconds`` over ``connections``."""
    exe = wrk_path()
    if exe is None:
        raise FileNotFoundError("wrk is not installed")
    (tmp / "bodies.jsonl").write_text("\n".join(bodies) + "\n")
    (tmp / "post.lua").write_text(LUA)
    env = dict(os.environ, SHOAL_BODIES=str(tmp / "bodies.jsonl"), SHOAL_STRIDE=str(THREADS),
               SHOAL_THINK_MS=str(think_ms))
    out = subprocess.run([exe, f"-t{THREADS}", f"-c{connections}", f"-d{seconds}s", "--latency",
                          "-s", str(tmp / "post.lua"), url], capture_output=True, text=True, check=True, env=env)
    res = parse_wrk(out.stdout)
    res.update(concurrency=connections, think_ms=think_ms, tool="wrk")
    return res
