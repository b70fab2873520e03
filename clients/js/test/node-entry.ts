import { test as nodeTest } from "node:test";
import { cases } from "./harness.js";
import "./all.js";
import "./node-only.test.js";

const strict = process.env["SHOAL_STRICT"] === "1";
for (const c of cases) {
  if (c.todo !== undefined && !strict) nodeTest(c.name, { todo: c.todo }, c.fn);
  else nodeTest(c.name, c.fn);
}
