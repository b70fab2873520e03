"""shoal.common.mechanisms: the randomisers and samplers, their math only.

Local randomisers: ``privunit`` (+ ``privunit_codebook``, its public
candidates), ``local_hashing`` (OLH), ``hadamard`` (FWHT) and
``hadamard_response``, ``sketch`` (scrambled compressive sketches).
Exact sampling: ``exact_sampling`` (integer Bernoulli, discrete Laplace and
Gaussian), ``distributed_noise`` (noise shared out among devices).
Summation and the curator's mechanisms: ``secure_sum`` (split-and-mix),
``continual_noise`` (the binary-tree mechanism's node noise),
``threshold_histogram``, ``exponential_mechanism``.

May import: ``shoal.common``'s top-level modules, ``privacy`` (event
records) and ``randomness`` (public streams, hashes). Never a round kind's
config or the wire: the kinds are built from these.
"""
