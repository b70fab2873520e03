"""``PrivateKMeans``: shoal's whole pipeline as a scikit-learn-style estimator.

For a notebook (issue 16, item 6): ``fit(X)`` runs one round in-process
(every row of X a device: clip into the public bound, encode with OS-seeded
randomness as a device would, decode) and keeps what a server would return:
``cluster_centers_`` in X's units, ``privacy_`` (the round's statement),
``quality_`` (the verdict, ``server/decoders/quality.py``). Nothing here is a
new algorithm; it is ``deploy.simulate.simulate_rounds`` with the argument
checks and the names a scikit-learn user expects.

The public bound is the privacy-relevant input a user most easily gets
wrong: it must come from public knowledge (a dataset card, a sensor's
range), never from X. Without one, ``fit`` uses the unit ball and warns with
the fraction of rows it clipped (``clipped_fraction_``).
"""

from __future__ import annotations

import secrets
import warnings
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from shoal.common.bounds import PublicBound, box_bound
from shoal.common.errors import ConfigError
from shoal.server.decoders.kmeans import assign, kmeans_cost


class PrivateKMeans:
    """Differentially private k-means of the rows of X, one device per row.

    Parameters: ``n_clusters`` (k); ``epsilon`` (each device's eps in the
    local model, the server's central eps in the shuffle model); ``model``
    "local" or "shuffle" (with ``delta`` and, optionally, ``min_batch``), or
    "central" (this process is the curator: ``shoal.deploy.central.fit``);
    ``encoder`` "auto" (default), "lsh" or "nettree"; ``bounds`` a
    ``PublicBound`` or a pair (low, high) of per-feature limits; or
    ``radius`` (an L2 bound); ``refine`` None, or in the shuffle model an
    eps for a refine round taken out of ``epsilon``, in the local model the
    share of the rows kept fresh for a local refine round at ``epsilon``,
    or "auto" (``refine_share``'s or ``refine_devices``' rule);
    ``random_state`` seeds the simulated devices (None: fresh).
    """

    def __init__(self, n_clusters: int = 8, *, epsilon: float = 1.0, model: str = "local", delta: float = 1e-6,
                 encoder: str = "auto", bounds: PublicBound | tuple[ArrayLike, ArrayLike] | None = None,
                 radius: float | None = None, refine: float | str | None = None, min_batch: int | None = None,
                 random_state: int | None = None) -> None:
        self.n_clusters = n_clusters
        self.epsilon = epsilon
        self.model = model
        self.delta = delta
        self.encoder = encoder
        self.bounds = bounds
        self.radius = radius
        self.refine = refine
        self.min_batch = min_batch
        self.random_state = random_state

    def _bound(self, x: NDArray[np.float64]) -> PublicBound:
        if self.bounds is not None and self.radius is not None:
            raise ConfigError("give bounds or radius, not both")
        if isinstance(self.bounds, PublicBound):
            bound = self.bounds
        elif self.bounds is not None:
            bound = box_bound(*self.bounds, x.shape[1])
        else:
            bound = PublicBound(radius=1.0 if self.radius is None else float(self.radius))
        bound.check_dim(x.shape[1])
        self.clipped_fraction_ = float(np.mean(bound.outside(x))) if x.shape[0] else 0.0
        if self.bounds is None and self.radius is None:
            warnings.warn(
                f"PrivateKMeans: no public bound given, so the unit ball (radius 1) was used and "
                f"{self.clipped_fraction_:.1%} of the rows were clipped into it. Pass bounds=(low, high) or "
                "radius=R from public knowledge of the data's range, never from the data.", UserWarning, stacklevel=3)
        return bound

    def fit(self, X: ArrayLike, y: Any = None) -> PrivateKMeans:
        """Run one round on the rows of X (and a refine round if asked)."""
        from shoal.deploy.simulate import refine_epsilon, refine_share_of_devices, simulate_rounds

        x = np.asarray(X, dtype=np.float64)
        if x.ndim != 2 or x.shape[0] < 1:
            raise ConfigError(f"X must be a non-empty 2-D array (n_samples, n_features), got shape {x.shape}")
        if not isinstance(self.n_clusters, int) or isinstance(self.n_clusters, bool) or self.n_clusters < 1:
            raise ConfigError(f"n_clusters must be a positive integer, got {self.n_clusters!r}")
        if self.model not in ("local", "shuffle", "central"):
            raise ConfigError(f"model must be 'local', 'shuffle' or 'central', got {self.model!r}")
        bound = self._bound(x)
        if self.model == "central":
            return self._fit_central(x, bound)
        delta = float(self.delta) if self.model == "shuffle" else 0.0
        local = self.model == "local"
        refine_eps = 0.0 if local else refine_epsilon(self.refine, x, self.n_clusters, self.epsilon, delta,
                                                      self.min_batch)
        fresh = refine_share_of_devices(self.refine, x, self.n_clusters, float(self.epsilon)) if local else 0.0
        seed = secrets.randbits(32) if self.random_state is None else int(self.random_state)
        out = simulate_rounds(x, self.n_clusters, float(self.epsilon), self.encoder, bound=bound,
                              seed=seed, model=self.model, delta=delta, min_batch=self.min_batch,
                              refine_epsilon=refine_eps, nonprivate=float("nan"), refine_devices=fresh)
        self.cluster_centers_ = np.asarray(out["centers"], dtype=np.float64)
        self.privacy_ = dict(out["privacy"], **({"composed": out["composed"]} if "composed" in out else {}))
        self.quality_ = out["quality"]
        self.encoder_ = out["encoder"]
        self.bound_ = bound
        self.n_features_in_ = x.shape[1]
        self.diagnostics_ = out["diagnostics"]
        return self

    def _fit_central(self, x: NDArray[np.float64], bound: PublicBound) -> PrivateKMeans:
        """The central model (``deploy/central.py``): this process is the curator of X's rows."""
        from shoal.deploy.central import fit

        if self.encoder != "auto" or self.refine is not None or self.min_batch is not None:
            raise ConfigError("model='central' takes no encoder, refine or min_batch (its algorithm is chosen by rule)")
        rng = None if self.random_state is None else np.random.default_rng(self.random_state)
        res = fit(x, self.n_clusters, float(self.epsilon), float(self.delta), bound, rng=rng,
                  seed=None if self.random_state is None else int(self.random_state))
        self.cluster_centers_ = res.centers
        self.privacy_ = res.privacy
        self.quality_ = {"answer": res.diagnostics.get("answer", "clusters")}
        self.encoder_ = res.privacy["algorithm"]
        self.bound_ = bound
        self.n_features_in_ = x.shape[1]
        self.diagnostics_ = res.diagnostics
        return self

    def predict(self, X: ArrayLike) -> NDArray[np.int64]:
        """The index of each row's nearest center (post-processing: no privacy cost)."""
        x = self._check_fitted(X)
        return np.asarray(assign(x, self.cluster_centers_), dtype=np.int64)

    def fit_predict(self, X: ArrayLike, y: Any = None) -> NDArray[np.int64]:
        return self.fit(X).predict(X)

    def score(self, X: ArrayLike, y: Any = None) -> float:
        """Minus the k-means cost of X against the centers (scikit-learn's
        convention: higher is better). Evaluating on your own data in a
        notebook; a deployment would never compute this on devices' points."""
        x = self._check_fitted(X)
        return -float(kmeans_cost(x, self.cluster_centers_))

    def _check_fitted(self, X: ArrayLike) -> NDArray[np.float64]:
        if not hasattr(self, "cluster_centers_"):
            raise ConfigError("PrivateKMeans is not fitted yet: call fit(X) first")
        x = np.asarray(X, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.n_features_in_:
            raise ConfigError(f"X must have shape (n, {self.n_features_in_}), got {x.shape}")
        return x

    def plot(self, X: ArrayLike, ax: Any = None) -> Any:
        """The centers over X (``deploy/plots.py``; needs ``shoal[plot]``)."""
        from shoal.deploy.plots import plot_centers

        self._check_fitted(X)
        return plot_centers(X, self, ax=ax)

    def __repr__(self) -> str:
        return (f"PrivateKMeans(n_clusters={self.n_clusters}, epsilon={self.epsilon}, model={self.model!r}, "
                f"encoder={self.encoder!r})")
