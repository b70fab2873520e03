"""Package discovery for the one ``shoal`` distribution (DESIGN.md, "Layout").

The top-level folders are the sub-packages of the ``shoal`` namespace
(``common/`` is ``shoal.common``, ``server/edge/`` is ``shoal.server.edge``):
every folder below them that holds an ``__init__.py`` is found here, so a
new module or sub-package can never be left out of the wheel. Everything
else about the distribution is in pyproject.toml.
"""

from setuptools import find_packages, setup

TOP = ("common", "client", "server", "shuffler", "deploy")

setup(
    package_dir={"shoal": "."},
    packages=["shoal." + p for p in find_packages(include=[f"{t}" for t in TOP] + [f"{t}.*" for t in TOP])],
)
