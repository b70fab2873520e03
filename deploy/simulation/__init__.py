"""shoal.deploy.simulation: the simulator of many devices, in this process or
through the real services.

In-process (``shoal simulate``, and the engine of ``PrivateKMeans``):
``simulate`` runs a round's devices' encoders and the server's decoder in
one process (``fresh_devices`` the local model's two-round plan, ``summed``
the secure-sum rounds); ``evaluation`` reads the points a block at a time
and scores centers; ``reference`` caches the non-private reference per data
file; ``block_memory`` keeps freed block buffers in the process.

Through the services (``shoal sim``): ``sim`` starts a server and optionally
a shuffler as local processes (``processes``, also used by the services
benchmarks) and sends every simulated device's report over loopback
(``senders``); ``continual_sim`` runs a drifting stream
(``continual_stream``) through a continual round.

Shared by the simulator, the benchmarks and the demo: ``datasets`` (the
generators and the real datasets' loaders, each with its public bound) and
``progress`` (a progress bar on a terminal).

May import: ``shoal.common``, ``shoal.client`` and ``shoal.server``; of
``shoal.deploy``, only this package (the notebook code, the benchmarks and
the CLI are built on it, never the other way round).
"""
