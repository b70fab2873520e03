import { test, eq, deepEq } from "./harness.js";
import { reference } from "./reference.js";
import { bucketHash, hadamardSign, nodeKey } from "../src/hashing.js";
import { addPair, fromPair, mix64Big, mix64Pair, mulPair, toPair, MASK64 } from "../src/u64.js";

const h = reference.hash;

test("mix64: bigint and (hi, lo) forms equal the Python SplitMix64 on 64 inputs", () => {
  const r = { hi: 0, lo: 0 };
  h.x.forEach((x, i) => {
    eq(String(mix64Big(BigInt(x))), h.mix64[i], `mix64Big(${x})`);
    const p = toPair(BigInt(x));
    mix64Pair(p.hi, p.lo, r);
    eq(String(fromPair(r.hi, r.lo)), h.mix64[i], `mix64Pair(${x})`);
  });
});

test("u64 pair arithmetic: products and sums mod 2^64 equal bigint's on 20000 random pairs", () => {
  const r = { hi: 0, lo: 0 };
  const buf = new Uint32Array(4);
  const edges = [0, 1, 0xffff, 0x10000, 0x7fffffff, 0x80000000, 0xffffffff];
  for (let i = 0; i < 20000; i++) {
    crypto.getRandomValues(buf);
    if (i < 2401) {
      // every combination of edge limbs first
      buf[0] = edges[i % 7]!; buf[1] = edges[Math.floor(i / 7) % 7]!;
      buf[2] = edges[Math.floor(i / 49) % 7]!; buf[3] = edges[Math.floor(i / 343) % 7]!;
    }
    const a = fromPair(buf[0]!, buf[1]!);
    const b = fromPair(buf[2]!, buf[3]!);
    mulPair(buf[0]!, buf[1]!, buf[2]!, buf[3]!, r);
    eq(fromPair(r.hi, r.lo), (a * b) & MASK64, `${a} * ${b}`);
    addPair(buf[0]!, buf[1]!, buf[2]!, buf[3]!, r);
    eq(fromPair(r.hi, r.lo), (a + b) & MASK64, `${a} + ${b}`);
  }
});

test("node keys: lattice nodes (6 coordinates, negative ones included) and binary prefixes", () => {
  const key = BigInt(h.level_key);
  deepEq(h.coords.map((c) => String(nodeKey(key, c))), h.node_keys, "lattice node keys");
  deepEq(h.coords1.map((c) => String(nodeKey(key, [c]))), h.node_keys1, "one-coordinate node keys");
});

test("OLH bucket hash for 2, 3, 7 and 2048 buckets", () => {
  for (const [g, want] of Object.entries(h.buckets)) {
    deepEq(h.seeds.map((s, i) => bucketHash(BigInt(s), BigInt(h.keys[i]!), Number(g))), want, `g = ${g}`);
  }
});

test("Hadamard sign: (-1)^popcount(r & c), against a bit-by-bit count", () => {
  for (let i = 0; i < 5000; i++) {
    const r = (i * 2654435761) >>> 12;
    const c = (i * 40503 + 17) >>> 0 & 0xfffff;
    let bits = 0;
    for (let v = r & c; v; v >>>= 1) bits += v & 1;
    eq(hadamardSign(r, c), bits % 2 ? -1 : 1, `H[${r}, ${c}]`);
  }
});
