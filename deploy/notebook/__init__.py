"""shoal.deploy.notebook: shoal on data you hold, in your own process, for a
notebook or a script (docs, "Cluster data you hold"). Its public names are
at the package top: ``from shoal import PrivateKMeans, fit_central``.

- ``estimator``: ``PrivateKMeans``, the whole pipeline as a scikit-learn
  estimator (local, shuffle or central model);
- ``central``: ``fit`` (``shoal.fit_central``), central-DP k-means of rows
  you hold as the curator, and ``CentralResult``;
- ``verdicts``: the verdicts of the answers whose decoders give none (a
  central run, a partition or refine round), so every model has one;
- ``center_plot`` (one fitted model's centers over its data) and ``plots``
  (accuracy against epsilon, a simulated elbow curve): the pictures, with
  matplotlib imported only when one is drawn.

May import: ``shoal.common``, ``shoal.client``, ``shoal.server`` and
``shoal.deploy.simulation`` (a fit runs the simulator's rounds); never the
benchmarks or the CLI, which are built on it.
"""
