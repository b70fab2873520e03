import { test, eq, deepEq, ok, throws, ulps, hexOf } from "./harness.js";
import { reference } from "./reference.js";
import * as ps from "../src/public-stream.js";

const TOLERANCE_ULPS = 4; // docs/protocol/public-randomness.md, "Tolerance"

test("public stream: the spec's worked example of the SHAKE input (seed 1, label ab)", () => {
  eq(hexOf(ps.encode(1n, "ab")), "02000000" + "0100000000000000" + "02000000" + "6162", "encode(1, ab)");
});

test("public stream: the protocol version is the reference's", () => {
  eq(ps.PROTOCOL_VERSION, reference.protocol, "protocol");
  eq(2 * Math.PI, reference.two_pi, "2 pi is the same double");
});

test("public stream: seeds outside [0, 2^64) are refused", () => {
  throws(() => ps.encode(-1n, "x"), /ConfigError/, "negative seed");
  throws(() => ps.encode(1n << 64n, "x"), /ConfigError/, "seed 2^64");
});

for (const c of reference.stream) {
  const seed = BigInt(c.seed);
  const tag = `(seed ${c.seed}, label ${JSON.stringify(c.label)})`;

  test(`public stream ${tag}: input, bytes and words byte for byte`, () => {
    eq(hexOf(ps.encode(seed, c.label)), c.encoded, "encoded input");
    eq(hexOf(ps.streamBytes(seed, c.label, 200)), c.bytes, "200 stream bytes");
    eq(hexOf(ps.streamBytes(seed, c.label, 37)), c.bytes.slice(0, 74), "a shorter read is a prefix");
    deepEq(ps.words(seed, c.label, c.words.length).map(String), c.words, "words");
    eq(String(ps.key64(seed, c.label)), c.words[0], "key64 is the first word");
  });

  test(`public stream ${tag}: uniforms and signs bit exact`, () => {
    const u = ps.uniforms(seed, c.label, c.uniforms.length);
    for (let i = 0; i < u.length; i++) eq(u[i], c.uniforms[i], `uniform ${i}`);
    deepEq(Array.from(ps.signs(seed, c.label, c.signs.length)), c.signs, "signs");
  });

  test(`public stream ${tag}: integers below every bound, exact (rejection, no modulo bias)`, () => {
    for (const [bound, want] of Object.entries(c.integers)) {
      deepEq(ps.integersBelow(seed, c.label, BigInt(bound), want.length).map(String), want, `bound ${bound}`);
    }
  });

  test(`public stream ${tag}: 2001 Box-Muller Gaussians within ${TOLERANCE_ULPS} ulps`, () => {
    const g = ps.gaussians(seed, c.label, c.gaussians.length);
    let worst = 0;
    let exact = 0;
    for (let i = 0; i < g.length; i++) {
      const d = ulps(g[i]!, c.gaussians[i]!);
      worst = Math.max(worst, d);
      if (d === 0) exact++;
    }
    ok(worst <= TOLERANCE_ULPS, `worst Gaussian is ${worst} ulps from the reference`);
    // Odd n drops the last sine: the first 2000 of 2001 are the same as of 2000.
    const even = ps.gaussians(seed, c.label, 2000);
    for (let i = 0; i < 2000; i++) eq(even[i], g[i], `prefix ${i}`);
    ok(exact > g.length / 2, `only ${exact} of ${g.length} Gaussians are bit exact: not the same procedure`);
  });
}

test("public stream: integersBelow refuses bounds outside [1, 2^64]", () => {
  throws(() => ps.integersBelow(1n, "x", 0n, 3), /ConfigError/, "bound 0");
  throws(() => ps.integersBelow(1n, "x", (1n << 64n) + 1n, 3), /ConfigError/, "bound 2^64 + 1");
});

test("public stream: unit rows have norm 1 within an ulp or two", () => {
  const g = ps.gaussians(5n, "rows", 60);
  const u = ps.unitRows(g, 6);
  for (let r = 0; r < 10; r++) {
    let s = 0;
    for (let j = 0; j < 6; j++) s += u[6 * r + j]! ** 2;
    ok(Math.abs(Math.sqrt(s) - 1) < 4e-16, `row ${r} norm ${Math.sqrt(s)}`);
  }
});
