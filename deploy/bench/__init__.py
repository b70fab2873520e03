"""shoal.deploy.bench: ``shoal bench``, the benchmarks (one module a flag:
``accuracy`` the default sweep, ``central``, ``shuffle``, ``sketch``,
``greedy``, ``continual``, ``device``, ``wire``, ``decode_memory``,
``scale``, ``capacity``, ``services``, ``soak``), their helpers (the load
generators ``loadgen`` and ``wrk_load``, ``scratch_schema`` for PostgreSQL,
``elbow_band``, ``step_close``) and ``results``, where a run's committed
results go (``tests/bench/results/``).

May import: everything below it: ``shoal.common``, ``shoal.client``,
``shoal.server``, ``deploy.simulation`` and ``deploy.notebook``; never the
CLI (``deploy/cli.py`` hands each flag to its module here).
"""
