"""deploy: the tools above the services (simulation, demo, benchmarks), the
notebook estimator and the central library call. Their public names live at
the package top, ``from shoal import PrivateKMeans, fit_central``; the old
path ``from shoal.deploy import PrivateKMeans`` still works (loaded on first
use, so ``shoal`` commands do not pay for it)."""

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "PrivateKMeans":
        from shoal.deploy.notebook.estimator import PrivateKMeans

        return PrivateKMeans
    raise AttributeError(f"module 'shoal.deploy' has no attribute {name!r}")
