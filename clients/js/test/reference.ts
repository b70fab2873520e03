/** The Python reference values (scripts/reference.py writes fixtures/reference.json), typed. */

import raw from "./fixtures/reference.json";

export interface StreamCase {
  seed: string;
  label: string;
  encoded: string;
  bytes: string;
  words: string[];
  uniforms: number[];
  signs: number[];
  gaussians: number[];
  integers: Record<string, string[]>;
}

export interface TreeDevice {
  point: number[];
  ball: number[];
  path: string[][];
  keys: string[];
  level: number;
  seed_index: number;
  true_bucket: number;
  row: number;
  column: number;
  sign: number;
}

export interface TreeCase {
  name: string;
  config_text: string;
  projection_scale: number;
  public: {
    projection: number[] | null;
    shifts: number[];
    planes: number[];
    level_keys: string[];
    hist_seeds: string[];
    vec_key: string;
  };
  keep_numerator: number | null;
  vec_numerator: number | null;
  root_numerator: number | null;
  root_column: number;
  devices: TreeDevice[];
  privunit: {
    params: "vec" | "root";
    nonce: string;
    u: number[];
    candidates_head: number[][];
    candidates_last: number[];
    cap: number[];
  };
}

export interface Reference {
  protocol: number;
  two_pi: number;
  stream: StreamCase[];
  hash: {
    x: string[];
    mix64: string[];
    level_key: string;
    coords: number[][];
    node_keys: string[];
    coords1: number[];
    node_keys1: string[];
    seeds: string[];
    keys: string[];
    buckets: Record<string, number[]>;
  };
  calibration: {
    grr: { epsilon: number; buckets: number; keep: number }[];
    cap: { epsilon: number; candidates: number; cap: number; numerator: number }[];
  };
  tree: TreeCase[];
  amplification: { eps0: number; n: number; eps: number; delta: number; "closed_form_1e-6": number | null; boundary_delta?: number }[];
}

export const reference = raw as unknown as Reference;
