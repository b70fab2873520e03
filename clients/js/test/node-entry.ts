import { test as nodeTest } from "node:test";
import { cases } from "./harness.js";
import "./all.js";

for (const c of cases) nodeTest(c.name, c.fn);
