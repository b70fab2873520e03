"""The public API at the package top (issue 39): ``from shoal import
PrivateKMeans, fit_central``, loaded lazily so that a device's ``import
shoal.client`` pays for none of it, and usable without scikit-learn."""

import os
import subprocess
import sys
from importlib.metadata import version

import numpy as np
import pytest

import shoal


def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def _without(*modules: str) -> str:
    """Python source that makes ``modules`` unimportable, as on an install without them."""
    return ("import sys\nclass _Block:\n    def find_spec(self, name, path=None, target=None):\n"
            f"        if name.split('.')[0] in {modules!r}:\n            raise ModuleNotFoundError(name=name)\n"
            "sys.meta_path.insert(0, _Block())\n")


def test_the_top_exports_a_small_documented_set_of_names():
    assert shoal.__all__ == ["CentralResult", "PrivateKMeans", "PublicBound", "__version__", "fit_central"]
    assert dir(shoal) == sorted(shoal.__all__)
    for name in shoal.__all__:
        assert f"- ``{name}" in shoal.__doc__  # one bullet each


def test_the_top_names_are_the_objects_at_their_full_paths():
    from shoal.common.bounds import PublicBound
    from shoal.deploy import PrivateKMeans
    from shoal.deploy.notebook.central import CentralResult, fit

    assert shoal.PrivateKMeans is PrivateKMeans and shoal.fit_central is fit
    assert shoal.CentralResult is CentralResult and shoal.PublicBound is PublicBound


def test_version_is_the_installed_distributions():
    assert shoal.__version__ == version("shoal")


def test_an_unknown_name_is_an_attribute_error_naming_it():
    with pytest.raises(AttributeError, match="module 'shoal' has no attribute 'KMeans'"):
        shoal.KMeans  # noqa: B018


def test_importing_shoal_loads_nothing_but_itself():
    out = _run("import sys, shoal; print(sorted(m for m in sys.modules if m.startswith(('shoal', 'numpy'))))")
    assert out == "['shoal']"


def test_a_device_import_loads_neither_the_estimator_nor_scikit_learn():
    code = ("import sys, shoal.client.device; print(sorted(m for m in ('shoal.deploy', 'sklearn', 'scipy', "
            "'matplotlib', 'shoal.server') if m in sys.modules))")
    assert _run(code) == "[]"


def test_fit_central_at_the_top_returns_centers_privacy_and_a_verdict():
    rng = np.random.default_rng(0)
    x = np.vstack([rng.normal(5, 0.2, (3000, 2)), rng.normal(-5, 0.2, (3000, 2))])
    res = shoal.fit_central(x, k=2, epsilon=2.0, delta=1e-6, bound=(-10.0, 10.0), rng=np.random.default_rng(1))
    assert isinstance(res, shoal.CentralResult) and res.centers.shape == (2, 2)
    assert res.privacy["central_epsilon"] <= 2.0 + 1e-12
    assert res.quality["k"] == 2 and res.quality["answer"] in ("clusters", "private mean")
    assert res.quality["distinct_centers"] == len(np.unique(res.centers.round(9), axis=0))


def test_the_estimator_fits_and_predicts_without_scikit_learn_installed():
    code = _without("sklearn") + (
        "import numpy as np\nfrom shoal import PrivateKMeans\n"
        "x = np.random.default_rng(0).uniform(size=(500, 2))\n"
        "km = PrivateKMeans(k=3, epsilon=4, bounds=(0, 1), random_state=0)\n"
        "copy = type(km)(**km.get_params())\n"
        "print(copy.fit(x).predict(x).shape, copy.quality_['k'], 'sklearn' in sys.modules)")
    assert _run(code) == "(500,) 3 False"
