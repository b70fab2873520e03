"""shoal: differentially private federated k-means.

The public API, for a notebook or a script (issue 39)::

    from shoal import PrivateKMeans, fit_central

- ``PrivateKMeans``: a scikit-learn estimator (``get_params``/``set_params``,
  ``clone``, ``fit``/``predict``/``fit_predict``/``transform``/``score``,
  pandas DataFrames) running shoal's pipeline in this process, in the local,
  shuffle or central model (``model=``); every fit leaves a verdict in
  ``quality_`` and a privacy statement in ``privacy_``.
- ``fit_central(points, k, epsilon, delta, bound)``: central-DP k-means of
  rows you hold (you are the curator).
- ``CentralResult``: what ``fit_central`` returns (``centers``, ``sizes``,
  ``privacy``, ``quality``, ``diagnostics``).
- ``PublicBound``: the public range of the data (a radius, or a per-feature
  box), which must come from public knowledge, never from the data.
- ``__version__``: the installed distribution's version.

The services are not here: devices run ``shoal client`` (``shoal.client``),
operators ``shoal server`` and ``shoal shuffler``.

Every name is loaded on first use (PEP 562): a device's ``import
shoal.client`` imports this module first, and must not pay for numpy-heavy
or server code it never uses. scikit-learn is never needed to import shoal;
it is imported only when scikit-learn itself asks the estimator for its tags.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for type checkers only; at run time ``__getattr__`` loads these
    from shoal.common.bounds import PublicBound
    from shoal.deploy.notebook.central import CentralResult
    from shoal.deploy.notebook.central import fit as fit_central
    from shoal.deploy.notebook.estimator import PrivateKMeans

__all__ = ["CentralResult", "PrivateKMeans", "PublicBound", "__version__", "fit_central"]

# public name -> (module, attribute)
_LAZY = {
    "PrivateKMeans": ("shoal.deploy.notebook.estimator", "PrivateKMeans"),
    "fit_central": ("shoal.deploy.notebook.central", "fit"),
    "CentralResult": ("shoal.deploy.notebook.central", "CentralResult"),
    "PublicBound": ("shoal.common.bounds", "PublicBound"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        module, attribute = _LAZY[name]
        value = getattr(import_module(module), attribute)
    elif name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            value = version("shoal")
        except PackageNotFoundError:  # a checkout on sys.path, not installed: no version to report
            value = "unknown (not installed)"
    else:
        raise AttributeError(f"module 'shoal' has no attribute {name!r}")
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
