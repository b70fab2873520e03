"""One exception base for the whole package.

Every error shoal raises on purpose derives from :class:`ShoalError`; the
HTTP layer maps these classes (and nothing else) to status codes in one
place.
"""

from __future__ import annotations


class ShoalError(Exception):
    """Base of every error shoal raises deliberately."""


class ConfigError(ShoalError, ValueError):
    """A parameter set is invalid; the message names the offending values."""


class PrivacyError(ShoalError):
    """A privacy statement cannot be made (unknown mechanism, budget exceeded)."""


class ReportError(ShoalError, ValueError):
    """A device report does not fit the round it claims to belong to."""


class BatchTooLarge(ReportError):
    """A batch holds more reports than the server takes in one request."""


class DecodeError(ShoalError):
    """The server cannot decode a round (for instance: no reports)."""
