/**
 * shoal-device: the device side of shoal's differentially private federated
 * k-means, for browsers and Node. Implemented so far: tree rounds (lsh and
 * nettree encoders; local and shuffle models), signed-config verification,
 * sealing, the ledger. See README.md for what is not implemented yet.
 */

export { ConfigError, PrivacyError, ReportError, TransportError, TrustError } from "./errors.js";
export { canonical, parseJson, pyFloat, pydanticFloat, type JsonObject, type JsonValue } from "./json.js";
export { checkProtocol, parseTreeConfig, type Bound, type TreeConfig } from "./config.js";
export { PROTOCOL_VERSION, PROTOCOLS } from "./public-stream.js";
export * as publicStream from "./public-stream.js";
export { toBall, clipToBall, outside } from "./bounds.js";
export { treePublic, type TreePublic } from "./tree-public.js";
export { path, keyAt } from "./nets.js";
export { grrKeepNumerator, privunitNumerator } from "./exact.js";
export { BytesRandom, OsRandom, type DeviceRandom } from "./random.js";
export { select as privunitSelect, type PrivUnitParams } from "./privunit.js";
export {
  encodeTree, messageJson, messagesBinary, prepareTree,
  type DeviceMessage, type HistReport, type VecReport, type TreeRound, type TreeTrace,
} from "./tree.js";
export { configDigest, fingerprint, verifyConfig, type VerifiedConfig } from "./signing.js";
export { seal, sealedSubmission } from "./seal.js";
export { Ledger, LocalStorageLedgerStore, MemoryLedgerStore, fsum, type LedgerEntry, type LedgerStore, type Spend } from "./ledger.js";
export {
  blockVector, codebookJson, encodeLocalRefine, parseLocalRefineConfig, prepareLocalRefine,
  type CodebookMessage, type LocalRefineConfig, type LocalRefineRound,
} from "./local-refine.js";
export {
  encodeSketch, frequencies, noiseGrid, parseSketchConfig, prepareSketch, recordedBinary, sketchBinary, sketchJson,
  type SketchConfig, type SketchReport, type SketchRound,
} from "./sketch.js";
export {
  contribution, encodeShares, parseSecureSum, parseSharesConfig, sharesSubmission,
  type SecureSumParams, type SharesConfig,
} from "./secure-sum.js";
export { encodeCentral, encodeContinual, parseCuratorConfig, type CuratorConfig } from "./curator.js";
export { discreteGaussian, discreteLaplace, polya, poissonRational } from "./samplers.js";
export { Device, deviceEpsilon, type DeviceOptions } from "./device.js";
