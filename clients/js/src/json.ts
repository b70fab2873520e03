/**
 * JSON as the Python side reads and writes it.
 *
 * `parseJson` keeps what `JSON.parse` loses: a round's seed is an integer up
 * to 2^63 (beyond 2^53 a double rounds it), and Python tells an int (`4`)
 * from a float (`4.0`), which the canonical bytes of a signed config depend
 * on. So integers (no fraction, no exponent) parse as `bigint`, every other
 * number as a `number`.
 *
 * `canonical` writes what Python's
 * `json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)`
 * writes (common/wire/signing.py): keys sorted by code point, floats as Python's
 * `repr` (shortest round-trip digits; exponent form below 1e-4 and from 1e16,
 * an exponent of at least two digits; `.0` on integral floats), strings with
 * Python's escapes only.
 */

import { ConfigError } from "./errors.js";

export type JsonValue = null | boolean | number | bigint | string | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

export function parseJson(text: string): JsonValue {
  let i = 0;
  const fail = (what: string): never => {
    throw new ConfigError(`not JSON: ${what} at offset ${i}`);
  };
  const ws = (): void => {
    while (i < text.length) {
      const c = text.charCodeAt(i);
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) i++;
      else break;
    }
  };
  const value = (depth: number): JsonValue => {
    if (depth > 64) fail("nesting deeper than 64");
    ws();
    const c = text[i];
    if (c === "{") {
      i++;
      const out: JsonObject = Object.create(null) as JsonObject;
      ws();
      if (text[i] === "}") {
        i++;
        return out;
      }
      for (;;) {
        ws();
        if (text[i] !== '"') fail("an object key");
        const k = str();
        ws();
        if (text[i] !== ":") fail("':'");
        i++;
        if (Object.prototype.hasOwnProperty.call(out, k)) fail(`a duplicate key ${JSON.stringify(k)}`);
        out[k] = value(depth + 1);
        ws();
        if (text[i] === ",") {
          i++;
          continue;
        }
        if (text[i] === "}") {
          i++;
          return out;
        }
        fail("',' or '}'");
      }
    }
    if (c === "[") {
      i++;
      const out: JsonValue[] = [];
      ws();
      if (text[i] === "]") {
        i++;
        return out;
      }
      for (;;) {
        out.push(value(depth + 1));
        ws();
        if (text[i] === ",") {
          i++;
          continue;
        }
        if (text[i] === "]") {
          i++;
          return out;
        }
        fail("',' or ']'");
      }
    }
    if (c === '"') return str();
    if (text.startsWith("true", i)) {
      i += 4;
      return true;
    }
    if (text.startsWith("false", i)) {
      i += 5;
      return false;
    }
    if (text.startsWith("null", i)) {
      i += 4;
      return null;
    }
    const m = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/.exec(text.slice(i, i + 400));
    if (m === null || m[0].length === 0) return fail("a value");
    i += m[0].length;
    if (m[2] === undefined && m[3] === undefined) return BigInt(m[0]);
    const x = Number(m[0]);
    if (!Number.isFinite(x)) fail(`a number out of range (${m[0]})`);
    return x;
  };
  const str = (): string => {
    i++; // opening quote
    let out = "";
    for (;;) {
      const j = i;
      while (i < text.length && text[i] !== '"' && text[i] !== "\\" && text.charCodeAt(i) >= 0x20) i++;
      out += text.slice(j, i);
      if (i >= text.length) fail("an unterminated string");
      const c = text[i];
      if (c === '"') {
        i++;
        return out;
      }
      if (c !== "\\") fail("a control character in a string");
      const e = text[i + 1];
      i += 2;
      switch (e) {
        case '"': out += '"'; break;
        case "\\": out += "\\"; break;
        case "/": out += "/"; break;
        case "b": out += "\b"; break;
        case "f": out += "\f"; break;
        case "n": out += "\n"; break;
        case "r": out += "\r"; break;
        case "t": out += "\t"; break;
        case "u": {
          const h = text.slice(i, i + 4);
          if (!/^[0-9a-fA-F]{4}$/.test(h)) fail("a \\u escape");
          out += String.fromCharCode(parseInt(h, 16));
          i += 4;
          break;
        }
        default:
          fail("an escape");
      }
    }
  };
  const out = value(0);
  ws();
  if (i !== text.length) fail("trailing characters");
  return out;
}

/** Python's repr of a finite double. */
export function pyFloat(x: number): string {
  if (!Number.isFinite(x)) throw new ConfigError(`${x} is not JSON (Python's allow_nan=False)`);
  if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
  // toExponential() without an argument gives the shortest round-trip digits, as repr does.
  const [mant, expText] = x.toExponential().split("e") as [string, string];
  const exp = Number(expText);
  const neg = mant.startsWith("-");
  const digits = mant.replace("-", "").replace(".", "");
  let body: string;
  if (exp < -4 || exp >= 16) {
    const frac = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    body = `${frac}e${exp < 0 ? "-" : "+"}${String(Math.abs(exp)).padStart(2, "0")}`;
  } else if (exp < 0) {
    body = `0.${"0".repeat(-exp - 1)}${digits}`;
  } else if (digits.length <= exp + 1) {
    body = `${digits}${"0".repeat(exp + 1 - digits.length)}.0`;
  } else {
    body = `${digits.slice(0, exp + 1)}.${digits.slice(exp + 1)}`;
  }
  return neg ? `-${body}` : body;
}

/**
 * A finite double as pydantic writes it in a message (pydantic-core): the
 * shortest round-trip digits, fixed notation from 1e-5 to below 1e16 (".0" on
 * integral values), else d.ddde-X / d.ddde+X.
 */
export function pydanticFloat(x: number): string {
  if (!Number.isFinite(x)) throw new RangeError(`${x} is not JSON`);
  if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
  const [mant, expText] = x.toExponential().split("e") as [string, string];
  const exp = Number(expText);
  const neg = mant.startsWith("-");
  const digits = mant.replace("-", "").replace(".", "");
  const kk = exp + 1;
  let body: string;
  if (kk > -5 && kk <= 0) body = `0.${"0".repeat(-kk)}${digits}`;
  else if (kk > 0 && kk <= 16) {
    body = digits.length <= kk ? `${digits}${"0".repeat(kk - digits.length)}.0` : `${digits.slice(0, kk)}.${digits.slice(kk)}`;
  } else {
    const frac = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    body = `${frac}e${exp < 0 ? "-" : "+"}${Math.abs(exp)}`;
  }
  return neg ? `-${body}` : body;
}

/** A string as Python's json.dumps writes it (ensure_ascii=True: DEL and every non-ASCII UTF-16 unit as \\uXXXX). */
export function pyAsciiString(s: string): string {
  let out = "";
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    out += c > 0x7e ? `\\u${c.toString(16).padStart(4, "0")}` : c < 0x20 || c === 0x22 || c === 0x5c ? pyString(s[i]!).slice(1, -1) : s[i];
  }
  return `"${out}"`;
}

/** A string as Python's json.dumps(ensure_ascii=False) writes it. */
export function pyString(s: string): string {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (ch === '"') out += '\\"';
    else if (ch === "\\") out += "\\\\";
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else if (ch === "\b") out += "\\b";
    else if (ch === "\f") out += "\\f";
    else if (c < 0x20) out += `\\u${c.toString(16).padStart(4, "0")}`;
    else out += ch;
  }
  return out + '"';
}

function byCodePoint(a: string, b: string): number {
  const x = Array.from(a, (c) => c.codePointAt(0)!);
  const y = Array.from(b, (c) => c.codePointAt(0)!);
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i]! - y[i]!;
  return x.length - y.length;
}

/** The canonical JSON text of a value (common/wire/signing.py `canonical`, before UTF-8 encoding). */
export function canonical(v: JsonValue): string {
  if (v === null) return "null";
  if (v === true) return "true";
  if (v === false) return "false";
  if (typeof v === "bigint") return v.toString();
  if (typeof v === "number") return pyFloat(v);
  if (typeof v === "string") return pyString(v);
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  const keys = Object.keys(v).sort(byCodePoint);
  return `{${keys.map((k) => `${pyString(k)}:${canonical(v[k]!)}`).join(",")}}`;
}
