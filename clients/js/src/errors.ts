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

/** A spend the device's ledger refuses (its cap, or a fresh-devices rule). */
export class PrivacyError extends Error {
  override name = "PrivacyError";
}

/** A transport failure (after retries), or a round that takes no reports. */
export class TransportError extends Error {
  override name = "TransportError";
}
