"""``PrivateKMeans``: shoal's whole pipeline as a scikit-learn estimator.

For a notebook (issue 16, item 6; issue 39): ``fit(X)`` runs one round
in-process (every row of X a device in the local and shuffle models: clip
into the public bound, encode, decode; in the central model this process is
the curator, ``deploy/notebook/central.py``) and keeps what a server would return:
``cluster_centers_`` in X's units, ``privacy_`` (the round's statement),
``quality_`` (the verdict, README "Reading a result"), in every model.
Nothing here is a new algorithm; it is ``deploy.simulation.simulate.simulate_rounds``
and ``deploy.notebook.central.fit`` with the argument checks and the names a
scikit-learn user expects.

scikit-learn is optional (devices and servers never install it), so the
estimator protocol is written out here rather than inherited from
``sklearn.base.BaseEstimator``: ``get_params``/``set_params`` read the
``__init__`` signature (which is all ``sklearn.base.clone`` needs),
``__sklearn_tags__`` imports scikit-learn only when scikit-learn asks, and
input checks (shapes, NaN, sparse, pandas feature names) are our own, with
scikit-learn's messages where its checks match on them. ``__init__`` only
stores its arguments (clone's contract); ``fit`` validates them. That
protocol is why this module is over 300 lines: it belongs with the class.

The public bound is the privacy-relevant input a user most easily gets
wrong: it must come from public knowledge (a dataset card, a sensor's
range), never from X. Without one, ``fit`` uses the unit ball and warns with
the fraction of rows it clipped (``clipped_fraction_``).
"""

from __future__ import annotations

import inspect
import math
import numbers
import secrets
import sys
import warnings
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from shoal.common.bounds import PublicBound, box_bound
from shoal.common.errors import ConfigError
from shoal.common.kinds.encoder_rule import EncoderChoice
from shoal.deploy.notebook.verdicts import partition_quality, refined_quality
from shoal.server.decoders.kmeans import assign, kmeans_cost

MODELS = ("local", "shuffle", "central")
ENCODERS = ("auto", "lsh", "nettree", "partition")
SECURE_SUM_MIN_DEVICES = 16  # the fewest devices a secure sum takes (``common/mechanisms/secure_sum.py``)


class NotFittedError(ConfigError, AttributeError):
    """``predict``/``transform``/``score`` before ``fit``. When scikit-learn is
    loaded, the error raised is also its ``NotFittedError`` (``_not_fitted``)."""


_SKLEARN_NOT_FITTED: dict[type, type] = {}


def _not_fitted() -> Exception:
    msg = "This PrivateKMeans instance is not fitted yet: call fit(X) first"
    theirs = getattr(sys.modules.get("sklearn.exceptions"), "NotFittedError", None)
    if theirs is None:  # scikit-learn not in use: nothing to be compatible with
        return NotFittedError(msg)
    cls = _SKLEARN_NOT_FITTED.setdefault(theirs, type("NotFittedError", (NotFittedError, theirs), {}))
    return cls(msg)


def _feature_names(X: Any) -> NDArray[Any] | None:
    """A DataFrame's column names when they are all strings (scikit-learn's rule), else None."""
    columns = getattr(X, "columns", None)
    if columns is None:
        return None
    names = np.asarray(list(columns), dtype=object)
    return names if names.size and all(isinstance(n, str) for n in names) else None


def _as_rows(X: Any) -> NDArray[np.float64]:
    """X as a finite (n, d) float64 array with n, d >= 1, or ValueError naming what is wrong."""
    if hasattr(X, "tocsr") or type(X).__module__.startswith("scipy.sparse"):
        raise ConfigError(f"PrivateKMeans takes dense input; got sparse {type(X).__name__}: pass X.toarray()")
    raw = np.asarray(X)
    if np.iscomplexobj(raw):
        raise ConfigError("Complex data not supported: X has complex values")
    x = raw.astype(np.float64)  # object cells that are not numbers raise TypeError here
    if x.ndim != 2:
        raise ConfigError(f"X must be a 2-D array (n_samples, n_features), got shape {x.shape}. Reshape your data: "
                          "X.reshape(-1, 1) if it has one feature, X.reshape(1, -1) if it is one row")
    for axis, what in ((0, "sample"), (1, "feature")):
        if x.shape[axis] < 1:
            raise ConfigError(f"X has 0 {what}(s) (shape={x.shape}) while a minimum of 1 is required.")
    if not np.isfinite(x).all():
        row, col = np.argwhere(~np.isfinite(x))[0]
        raise ConfigError(f"X contains NaN or infinity (first at row {row}, column {col}: {x[row, col]})")
    return x


def _name_mismatch(names: list[str], fitted: list[str]) -> str:
    """scikit-learn's message for columns that are not the fitted ones (its checks match on it)."""
    def listed(which: list[str]) -> str:
        return "".join(f"- {n}\n" for n in which[:5]) + ("- ...\n" if len(which) > 5 else "")

    unseen, missing = sorted(set(names) - set(fitted)), sorted(set(fitted) - set(names))
    msg = "The feature names should match those that were passed during fit.\n"
    msg += f"Feature names unseen at fit time:\n{listed(unseen)}" if unseen else ""
    msg += f"Feature names seen at fit time, yet now missing:\n{listed(missing)}" if missing else ""
    return msg if unseen or missing else msg + "Feature names must be in the same order as they were in fit.\n"


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_positive(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) and float(v) > 0


class PrivateKMeans:
    """Differentially private k-means of the rows of X, one device per row.

    Parameters: ``k``, the number of centers (shoal's REST API and CLI name
    it so), at most the number of rows; ``epsilon`` (each device's eps in
    the local model, the central eps in the shuffle and central models);
    ``model`` "local", "shuffle" (with ``delta`` and, optionally,
    ``min_batch``) or "central" (this process is the curator:
    ``shoal.fit_central``); ``encoder`` "auto", "lsh", "nettree" or, in the
    shuffle model, "partition"; ``bounds`` a ``PublicBound`` or a pair
    (low, high) of per-feature limits, or ``radius`` (an L2 bound);
    ``refine`` None, or in the shuffle model an eps for a refine round taken
    out of ``epsilon`` (after a partition stage a chain of refine rounds
    sharing it, ``kinds.partition_plan.plan_refine_chain``), in the local model the share of the rows kept fresh
    for a local refine round at ``epsilon``, or "auto"; ``random_state`` an
    int makes the simulated devices and every draw reproducible (None: fresh).

    Fitted: ``cluster_centers_`` (k, d), ``labels_`` (X's rows' nearest
    centers), ``quality_`` (the verdict), ``privacy_``, ``encoder_``,
    ``bound_``, ``clipped_fraction_``, ``diagnostics_``, ``n_features_in_``
    and, for a DataFrame with string column names, ``feature_names_in_``.
    """

    def __init__(self, k: int = 8, *, epsilon: float = 1.0, model: str = "local", delta: float = 1e-6,
                 encoder: EncoderChoice | Literal["partition"] = "auto", bounds: PublicBound | tuple[ArrayLike, ArrayLike] | None = None,
                 radius: float | None = None, refine: float | str | None = None, min_batch: int | None = None,
                 random_state: int | None = None) -> None:
        self.k = k
        self.epsilon = epsilon
        self.model = model
        self.delta = delta
        self.encoder = encoder
        self.bounds = bounds
        self.radius = radius
        self.refine = refine
        self.min_batch = min_batch
        self.random_state = random_state

    # -- the estimator protocol (``sklearn.base.clone``, grid search, pipelines) --

    @classmethod
    def _param_names(cls) -> list[str]:
        return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The ``__init__`` arguments as stored (no nested estimators, so ``deep`` changes nothing)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> PrivateKMeans:
        """Set ``__init__`` arguments by name; checked by the next ``fit``, as in scikit-learn."""
        known = self._param_names()
        for name, value in params.items():
            if name not in known:
                raise ValueError(f"PrivateKMeans has no parameter {name!r} (set to {value!r}); "
                                 f"its parameters: {', '.join(known)}")
            setattr(self, name, value)
        return self

    def __sklearn_tags__(self) -> Any:
        """scikit-learn's tags (only scikit-learn calls this, so only it imports scikit-learn):
        an unsupervised clusterer and transformer of dense finite 2-D float input."""
        from sklearn.utils import InputTags, Tags, TargetTags, TransformerTags

        return Tags(estimator_type="clusterer", target_tags=TargetTags(required=False),
                    transformer_tags=TransformerTags(preserves_dtype=["float64"]), input_tags=InputTags())

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "cluster_centers_")

    def __repr__(self) -> str:
        """The arguments that differ from their defaults, as scikit-learn prints estimators."""
        defaults = {name: p.default for name, p in inspect.signature(type(self).__init__).parameters.items()}
        shown = [f"{name}={value!r}" for name, value in self.get_params().items()
                 if not (value is defaults[name] or (isinstance(value, str | int | float) and value == defaults[name]
                                                    and type(value) is type(defaults[name])))]
        return f"PrivateKMeans({', '.join(shown)})"

    # -- fitting --

    def _checked_k(self, n: int) -> int:
        """``k`` checked against the parameters and the rows (one ValueError per kind of mistake)."""
        if not _is_int(self.k) or self.k < 1:
            raise ConfigError(f"k must be a positive integer, got {self.k!r}")
        if self.k > n:
            raise ConfigError(f"k={self.k} is more than the rows of X (n_samples = {n}): every center needs rows")
        if not _is_positive(self.epsilon):
            raise ConfigError(f"epsilon must be a finite number > 0, got {self.epsilon!r}")
        if self.model not in MODELS:
            raise ConfigError(f"model must be 'local', 'shuffle' or 'central', got {self.model!r}")
        if self.model != "local" and not (_is_positive(self.delta) and self.delta < 1):
            raise ConfigError(f"delta must be a number in (0, 1) in the {self.model} model, got {self.delta!r}")
        if self.encoder not in ENCODERS:
            raise ConfigError(f"encoder must be one of {', '.join(map(repr, ENCODERS))}, got {self.encoder!r}")
        if self.radius is not None and not _is_positive(self.radius):
            raise ConfigError(f"radius must be a finite number > 0, got {self.radius!r}")
        if self.min_batch is not None and (not _is_int(self.min_batch) or self.min_batch < 2):
            raise ConfigError(f"min_batch must be an integer >= 2, got {self.min_batch!r}")
        if self.random_state is not None and not _is_int(self.random_state):
            raise ConfigError(f"random_state must be None or an integer, got {self.random_state!r}")
        if self.model == "shuffle":  # a batch of min_batch devices (default: all n); a secure sum needs 16
            sums = self.encoder in ("auto", "partition") or self.refine is not None
            least = SECURE_SUM_MIN_DEVICES if sums else 2
            if (n if self.min_batch is None else self.min_batch) < least:
                raise ConfigError(
                    f"the shuffle model needs batches of at least {least} rows (n_samples = {n}, min_batch = "
                    f"{self.min_batch})" + (": its secure sums (a partition round, which encoder='auto' may "
                                            "choose, or a refine round) need 16 devices" if sums else ""))
        return int(self.k)

    def _bound(self, x: NDArray[np.float64]) -> tuple[PublicBound, float]:
        if self.bounds is not None and self.radius is not None:
            raise ConfigError(f"give bounds or radius, not both (got bounds={self.bounds!r}, radius={self.radius!r})")
        if isinstance(self.bounds, PublicBound):
            bound = self.bounds
        elif self.bounds is not None:
            if not (isinstance(self.bounds, tuple | list) and len(self.bounds) == 2):
                raise ConfigError(f"bounds must be a PublicBound or a pair (low, high), got {self.bounds!r}")
            bound = box_bound(*self.bounds, x.shape[1])
        else:
            bound = PublicBound(radius=1.0 if self.radius is None else float(self.radius))
        bound.check_dim(x.shape[1])
        clipped = float(np.mean(bound.outside(x)))
        if self.bounds is None and self.radius is None:
            warnings.warn(
                f"PrivateKMeans: no public bound given, so the unit ball (radius 1) was used and "
                f"{clipped:.1%} of the rows were clipped into it. Pass bounds=(low, high) or "
                "radius=R from public knowledge of the data's range, never from the data.", UserWarning, stacklevel=3)
        return bound, clipped

    def fit(self, X: ArrayLike, y: Any = None) -> PrivateKMeans:
        """Run one round on the rows of X (and a refine round if asked); ``y`` is ignored."""
        names = _feature_names(X)
        x = _as_rows(X)
        k = self._checked_k(x.shape[0])
        bound, clipped = self._bound(x)
        seed = secrets.randbits(32) if self.random_state is None else int(self.random_state)
        if self.model == "central":
            centers, privacy, quality, encoder, diagnostics = self._fit_central(x, k, bound, seed)
        else:
            centers, privacy, quality, encoder, diagnostics = self._fit_rounds(x, k, bound, seed)
        self.cluster_centers_ = centers
        self.privacy_ = privacy
        self.quality_ = quality
        self.encoder_ = encoder
        self.bound_ = bound
        self.clipped_fraction_ = clipped
        self.diagnostics_ = diagnostics
        self.n_features_in_ = x.shape[1]
        if names is not None:
            self.feature_names_in_ = names
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        self.labels_ = np.asarray(assign(x, centers), dtype=np.int64)
        return self

    def _fit_rounds(self, x: NDArray[np.float64], k: int, bound: PublicBound, seed: int) -> tuple[Any, ...]:
        """The local and shuffle models: ``simulate_rounds``, every row a device."""
        from shoal.deploy.simulation.simulate import (
            refine_epsilon,
            refine_share_of_devices,
            simulate_rounds,
        )

        local = self.model == "local"
        delta = 0.0 if local else float(self.delta)
        eps = float(self.epsilon)
        refine_eps = 0.0 if local else refine_epsilon(self.refine, x, k, eps, delta, self.min_batch)
        fresh = refine_share_of_devices(self.refine, x, k, eps) if local else 0.0
        out = simulate_rounds(x, k, eps, self.encoder, bound=bound, seed=seed, model=self.model, delta=delta, min_batch=self.min_batch,
                              refine_epsilon=refine_eps, nonprivate=float("nan"), refine_devices=fresh)
        centers = np.asarray(out["centers"], dtype=np.float64)
        privacy = dict(out["privacy"], **({"composed": out["composed"]} if "composed" in out else {}))
        ball = np.asarray(out["ball_centers"], dtype=np.float64)
        if out["quality"] is None:  # a partition round (shuffle model): its decoder gives no verdict
            quality = partition_quality(k, bound, ball, out["diagnostics"], eps)
        else:
            quality = out["quality"]
        if "refine" in out:
            quality = refined_quality(quality, k, ball)
        return centers, privacy, quality, out["encoder"], out["diagnostics"]

    def _fit_central(self, x: NDArray[np.float64], k: int, bound: PublicBound, seed: int) -> tuple[Any, ...]:
        """The central model (``deploy/notebook/central.py``): this process is the curator of X's rows."""
        from shoal.deploy.notebook.central import fit

        if self.encoder != "auto" or self.refine is not None or self.min_batch is not None:
            raise ConfigError("model='central' takes no encoder, refine or min_batch (its algorithm is chosen by "
                              f"rule); got encoder={self.encoder!r}, refine={self.refine!r}, "
                              f"min_batch={self.min_batch!r}")
        rng = None if self.random_state is None else np.random.default_rng(seed)
        res = fit(x, k, float(self.epsilon), float(self.delta), bound, rng=rng, seed=seed)
        return res.centers, res.privacy, res.quality, res.privacy["algorithm"], res.diagnostics

    # -- using the centers (post-processing of the release: no privacy cost) --

    def _rows(self, X: Any) -> NDArray[np.float64]:
        """X checked against what ``fit`` saw (scikit-learn's messages for the feature count and names)."""
        if not self.__sklearn_is_fitted__():
            raise _not_fitted()
        names, fitted = _feature_names(X), getattr(self, "feature_names_in_", None)
        if names is None and fitted is not None:
            warnings.warn("X does not have valid feature names, but PrivateKMeans was fitted with feature names",
                          UserWarning, stacklevel=3)
        elif names is not None and fitted is None:
            warnings.warn("X has feature names, but PrivateKMeans was fitted without feature names",
                          UserWarning, stacklevel=3)
        elif names is not None and fitted is not None and list(names) != list(fitted):
            raise ConfigError(_name_mismatch(list(names), list(fitted)))
        x = _as_rows(X)
        if x.shape[1] != self.n_features_in_:
            raise ConfigError(f"X has {x.shape[1]} features, but PrivateKMeans is expecting {self.n_features_in_} "
                              "features as input.")
        return x

    def predict(self, X: ArrayLike) -> NDArray[np.int64]:
        """The index of each row's nearest center."""
        return np.asarray(assign(self._rows(X), self.cluster_centers_), dtype=np.int64)

    def fit_predict(self, X: ArrayLike, y: Any = None) -> NDArray[np.int64]:
        """``fit(X)``, then the labels of X's rows (``labels_``)."""
        return self.fit(X).labels_

    def transform(self, X: ArrayLike) -> NDArray[np.float64]:
        """Each row's Euclidean distance to every center, (n, k), as ``sklearn.cluster.KMeans.transform``."""
        x = self._rows(X)
        c = self.cluster_centers_
        sq = (x * x).sum(1)[:, None] - 2.0 * (x @ c.T) + (c * c).sum(1)[None, :]
        return np.sqrt(np.maximum(sq, 0.0))

    def fit_transform(self, X: ArrayLike, y: Any = None) -> NDArray[np.float64]:
        """``fit(X)``, then ``transform(X)``."""
        return self.fit(X).transform(X)

    def score(self, X: ArrayLike, y: Any = None) -> float:
        """Minus the k-means cost of X against the centers (scikit-learn's
        convention: higher is better). Evaluating on your own data in a
        notebook; a deployment would never compute this on devices' points."""
        return -float(kmeans_cost(self._rows(X), self.cluster_centers_))

    def plot(self, X: ArrayLike, ax: Any = None) -> Any:
        """The centers over X (``deploy/notebook/plots.py``; needs ``shoal[plot]``)."""
        from shoal.deploy.notebook.center_plot import plot_centers

        self._rows(X)
        return plot_centers(X, self, ax=ax)

