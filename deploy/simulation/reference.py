"""The non-private reference of ``shoal simulate``, kept per data file.

The reference (``evaluation.nonprivate_objective``: scikit-learn's and shoal's
k-means on the true points) was two thirds of a ``shoal simulate`` run at
1e6 x 100 and was computed on every run (issue 42). It is now computed only
when asked (``--reference``), and then stored in the user's cache directory
under the file's SHA-256, k, the seed, the public bound and the reference's
method, so that later runs on the same file report it for free.

A run without ``--reference`` never reads the whole file to hash it: it
finds the hash in a small index by the file's path, size and mtime (in ns),
written when ``--reference`` last hashed that file; a file not in the index
has no cached reference. The cache is the user's own (their data's
objective); shoal never sends it anywhere.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from shoal.common.bounds import PublicBound, bound_to_dict


def cache_dir() -> Path:
    """``$SHOAL_CACHE_DIR``, else ``$XDG_CACHE_HOME/shoal``, else ``~/.cache/shoal``."""
    if os.environ.get("SHOAL_CACHE_DIR"):
        return Path(os.environ["SHOAL_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "shoal"


def method() -> str:
    """What computed the reference: scikit-learn's KMeans joins it when installed."""
    try:
        import sklearn
    except ImportError:
        return "nonprivate_objective/1 without scikit-learn"
    return f"nonprivate_objective/1 scikit-learn {sklearn.__version__}"


def file_sha256(path: Path) -> str:
    """The file's SHA-256, read in 1 MiB blocks (about 1 s per GB here)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def _write(path: Path, data: dict[str, Any]) -> None:
    """Whole or not at all: a temporary file in the same directory, renamed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


class ReferenceCache:
    """The cached reference of one data file at one (k, seed, bound)."""

    def __init__(self, data: Path, k: int, seed: int, bound: PublicBound, root: Path | None = None) -> None:
        self.data = Path(data).resolve()
        self.root = (root or cache_dir()) / "reference"
        self.k, self.seed, self.bound = k, seed, bound
        st = self.data.stat()
        self.stamp = [st.st_size, st.st_mtime_ns]

    def _index(self) -> dict[str, Any]:
        return _read(self.root / "files.json")

    def _sha(self, compute: bool) -> str | None:
        """The file's hash from the index when its size and mtime match, else
        (``compute``) read the file and index it, else None."""
        entry = self._index().get(str(self.data))
        if isinstance(entry, dict) and entry.get("stamp") == self.stamp:
            return str(entry["sha256"])
        if not compute:
            return None
        sha = file_sha256(self.data)
        index = self._index()
        index[str(self.data)] = {"stamp": self.stamp, "sha256": sha}
        _write(self.root / "files.json", index)
        return sha

    def _entry(self, sha: str) -> Path:
        key = json.dumps({"sha256": sha, "k": self.k, "seed": self.seed, "bound": bound_to_dict(self.bound),
                          "method": method()}, sort_keys=True)
        return self.root / f"{hashlib.sha256(key.encode()).hexdigest()}.json"

    def lookup(self, hash_file: bool = False) -> float | None:
        """The cached reference, or None. ``hash_file``: hash a file the index
        does not know (``--reference`` does; a plain run never reads it)."""
        sha = self._sha(hash_file)
        if sha is None:
            return None
        value = _read(self._entry(sha)).get("nonprivate_objective")
        return float(value) if isinstance(value, int | float) else None

    def store(self, value: float) -> Path:
        """Keep ``value`` for this file's content, k, seed, bound and method."""
        sha = self._sha(True)
        assert sha is not None
        path = self._entry(sha)
        _write(path, {"nonprivate_objective": value, "data": str(self.data), "sha256": sha, "k": self.k,
                      "seed": self.seed, "bound": bound_to_dict(self.bound), "method": method()})
        return path
