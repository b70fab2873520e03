"""shoal.common: what devices and servers share.

Wire models, round configuration, public randomness derived from a round's
seed, the randomisers' math and the privacy records they carry. Pure numpy /
scipy / pydantic: no I/O.
"""
