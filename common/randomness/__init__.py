"""shoal.common.randomness: where every random number comes from.

``public_stream`` (the public stream of a round: SHAKE-256 of (protocol,
seed, label), what a device in any language reproduces;
``docs/protocol/public-randomness.md``), ``hashing`` (the public node and
bucket hashes, SplitMix64), ``device_random`` (the one seam every private
random byte of a device goes through). The tree round's public objects,
derived from its config, are in ``kinds/tree_randomness.py``.

May import: ``shoal.common``'s top-level modules (``errors``) only.
"""
