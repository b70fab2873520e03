"""Where a benchmark's committed results go: ``tests/bench/results/NAME.md``
(the printed tables) and ``NAME.json`` (the rows, with the machine), and the
machine line every benchmark's table states (``machine``)."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import Any

import numpy as np


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, numpy {np.__version__}"


def write_results(out: Path, name: str, text: str, data: dict[str, Any]) -> None:
    """``name``.md holding ``text`` and ``name``.json holding ``data`` and the machine, in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.md").write_text(text)
    (out / f"{name}.json").write_text(json.dumps({"machine": machine(), **data}, indent=1))
