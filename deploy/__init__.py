"""shoal.deploy: the tools above the services, which may import every other
part of shoal (client, server, shuffler). Its sub-packages, lowest first
(each imports only from the ones before it; ``tests/test_import_graph.py``
checks it):

- ``simulation/``: the simulator of many devices, in this process (``shoal
  simulate``) or through a real server and shuffler on loopback (``shoal
  sim``), with the datasets it runs on;
- ``notebook/``: shoal on data you hold, in your own process:
  ``PrivateKMeans``, ``fit_central``, their verdicts and pictures;
- ``bench/``: ``shoal bench``, the benchmarks;
- this package's own modules, the top: ``cli.py`` (the parsers of ``shoal
  sim``, ``simulate``, ``bench`` and ``demo``), ``demo.py`` (``shoal demo``)
  and ``protocol_vectors.py`` (the wire protocol's conformance vectors).

The public names live at the package top, ``from shoal import
PrivateKMeans, fit_central``; the old path ``from shoal.deploy import
PrivateKMeans`` still works (loaded on first use, so ``shoal`` commands do
not pay for it). The container image and the TLS proxy's configuration are
not Python and not here: ``docker/``, beside ``docker-compose.yml`` at the
repository's top."""

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "PrivateKMeans":
        from shoal.deploy.notebook.estimator import PrivateKMeans

        return PrivateKMeans
    raise AttributeError(f"module 'shoal.deploy' has no attribute {name!r}")
