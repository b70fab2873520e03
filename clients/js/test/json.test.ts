import { test, eq, throws } from "./harness.js";
import cases from "./fixtures/canonical.json";
import { canonical, parseJson, pyFloat } from "../src/json.js";

const all = cases as { text: string; canonical: string }[];

test(`canonical JSON: ${all.length} values (floats at every scale, nested docs) as Python's json.dumps writes them`, () => {
  for (const c of all) eq(canonical(parseJson(c.text)), c.canonical, `canonical(${c.text.slice(0, 60)})`);
});

test("parseJson: integers stay exact beyond 2^53 and ints stay distinct from floats", () => {
  const v = parseJson('{"seed": 9223372036854775807, "e": 4.0, "k": 4, "x": -0}') as Record<string, unknown>;
  eq(v["seed"], 9223372036854775807n, "seed");
  eq(v["e"], 4, "float");
  eq(v["k"], 4n, "int");
  eq(pyFloat(4), "4.0", "repr(4.0)");
  eq(canonical(parseJson("[4, 4.0, 4e0, -0.0]")), "[4,4.0,4.0,-0.0]", "ints and floats");
});

test("parseJson: malformed JSON, NaN, duplicates and trailing text are refused", () => {
  for (const bad of ["{", "[1,]", "NaN", '{"a":1,"a":2}', "1 2", '"\u0001"', "01", "1e400", '{"a" 1}']) {
    throws(() => parseJson(bad), /ConfigError/, `parseJson(${JSON.stringify(bad)})`);
  }
});
