/**
 * The device's own privacy ledger (client/ledger.py; docs/protocol/ledger.md):
 * what it spent and the exact message it sent, per round.
 *
 * - Once per round: a round already recorded gets its recorded message back
 *   (same message id, same sealed bytes); nothing is randomised twice.
 * - Charged when recorded, before anything is sent.
 * - The cap: spent (the exactly rounded sum of the local eps of every
 *   "local" entry, as Python's math.fsum) + this round's eps must stay
 *   <= cap + 1e-12; "none" entries never count.
 * - Fresh devices: a spend with a family is refused when the ledger holds the
 *   family's parent round or any entry of that family.
 * - Atomic: check, build and write happen under the store's exclusive lock.
 *
 * Stores: in memory; `localStorage` in a browser (locked with the Web Locks
 * API across tabs when the browser has it); a file in Node
 * (`shoal-device/node`, `FileLedgerStore`). The file format is the Python
 * ledger's ({"version": 2, "cap": ..., "rounds": {...}}), but a TypeScript
 * and a Python device must not share one file: their locks differ.
 */

import { PrivacyError } from "./errors.js";

export type Guarantee = "local" | "none";

export interface Spend {
  guarantee: Guarantee;
  epsilon: number;
  central_epsilon?: number | null;
  delta?: number | null;
  note?: string;
  family?: string;
}

export interface LedgerEntry {
  guarantee: Guarantee;
  epsilon: number;
  central_epsilon: number | null;
  delta: number | null;
  note: string;
  family: string;
  message: string;
  withdrawal?: string;
}

/** Where a ledger lives: read and write its text, under an exclusive lock. */
export interface LedgerStore {
  read(): string | null | Promise<string | null>;
  write(text: string): void | Promise<void>;
  locked<T>(fn: () => Promise<T>): Promise<T>;
}

/** The exactly rounded sum of doubles (Shewchuk's algorithm, as Python's math.fsum). */
export function fsum(xs: Iterable<number>): number {
  const partials: number[] = [];
  for (let x of xs) {
    let i = 0;
    for (let y of partials) {
      if (Math.abs(x) < Math.abs(y)) [x, y] = [y, x];
      const hi = x + y;
      const lo = y - (hi - x);
      if (lo !== 0) partials[i++] = lo;
      x = hi;
    }
    partials.length = i;
    partials.push(x);
  }
  // Sum the partials from the top, with Python's half-even correction.
  let n = partials.length;
  let hi = 0;
  if (n > 0) {
    hi = partials[--n]!;
    let lo = 0;
    while (n > 0) {
      const x = hi;
      const y = partials[--n]!;
      hi = x + y;
      const yr = hi - x;
      lo = y - yr;
      if (lo !== 0) break;
    }
    if (n > 0 && ((lo < 0 && partials[n - 1]! < 0) || (lo > 0 && partials[n - 1]! > 0))) {
      const y = lo * 2;
      const x = hi + y;
      if (y === x - hi) hi = x;
    }
  }
  return hi;
}

export class Ledger {
  constructor(readonly store: LedgerStore, readonly cap = 10.0) {
    if (!(Number.isFinite(cap) && cap > 0)) throw new PrivacyError(`ledger cap must be finite and > 0, got ${cap}`);
  }

  async entries(): Promise<Record<string, LedgerEntry>> {
    const text = await this.store.read();
    if (text === null) return {};
    const data = JSON.parse(text) as { rounds?: Record<string, LedgerEntry> };
    return data.rounds ?? {};
  }

  /** Local eps spent so far (basic composition over the "local" entries). */
  async spent(): Promise<number> {
    return spentOf(await this.entries());
  }

  async messageFor(roundId: string): Promise<string | null> {
    return (await this.entries())[roundId]?.message ?? null;
  }

  async withdrawalFor(roundId: string): Promise<string | null> {
    return (await this.entries())[roundId]?.withdrawal ?? null;
  }

  /**
   * The message for the round: the recorded one, else `make()` recorded durably
   * (under the lock, refused beyond the cap) before it is returned for sending.
   */
  async record(roundId: string, spend: Spend, make: () => string | [string, string] | Promise<string | [string, string]>): Promise<string> {
    checkSpend(spend);
    return this.store.locked(async () => {
      const entries = await this.entries();
      const known = entries[roundId];
      if (known !== undefined) return known.message;
      const family = spend.family ?? "";
      if (family && (family in entries || Object.values(entries).some((e) => e.family === family))) {
        throw new PrivacyError(`round ${roundId} takes fresh devices only: this device already answered round ${family} ` +
          "or another round opened on it");
      }
      const spent = spentOf(entries);
      if (spend.guarantee === "local" && spent + spend.epsilon > this.cap + 1e-12) {
        throw new PrivacyError(`round ${roundId} needs epsilon ${spend.epsilon} but this device has spent ${spent} of its cap ${this.cap}`);
      }
      const made = await make();
      const [message, withdrawal] = typeof made === "string" ? [made, undefined] : made;
      const entry: LedgerEntry = {
        guarantee: spend.guarantee, epsilon: spend.epsilon, central_epsilon: spend.central_epsilon ?? null,
        delta: spend.delta ?? null, note: spend.note ?? "", family, message,
      };
      if (withdrawal !== undefined) entry.withdrawal = withdrawal;
      entries[roundId] = entry;
      await this.store.write(JSON.stringify({ version: 2, cap: this.cap, rounds: entries }));
      return message;
    });
  }
}

function checkSpend(s: Spend): void {
  if (s.guarantee !== "local" && s.guarantee !== "none") throw new PrivacyError(`guarantee must be 'local' or 'none', got ${String(s.guarantee)}`);
  if (s.guarantee === "local" && !(Number.isFinite(s.epsilon) && s.epsilon >= 0)) {
    throw new PrivacyError(`a local spend needs a finite eps >= 0, got ${s.epsilon}`);
  }
  if (s.guarantee === "none" && s.epsilon !== 0) throw new PrivacyError(`a round without a local guarantee charges no local eps, got ${s.epsilon}`);
}

function spentOf(entries: Record<string, LedgerEntry>): number {
  return fsum(Object.values(entries).filter((e) => (e.guarantee ?? "local") === "local").map((e) => Number(e.epsilon)));
}

/** A ledger in memory (tests, and simulations of many devices in one page). */
export class MemoryLedgerStore implements LedgerStore {
  private text: string | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  read(): string | null {
    return this.text;
  }
  write(text: string): void {
    this.text = text;
  }
  locked<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => undefined);
    return run;
  }
}

interface LocksLike {
  request<T>(name: string, cb: () => Promise<T>): Promise<T>;
}

/** A ledger in the browser's localStorage under `key`; exclusive across tabs through the Web Locks API. */
export class LocalStorageLedgerStore implements LedgerStore {
  private readonly memory = new MemoryLedgerStore();
  constructor(readonly key = "shoal-device-ledger", private readonly storage: Storage = globalThis.localStorage) {
    if (!storage) throw new PrivacyError("localStorage is not available here: use another ledger store");
  }
  read(): string | null {
    return this.storage.getItem(this.key);
  }
  write(text: string): void {
    this.storage.setItem(this.key, text);
  }
  locked<T>(fn: () => Promise<T>): Promise<T> {
    const locks = (globalThis.navigator as unknown as { locks?: LocksLike } | undefined)?.locks;
    if (locks) return locks.request(`${this.key}.lock`, fn);
    return this.memory.locked(fn); // one tab at a time, no cross-tab lock without Web Locks
  }
}
