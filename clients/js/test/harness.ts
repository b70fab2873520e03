/**
 * A tiny test registry shared by the Node runner (node:test, test/node-entry.ts)
 * and the browser runner (test/browser-entry.ts, driven by Playwright), so the
 * same cases run in both. Assertions throw AssertionFailure with a message.
 */

export interface Case {
  name: string;
  fn: () => void | Promise<void>;
  /** Known not done: run and reported, but its failure does not fail the run unless SHOAL_STRICT=1. */
  todo?: string;
}

export const cases: Case[] = [];

export function test(name: string, fn: () => void | Promise<void>): void {
  cases.push({ name, fn });
}

/** A case for work not done yet (it fails, visibly, as TODO; `npm run test:strict` makes it fail the run). */
export function todo(name: string, reason: string, fn: () => void | Promise<void>): void {
  cases.push({ name, fn, todo: reason });
}

export class AssertionFailure extends Error {
  override name = "AssertionFailure";
}

export function ok(cond: unknown, msg: string): asserts cond {
  if (!cond) throw new AssertionFailure(msg);
}

function show(v: unknown): string {
  return typeof v === "bigint" ? `${v}n` : JSON.stringify(v, (_k, x) => (typeof x === "bigint" ? `${x}n` : x));
}

export function eq<T>(actual: T, expected: T, msg = ""): void {
  if (!Object.is(actual, expected)) {
    throw new AssertionFailure(`${msg}: expected ${show(expected)}, got ${show(actual)}`);
  }
}

export function deepEq(actual: unknown, expected: unknown, msg = ""): void {
  const a = show(actual);
  const e = show(expected);
  if (a !== e) throw new AssertionFailure(`${msg}: expected ${e.slice(0, 400)}, got ${a.slice(0, 400)}`);
}

export function throws(fn: () => unknown, pattern: RegExp, msg: string): void {
  try {
    fn();
  } catch (e) {
    const text = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
    if (!pattern.test(text)) throw new AssertionFailure(`${msg}: threw ${text}, expected ${pattern}`);
    return;
  }
  throw new AssertionFailure(`${msg}: did not throw`);
}

const f64 = new Float64Array(1);
const i64 = new BigInt64Array(f64.buffer);

/** Distance in units in the last place between two finite doubles of the same sign (0 when equal). */
export function ulps(a: number, b: number): number {
  if (a === b) return 0;
  f64[0] = a;
  const ia = i64[0]!;
  f64[0] = b;
  const ib = i64[0]!;
  // Map the sign-magnitude bit patterns onto a monotone integer line.
  const line = (x: bigint): bigint => (x < 0n ? -(x & 0x7fffffffffffffffn) : x);
  const d = line(ia) - line(ib);
  return Number(d < 0n ? -d : d);
}

export function hexOf(b: Uint8Array): string {
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

export function fromHex(h: string): Uint8Array {
  const out = new Uint8Array(h.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(h.slice(2 * i, 2 * i + 2), 16);
  return out;
}
