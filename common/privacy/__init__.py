"""shoal.common.privacy: the records a privacy statement is computed from.

``events`` (each randomiser's math as an immutable record), ``accounting``
(shuffle amplification, splitting and checking a budget), ``threats`` (who
each guarantee holds against, in words and fields).

May import: ``shoal.common``'s top-level modules (``errors``) only; the
mechanisms and kinds import it, never the other way round.
"""
