import { test, eq, throws } from "./harness.js";
import cases from "./fixtures/canonical.json";
import { canonical, parseJson, pyAsciiString, pyFloat, pydanticFloat } from "../src/json.js";

const entries = cases as { text: string; canonical?: string; pydantic?: string }[];
const all = entries.filter((c) => c.canonical !== undefined) as { text: string; canonical: string }[];
const pyd = entries.filter((c) => c.pydantic !== undefined) as { text: string; pydantic: string }[];

test(`pydantic floats: ${pyd.length} values as pydantic-core writes them in messages`, () => {
  for (const c of pyd) eq(pydanticFloat(Number(c.text)), c.pydantic, `pydantic(${c.text})`);
});

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

test("pyAsciiString: json.dumps's default (ensure_ascii) escapes", () => {
  // json.dumps('a\x7f\u00e9\U0001f600\n"\\\x01/') in Python
  eq(pyAsciiString('a\x7f\u00e9\u{1f600}\n"\\\x01/'), '"a\\u007f\\u00e9\\ud83d\\ude00\\n\\"\\\\\\u0001/"', "escapes");
});
