import { cases } from "./harness.js";
import "./all.js";

interface Result {
  name: string;
  ok: boolean;
  todo?: string;
  error?: string;
  ms: number;
}

declare global {
  interface Window {
    shoalTests: () => Promise<Result[]>;
  }
}

window.shoalTests = async (): Promise<Result[]> => {
  const out: Result[] = [];
  for (const c of cases) {
    const t0 = performance.now();
    try {
      await c.fn();
      out.push({ name: c.name, ok: true, ms: performance.now() - t0, ...(c.todo ? { todo: c.todo } : {}) });
    } catch (e) {
      const error = e instanceof Error ? `${e.name}: ${e.message}\n${e.stack ?? ""}` : String(e);
      out.push({ name: c.name, ok: false, error, ms: performance.now() - t0, ...(c.todo ? { todo: c.todo } : {}) });
    }
  }
  return out;
};
