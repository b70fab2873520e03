// Every test module, in order; imported by the Node and the browser entries.
import "./public-stream.test.js";
import "./hashing.test.js";
import "./json.test.js";
import "./tree.test.js";
import "./vectors.test.js";
import "./device.test.js";
import "./amplification.test.js";
import "./samplers.test.js";
