"""shoal.common: what more than one component shares (devices, the server,
the shuffler, the tools above them).

Its neighbourhoods, lowest first; each imports only from the ones before it
(``tests/test_import_graph.py`` checks this on every module):

- the modules here: ``errors`` (one exception base), ``bounds`` (public
  input bounds), ``cost_drops`` (the elbow's per-point costs), ``picture``
  (the dashboard's coreset picture), ``cli`` (the ``shoal`` dispatcher);
- ``privacy/``: the randomisers' event records, shuffle amplification and
  budget accounting, the threat model's words;
- ``randomness/``: the public stream every language derives from (seed,
  label), public hashes, and the device's private randomness seam;
- ``mechanisms/``: the randomisers and samplers (PrivUnit, local hashing,
  Hadamard, exact samplers, secure sum and its noise, sketches, the
  central mechanisms' noise);
- ``kinds/``: each round kind's config (the shared third of a kind) and
  the registry that finds it by name;
- ``wire/``: what travels: messages, their pydantic models, binary rows,
  sealed envelopes, signed configs, which URLs may carry them.

``services/`` stands apart: what the two services (server and shuffler)
share and a device never imports (HTTP edge, access log, CORS, group
commit, settings from the environment; the server extra). It imports only
the modules here.

Pure numpy / scipy / pydantic / cryptography, except ``services/``: no I/O.
"""
