import { test, eq, ok, throws } from "./harness.js";
import { reference } from "./reference.js";
import { binomPmf, closedFormEpsilon, halfUpperTail, numericalDelta, shuffleClaimHolds } from "../src/amplification.js";
import { parseJson } from "../src/json.js";
import { parseTreeConfig } from "../src/config.js";

const rel = (a: number, b: number) => (a === b ? 0 : Math.abs(a - b) / Math.max(Math.abs(b), 1e-300));

// The reference's delta is itself accurate to about 1e-15 absolute only: its tail term is
// 1 - sum(weights), and its per-count terms cancel. So: within 1e-9 relative or 4e-15 absolute.
test(`amplification: FMT21 numerical delta and closed form on ${reference.amplification.length} (eps0, n, eps) against Python`, () => {
  let worst = 0;
  for (const c of reference.amplification) {
    const d = numericalDelta(c.eps0, c.n, c.eps);
    const err = Math.abs(d - c.delta);
    ok(err <= 1e-9 * c.delta + 4e-15, `delta(${c.eps0}, ${c.n}, ${c.eps}) = ${d}, Python ${c.delta}`);
    if (c.delta > 1e-6) worst = Math.max(worst, rel(d, c.delta));
    if (c.boundary_delta === undefined) {
      const cf = closedFormEpsilon(c.eps0, c.n, 1e-6);
      const want = c["closed_form_1e-6"];
      if (want === null) eq(cf, null, `closed form applies to (${c.eps0}, ${c.n})?`);
      else ok(cf !== null && rel(cf, want) < 1e-12, `closed form (${c.eps0}, ${c.n}) = ${cf}, Python ${want}`);
    } else {
      ok(shuffleClaimHolds(c.eps0, c.n, c.eps, c.boundary_delta, "fmt21-numerical"), `the derived eps0 ${c.eps0} holds`);
      ok(!shuffleClaimHolds(c.eps0 + 0.01, c.n, c.eps, c.boundary_delta, "fmt21-numerical"), `eps0 + 0.01 does not`);
    }
  }
  ok(worst < 1e-9, `worst relative error where delta > 1e-6: ${worst}`);
});

test("amplification: binomial pieces (pmf sums to 1; Bin(c, 1/2) tails by symmetry)", () => {
  for (const [n, p] of [[10, 0.3], [1000, 0.01], [100000, Math.exp(-4)]] as const) {
    let s = 0;
    for (let x = 0; x <= n; x++) s += binomPmf(x, n, p);
    ok(Math.abs(s - 1) < 1e-12, `sum of Bin(${n}, ${p}) = ${s}`);
  }
  eq(halfUpperTail(0, 5), 1, "k <= 0");
  eq(halfUpperTail(6, 5), 0, "k > c");
  ok(Math.abs(halfUpperTail(3, 5) - 0.5) < 1e-15, "P(Bin(5, 1/2) >= 3) = 1/2");
  ok(Math.abs(halfUpperTail(2, 4) - 11 / 16) < 1e-15, "P(Bin(4, 1/2) >= 2) = 11/16");
});

test("amplification: a shuffle config is refused when its eps0 exceeds what its central claim allows", () => {
  const c = reference.tree.find((t) => t.name === "lsh-shuffle")!;
  const good = parseTreeConfig(parseJson(c.config_text));
  ok(good.model === "shuffle", "a shuffle config parses");
  const raw = parseJson(c.config_text) as Record<string, unknown>;
  const forged = { ...raw, epsilon: (raw["epsilon"] as number) + 0.05, eps_vec: (raw["eps_vec"] as number) + 0.05 };
  throws(() => parseTreeConfig(forged), /ConfigError: .*does not give/, "eps0 + 0.05");
  throws(() => parseTreeConfig({ ...raw, amplification_bound: "made-up" }), /ConfigError: .*amplification_bound/, "unknown bound");
  throws(() => parseTreeConfig({ ...raw, min_batch: 500n }), /ConfigError: .*does not give/, "a smaller batch");
});
