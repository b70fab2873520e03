import { test, eq, deepEq } from "./harness.js";
import { BytesRandom } from "../src/random.js";
import { factorialStops, runs, oversampled, poissonBlock } from "../src/samplers.js";

test("samplers: a factorial stop past twenty reads as the spec says (u64 1 -> U(20!) = 0; U(21) = 0; U(22) != 0: J = 22)", () => {
  const bytes = new Uint8Array(16);
  bytes[0] = 1; // u64 = 1
  bytes[8] = 1; // u32 = 1
  bytes.fill(0xff, 12, 16); // u32 = 2^32 - 1
  const rnd = new BytesRandom(bytes);
  deepEq(factorialStops(1, rnd), [22]);
  eq(rnd.used, 16);
});

test("samplers: runs carry a run across blocks and discard trials after the last failure", () => {
  // trials S S | F S | S F F ... with blocks of 2, 2, 4: runs 2, 2, 0.
  const stream = [true, true, false, true, true, false, false, true];
  let at = 0;
  const got = runs(3, (size) => stream.slice(at, (at += size)), (m) => (m === 3 ? 2 : m === 2 ? 2 : 4));
  deepEq(got, [2, 2, 0]);
  deepEq([oversampled(0), oversampled(8), poissonBlock(8)], [16, 29, 25]);
});
