"""Progress for the long verbs (issue 16, item 4: a 20,000-device sim was
silent for 15 minutes, ``make demo-core`` for 81 s).

A tqdm bar (rate and ETA) on stderr when stderr is a terminal, nothing
otherwise (logs and pipes stay clean); ``say`` prints a line above the bar,
so results appear as soon as each run ends. tqdm rather than our own
counter: it is the convention, handles terminals and redirection, and is
small (server extra).
"""

from __future__ import annotations

from typing import Any


def bar(total: int, desc: str, unit: str = "run") -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, disable=None, leave=False, dynamic_ncols=True)


def say(line: str) -> None:
    """A line on stdout that does not break a bar being drawn on stderr."""
    from tqdm import tqdm

    tqdm.write(line)
