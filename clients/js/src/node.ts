/**
 * Node-only parts of shoal-device (`import { FileLedgerStore } from "shoal-device/node"`):
 * a ledger in a file, written atomically (temporary file, fsync, rename, fsync of
 * the directory) under an exclusive lock file (created with O_EXCL; a lock older
 * than `staleMs` is taken over, as a crashed holder's).
 */

import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, statSync, unlinkSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import type { LedgerStore } from "./ledger.js";

export class FileLedgerStore implements LedgerStore {
  constructor(readonly path: string, readonly staleMs = 60_000) {}

  read(): string | null {
    try {
      return readFileSync(this.path, "utf8");
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return null;
      throw e;
    }
  }

  write(text: string): void {
    const tmp = `${this.path}.${process.pid}.tmp`;
    const fd = openSync(tmp, "w", 0o600);
    try {
      writeSync(fd, text);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, this.path);
    const dir = openSync(dirname(this.path), "r");
    try {
      fsyncSync(dir);
    } finally {
      closeSync(dir);
    }
  }

  async locked<T>(fn: () => Promise<T>): Promise<T> {
    mkdirSync(dirname(this.path), { recursive: true });
    const lock = `${this.path}.lock`;
    for (let wait = 5; ; wait = Math.min(wait * 2, 200)) {
      try {
        closeSync(openSync(lock, "wx"));
        break;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
        try {
          if (Date.now() - statSync(lock).mtimeMs > this.staleMs) unlinkSync(lock);
        } catch {
          /* the holder released it meanwhile */
        }
        await new Promise((r) => setTimeout(r, wait));
      }
    }
    try {
      return await fn();
    } finally {
      unlinkSync(lock);
    }
  }
}
