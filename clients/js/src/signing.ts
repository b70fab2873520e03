/**
 * Signed round configs (common/wire/signing.py; docs/protocol/configs.md): a
 * device accepts a config only if it is signed by the server identity whose
 * fingerprint it pinned out of band.
 *
 * - fingerprint: "sha256:" + hex SHA-256 of the raw 32-byte Ed25519 key;
 * - signed bytes: "shoal signed round config v1\n" + the canonical JSON of
 *   {round_id, config, server_public_key, signing_key} (sorted keys, no
 *   spaces, UTF-8, Python's number forms: `json.canonical`);
 * - config digest: hex SHA-256 of the canonical JSON of {config,
 *   server_public_key}, sent beside every sealed message so the shuffler can
 *   catch a server that shows different configs or keys to different parties.
 *
 * Ed25519 verification is @noble/curves' in strict RFC 8032 mode (no
 * ZIP-215 leniency), as OpenSSL verifies on the Python side.
 */

import { ed25519 } from "@noble/curves/ed25519.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { fromBase64, toHex, utf8 } from "./encoding.js";
import { TrustError } from "./errors.js";
import { canonical, type JsonObject, type JsonValue } from "./json.js";

const DOMAIN = "shoal signed round config v1\n";

export function fingerprint(publicRaw: Uint8Array): string {
  return "sha256:" + toHex(sha256(publicRaw));
}

/** The bytes the server signs for a config body. */
export function signedBytes(body: JsonObject): Uint8Array {
  const signed: JsonObject = {};
  for (const k of ["round_id", "config", "server_public_key", "signing_key"]) {
    if (!(k in body)) throw new TrustError(`the config is not signed (${k} missing)`);
    signed[k] = body[k]!;
  }
  return utf8(DOMAIN + canonical(signed));
}

export function configDigest(config: JsonValue, serverPublicKey: string): string {
  return toHex(sha256(utf8(canonical({ config, server_public_key: serverPublicKey }))));
}

/** A pin as the Python device takes it: "sha256:" and 64 hex digits. */
export function checkPin(pin: string): string {
  if (!/^sha256:[0-9a-f]{64}$/.test(pin)) throw new TrustError(`a server key pin is 'sha256:' and 64 hex digits, got ${JSON.stringify(pin)}`);
  return pin;
}

export interface VerifiedConfig {
  config: JsonObject;
  /** The server's raw X25519 key, to seal to. */
  serverPublicKey: Uint8Array;
  digest: string;
}

/** Accept `body` (parsed with `parseJson`) only if it is round `roundId`'s config signed by the pinned identity. */
export function verifyConfig(body: JsonValue, roundId: string, pinned: string): VerifiedConfig {
  checkPin(pinned);
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw new TrustError(`round ${roundId}: not a config body`);
  const b = body as JsonObject;
  let pub: Uint8Array;
  let sig: Uint8Array;
  let x25519: Uint8Array;
  try {
    pub = fromBase64(b["signing_key"] as string);
    sig = fromBase64(b["signature"] as string);
    x25519 = fromBase64(b["server_public_key"] as string);
  } catch {
    throw new TrustError(`round ${roundId}: the config is not signed (a key or the signature is missing or malformed)`);
  }
  const message = signedBytes(b);
  if (fingerprint(pub) !== pinned) {
    throw new TrustError(`round ${roundId}: the config is signed by ${fingerprint(pub)}, not the pinned server key ${pinned}`);
  }
  let ok = false;
  try {
    ok = sig.length === 64 && pub.length === 32 && ed25519.verify(sig, message, pub, { zip215: false });
  } catch {
    ok = false;
  }
  if (!ok) throw new TrustError(`round ${roundId}: the config's signature does not verify`);
  if (b["round_id"] !== roundId) throw new TrustError(`asked for round ${roundId}, got the signed config of round ${String(b["round_id"])}`);
  if (x25519.length !== 32) throw new TrustError(`round ${roundId}: the signed X25519 key has ${x25519.length} bytes, not 32`);
  const config = b["config"];
  if (typeof config !== "object" || config === null || Array.isArray(config)) throw new TrustError(`round ${roundId}: no config`);
  return { config, serverPublicKey: x25519, digest: configDigest(config, b["server_public_key"] as string) };
}
