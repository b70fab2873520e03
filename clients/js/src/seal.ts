/**
 * Sealing a message to the server (common/wire/envelope.py; docs/protocol/sealing.md):
 * an ephemeral X25519 key pair, HKDF-SHA256 (salt: ephemeral public key then
 * the server's; info "shoal sealed report v1"; 32 bytes) of the shared
 * secret, ChaCha20-Poly1305 with a random 12-byte nonce and the round id as
 * associated data:
 *
 *   version 0x01 | ephemeral public key (32) | nonce (12) | ciphertext || tag
 *
 * The ephemeral private key and the nonce are device-private bytes
 * (`DeviceRandom`: the OS's in use; a vector's bytes in its test), read in
 * that order. @noble/curves, @noble/hashes and @noble/ciphers: WebCrypto has
 * no ChaCha20-Poly1305 and X25519 only in recent browsers.
 */

import { x25519 } from "@noble/curves/ed25519.js";
import { chacha20poly1305 } from "@noble/ciphers/chacha.js";
import { hkdf } from "@noble/hashes/hkdf.js";
import { sha256 } from "@noble/hashes/sha2.js";
import type { DeviceRandom } from "./random.js";
import { toBase64, utf8 } from "./encoding.js";

const VERSION = 1;
const INFO = utf8("shoal sealed report v1");

export function seal(plaintext: Uint8Array, serverPublic: Uint8Array, roundId: string, rnd: DeviceRandom): Uint8Array {
  if (serverPublic.length !== 32) throw new RangeError(`server public key must be 32 raw bytes, got ${serverPublic.length}`);
  const eph = rnd.bytes(32);
  const ephPub = x25519.getPublicKey(eph);
  const shared = x25519.getSharedSecret(eph, serverPublic);
  const salt = new Uint8Array(64);
  salt.set(ephPub, 0);
  salt.set(serverPublic, 32);
  const key = hkdf(sha256, shared, salt, INFO, 32);
  const nonce = rnd.bytes(12);
  const ct = chacha20poly1305(key, nonce, utf8(roundId)).encrypt(plaintext);
  eph.fill(0);
  shared.fill(0);
  key.fill(0);
  const out = new Uint8Array(1 + 32 + 12 + ct.length);
  out[0] = VERSION;
  out.set(ephPub, 1);
  out.set(nonce, 33);
  out.set(ct, 45);
  return out;
}

/** The shuffler submission of one sealed message, as the Python device writes it (json.dumps defaults). */
export function sealedSubmission(sealed: Uint8Array, configDigest: string): string {
  return `{"sealed": "${toBase64(sealed)}", "config_digest": "${configDigest}"}`;
}
