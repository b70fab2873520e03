"""Package discovery for the one ``shoal`` distribution (DESIGN.md, "Layout").

The repository root is the ``shoal`` package (its ``__init__.py`` is the
public API, ``from shoal import PrivateKMeans``, issue 39) and the
top-level folders are its sub-packages (``common/`` is ``shoal.common``,
``server/edge/`` is ``shoal.server.edge``): every folder below them that
holds an ``__init__.py`` is found here, so a new module or sub-package can
never be left out of the wheel. From the root itself the wheel takes only
``__init__.py`` and ``py.typed``: this file would otherwise be packaged as
``shoal/setup.py`` (``BuildPy``). Everything else about the distribution is
in pyproject.toml.
"""

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

TOP = ("common", "client", "server", "shuffler", "deploy")


class BuildPy(build_py):
    """setuptools' build_py without the root's ``setup.py`` (a module of the root package to it)."""

    def find_package_modules(self, package: str, package_dir: str) -> list[tuple[str, str, str]]:
        return [m for m in super().find_package_modules(package, package_dir) if (m[0], m[1]) != ("shoal", "setup")]


setup(
    cmdclass={"build_py": BuildPy},
    package_dir={"shoal": "."},
    packages=["shoal"] + ["shoal." + p for p in find_packages(include=[f"{t}" for t in TOP] + [f"{t}.*" for t in TOP])],
)
