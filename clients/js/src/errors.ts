/** Errors a device raises, by cause (mirroring the Python device's ConfigError, ReportError, TrustError). */

/** A round config this device cannot or must not take part in. */
export class ConfigError extends Error {
  override name = "ConfigError";
}

/** A point (or report) that does not fit the round. */
export class ReportError extends Error {
  override name = "ReportError";
}

/** A config that does not carry the pinned server's valid signature. */
export class TrustError extends Error {
  override name = "TrustError";
}
