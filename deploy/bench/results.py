"""Where a benchmark's committed results go: ``tests/bench/results/NAME.md``
(the printed tables) and ``NAME.json`` (the rows, with the machine)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from shoal.deploy.bench.accuracy import machine


def write_results(out: Path, name: str, text: str, data: dict[str, Any]) -> None:
    """``name``.md holding ``text`` and ``name``.json holding ``data`` and the machine, in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.md").write_text(text)
    (out / f"{name}.json").write_text(json.dumps({"machine": machine(), **data}, indent=1))
