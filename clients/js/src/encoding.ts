/** Byte helpers: hex and standard base64 (with padding), the forms the wire uses. */

export function toHex(b: Uint8Array): string {
  let s = "";
  for (let i = 0; i < b.length; i++) s += b[i]!.toString(16).padStart(2, "0");
  return s;
}

export function fromHex(h: string): Uint8Array {
  if (h.length % 2 || !/^[0-9a-fA-F]*$/.test(h)) throw new RangeError("not hex");
  const out = new Uint8Array(h.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(h.slice(2 * i, 2 * i + 2), 16);
  return out;
}

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

export function toBase64(b: Uint8Array): string {
  let s = "";
  for (let i = 0; i < b.length; i += 3) {
    const n = (b[i]! << 16) | ((b[i + 1] ?? 0) << 8) | (b[i + 2] ?? 0);
    s += ALPHABET[(n >> 18) & 63]! + ALPHABET[(n >> 12) & 63]!;
    s += i + 1 < b.length ? ALPHABET[(n >> 6) & 63]! : "=";
    s += i + 2 < b.length ? ALPHABET[n & 63]! : "=";
  }
  return s;
}

/** Strict standard base64 (Python's b64decode(validate=True)): the alphabet, padding, length a multiple of 4. */
export function fromBase64(s: string): Uint8Array {
  if (s.length % 4 || !/^[A-Za-z0-9+/]*={0,2}$/.test(s)) throw new RangeError("not base64");
  const pad = s.endsWith("==") ? 2 : s.endsWith("=") ? 1 : 0;
  const out = new Uint8Array((s.length / 4) * 3 - pad);
  let o = 0;
  for (let i = 0; i < s.length; i += 4) {
    const n = (ALPHABET.indexOf(s[i]!) << 18) | (ALPHABET.indexOf(s[i + 1]!) << 12) |
      ((s[i + 2] === "=" ? 0 : ALPHABET.indexOf(s[i + 2]!)) << 6) | (s[i + 3] === "=" ? 0 : ALPHABET.indexOf(s[i + 3]!));
    if (o < out.length) out[o++] = (n >> 16) & 255;
    if (o < out.length) out[o++] = (n >> 8) & 255;
    if (o < out.length) out[o++] = n & 255;
  }
  return out;
}

export const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);
