"""deploy: the tools above the services (simulation, demo, benchmarks) and the
notebook estimator, ``from shoal.deploy import PrivateKMeans`` (loaded on
first use, so ``shoal`` commands do not pay for it)."""

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "PrivateKMeans":
        from shoal.deploy.estimator import PrivateKMeans

        return PrivateKMeans
    raise AttributeError(f"module 'shoal.deploy' has no attribute {name!r}")
