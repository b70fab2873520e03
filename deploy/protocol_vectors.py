"""Conformance vectors of the wire protocol (issue 45, Build 4): ``protocol/vectors/*.json``.

A vector is one device answering one round: (the published config, the
device's point or records, the device's private random bytes) -> every public
object the device derives, the intermediates the spec names, and the exact
bytes it sends (JSON, the binary tree record, the sealed envelope). A device
in another language that reproduces every vector speaks the protocol
(``docs/protocol/vectors.md`` says how to read them).

    python -m shoal.deploy.protocol_vectors generate protocol/vectors
    python -m shoal.deploy.protocol_vectors check protocol/vectors

``generate`` writes one file per (kind, model, encoder), ``CASES`` cases each;
``check`` re-derives every case from its inputs and names the fields that
differ (``tests/protocol/test_vectors.py`` does the same in CI). A vector that
changes is a protocol change: the files carry ``protocol`` and the test refuses
files of another version than ``public_stream.PROTOCOL_VERSION``.

Only the device side (``shoal.client``, ``shoal.common``, signing) is used:
the expected server view is computed with the shared parsers of
``common/wire/messages.py`` and ``common/wire/binary.py``; the test checks that the
server's own kinds decode the messages to it.

The device's private bytes: the generator reads SHAKE-256 of the case's name
(a fixed, public stream: these bytes are examples, never a real device's), lets
the device run on them under ``device_random.replay``, and stores exactly the
bytes it read. Re-deriving replays the stored bytes and fails if the device
reads more or fewer.

Over 300 lines: every kind's inputs and intermediates are described here, so
that the vectors have one definition.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import random
import re
import struct
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from shoal.client.device import wire_body
from shoal.client.kinds import device_kind
from shoal.client.participation import Participation
from shoal.common.bounds import PublicBound
from shoal.common.kinds import dump_config, kind_name, parse_config
from shoal.common.kinds.tree_nets import LatticeNet, node_space
from shoal.common.kinds.tree_randomness import PublicRandomness
from shoal.common.mechanisms.hadamard import hadamard_sign
from shoal.common.mechanisms.privunit import PrivUnitParams, cap_members
from shoal.common.mechanisms.privunit_codebook import candidates
from shoal.common.randomness import device_random, public_stream
from shoal.common.randomness.hashing import bucket_hash
from shoal.common.wire.binary import decode_reports, tree_rows
from shoal.common.wire.envelope import open_sealed
from shoal.common.wire.messages import ReportBatch
from shoal.common.wire.models import (
    CodebookMessage,
    DeviceMessage,
    PointMessage,
    ShareMessage,
    SketchMessage,
    StreamMessage,
    share_array,
)
from shoal.common.wire.signing import _DOMAIN, SigningKey, canonical, fingerprint, verify_config

CASES = 20
CENTERED_CASES = 4  # partition rounds whose hyperplanes pass through a ``center``: cases CASES.. (added, none changed)
COMMAND = "python -m shoal.deploy.protocol_vectors generate protocol/vectors"
SHUFFLER = "https://shuffler.invalid"  # a Participation needs one; nothing is sent
INLINE = 16  # arrays up to this many entries are stored whole; larger ones as shape, sha256 and head
HEAD = 6
MIN_DEVICES = 100_000  # secure-sum rounds: the public floor (fewer shares a device than at 1000: smaller vectors)

# (kind, model, encoder): every combination the server accepts
COMBOS: tuple[tuple[str, str, str], ...] = (
    ("tree", "local", "lsh"), ("tree", "local", "nettree"), ("tree", "shuffle", "lsh"), ("tree", "shuffle", "nettree"),
    ("sketch", "local", "sketch"), ("sketch", "shuffle", "sketch"),
    ("refine", "shuffle", "secure-sum"), ("partition", "shuffle", "secure-sum"), ("elbow", "shuffle", "secure-sum"),
    ("local_refine", "local", "privunit"), ("central", "curator", "points"), ("continual", "curator", "stream"),
)


def file_name(kind: str, model: str, encoder: str) -> str:
    return f"{kind}-{model}-{encoder}.json"


# ---------------------------------------------------------------- summaries

def array(a: Any, dtype: str = "<f8") -> dict[str, Any]:
    """An array as the vectors state it: whole up to INLINE entries, else its
    shape, the SHA-256 of its little-endian bytes in ``dtype`` (row-major) and
    its first HEAD entries."""
    arr = np.ascontiguousarray(np.asarray(a), dtype=dtype)
    flat = arr.reshape(-1)
    py: Callable[[Any], Any] = _float if arr.dtype.kind == "f" else int
    out: dict[str, Any] = {"shape": list(arr.shape), "dtype": dtype,
                           "sha256": hashlib.sha256(arr.tobytes()).hexdigest()}
    if flat.size <= INLINE:
        out["values"] = [py(v) for v in flat]
    else:
        out["head"] = [py(v) for v in flat[:HEAD]]
    return out


def _float(v: Any) -> float | str:
    """A float as JSON takes it: "nan", "inf" and "-inf" as strings (a central
    round's unused record slots are NaN)."""
    f = float(v)
    return f if np.isfinite(f) else str(f)


def words_array(a: Any) -> dict[str, Any]:
    return array(np.asarray(a, dtype=np.uint64), "<u8")


# ---------------------------------------------------------------- the spec's reads, in pure Python

class SpecReader:
    """The device's reads of ``docs/protocol/vectors.md``, written from the page
    (not from numpy), to state the random decisions in each vector and to check
    that the page describes what the Python device does."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        out = self.data[self.pos:self.pos + n]
        if len(out) < n:
            raise ValueError("read past the device's private bytes")
        self.pos += n
        return out

    def u32(self) -> int:
        return int.from_bytes(self.take(4), "little")

    def u64(self) -> int:
        return int.from_bytes(self.take(8), "little")

    def double(self) -> float:
        return (self.u64() >> 11) * 2.0 ** -53

    def below(self, bound: int) -> int:
        """A uniform integer in [0, bound): Lemire's multiply-and-reject on a u32
        when bound <= 2^32, on a u64 otherwise (bound 2^32 and 2^64: the raw word)."""
        r = bound - 1
        if r == 0:
            return 0
        bits = 32 if r <= 0xFFFFFFFF else 64
        if r == (1 << bits) - 1:
            return self.u32() if bits == 32 else self.u64()
        draw = self.u32 if bits == 32 else self.u64
        m = draw() * bound
        low = m & ((1 << bits) - 1)
        if low < bound:
            threshold = ((1 << bits) - bound) % bound
            while low < threshold:
                m = draw() * bound
                low = m & ((1 << bits) - 1)
        return m >> bits


def privunit_draws(r: SpecReader, params: PrivUnitParams) -> dict[str, Any]:
    """PrivUnit's reads for one device (``privunit.select``): the sign coin of the
    rounding to the sphere, the nonce, the cap coin, then both picks."""
    out: dict[str, Any] = {"sphere_coin": r.double(), "nonce": f"{r.u64():016x}"}
    cap_draw = r.below(1 << 32)
    out.update(cap_draw=cap_draw, in_cap=cap_draw < params.cap_numerator, pick_in_cap=r.below(params.cap),
               pick_outside=r.below(params.candidates - params.cap))
    return out


def privunit_facts(point: np.ndarray, params: PrivUnitParams, key: int, nonce: str, index: int,
                   draws: dict[str, Any]) -> dict[str, Any]:
    """What a device's PrivUnit report rests on: the sphere point it rounded to,
    the picked candidate and its score, whether it is in the cap."""
    norm = float(np.linalg.norm(point))
    unit = point / norm if norm > 0 else np.eye(point.size)[0]
    u = unit * (1.0 if draws["sphere_coin"] < (1 + min(norm, 1.0)) / 2 else -1.0)
    n = np.array([int(nonce, 16)], dtype=np.uint64)
    cand = candidates(key, n, np.array([index]), params.dim, params.candidates)[0]
    member = bool(cap_members(n, np.array([index]), u[None, :], params, key)[0])
    return {"norm": norm, "sphere_point": array(u), "candidate": array(cand), "score": float(cand @ u),
            "in_cap": member, "params": {"candidates": params.candidates, "cap": params.cap,
                                         "cap_numerator": params.cap_numerator, "dim": params.dim}}


def token_reads(reads: list[list[Any]], data: bytes) -> list[dict[str, Any]]:
    """The raw-byte reads (message ids, item tokens, ephemeral keys, AEAD nonces) with their offsets."""
    size = {"u64": 8, "u32": 4, "double": 8}
    pos, out = 0, []
    for op, count in reads:
        n = int(op.split(":")[1]) if op.startswith("bytes:") else size[op]
        for _ in range(count):
            if op.startswith("bytes:"):
                out.append({"offset": pos, "bytes": n, "hex": data[pos:pos + n].hex()})
            pos += n
    return out


# ---------------------------------------------------------------- one case

def published(inputs: dict[str, Any]) -> tuple[dict[str, Any], bytes, str, dict[str, Any]]:
    """The signed config as a device fetches it and what it checks: (outputs, X25519 key, digest, body)."""
    sk = SigningKey(Ed25519PrivateKey.from_private_bytes(bytes.fromhex(inputs["server_keys"]["ed25519_private"])))
    xk = X25519PrivateKey.from_private_bytes(bytes.fromhex(inputs["server_keys"]["x25519_private"]))
    x_pub = xk.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    body = sk.signed_config(inputs["round_id"], inputs["config"], base64.b64encode(x_pub).decode())
    signed = {k: body[k] for k in ("round_id", "config", "server_public_key", "signing_key")}
    verified = verify_config(body, inputs["round_id"], sk.fingerprint)
    out = {"body": body, "signed_bytes": (_DOMAIN + canonical(signed)).decode(), "fingerprint": sk.fingerprint,
           "config_canonical": canonical(inputs["config"]).decode(),
           "config_digest_input": canonical({"config": inputs["config"],
                                             "server_public_key": body["server_public_key"]}).decode(),
           "config_digest": verified.digest}
    return out, verified.server_public_key, verified.digest, body


def run_device(inputs: dict[str, Any], config: Any, key: bytes, digest: str,
               data: bytes) -> tuple[list[str], device_random.ReplaySource]:
    """The device's recorded message(s), built by its kind under the replayed bytes."""
    part = Participation(inputs["round_id"], key, digest, SHUFFLER, True, True)
    x = np.asarray(inputs["points"], dtype=np.float64)
    with device_random.replay(data) as source:
        _, make = device_kind(kind_name(inputs["config"])).plan(part, config, x if x.shape[0] > 1 else x[0])
        made = make()
    return ([made] if isinstance(made, str) else list(made)), source


def wire(recorded: str, server_private: X25519PrivateKey, round_id: str) -> dict[str, Any]:
    """What travels for one recorded message: the body and where it goes; for a
    sealed submission each envelope opened with the server's key."""
    out: dict[str, Any] = {"recorded": recorded}
    body, where = wire_body(recorded, True, round_id)
    out["to"] = where
    if where == "binary":
        out["binary_hex"] = body.hex()
        alternative, alt_where = wire_body(recorded, False, round_id)
        if alt_where == "json":  # the same report as JSON (a device with binary=False)
            out["json"] = alternative.decode()
        return out
    if where == "json":
        out["json"] = body.decode()
        return out
    sub = json.loads(recorded)
    boxes = [sub["sealed"]] if "sealed" in sub else sub["parts"]
    out["envelopes"] = []
    for b64 in boxes:
        raw = base64.b64decode(b64)
        # The ciphertext itself is in ``recorded`` (base64): stated here by length and digest only.
        out["envelopes"].append({"version": raw[0], "ephemeral_public": raw[1:33].hex(), "nonce": raw[33:45].hex(),
                                 "ciphertext_and_tag_bytes": len(raw) - 45,
                                 "ciphertext_and_tag_sha256": hashlib.sha256(raw[45:]).hexdigest(),
                                 "plaintext": open_sealed(raw, server_private, round_id).decode()})
    return out


def derive(inputs: dict[str, Any]) -> dict[str, Any]:
    """Every output of a case from its inputs (what the test re-derives)."""
    pub, key, digest, _ = published(inputs)
    config = parse_config(inputs["config"])
    data = bytes.fromhex(inputs["device_random"])
    recorded, source = run_device(inputs, config, key, digest, data)
    if source.position != len(data):
        raise ValueError(f"the device read {source.position} of the case's {len(data)} private bytes")
    server_private = X25519PrivateKey.from_private_bytes(bytes.fromhex(inputs["server_keys"]["x25519_private"]))
    messages = [wire(m, server_private, inputs["round_id"]) for m in recorded]
    x = np.asarray(inputs["points"], dtype=np.float64)
    out: dict[str, Any] = {"published": pub, "ball": array(config.bound.to_ball(x))}
    out.update(KIND_FACTS[kind_name(inputs["config"])](config, x, messages, data))
    out["reads"] = source.reads
    out["tokens"] = token_reads(source.reads, data)
    out["messages"] = messages
    return out


def plaintext(message: dict[str, Any]) -> list[str]:
    """The message JSON(s) the server reads, sealed or not."""
    if "envelopes" in message:
        return [e["plaintext"] for e in message["envelopes"]]
    return [message["json"]]


# ---------------------------------------------------------------- per kind

def tree_facts(config: Any, x: np.ndarray, messages: list[dict[str, Any]], data: bytes) -> dict[str, Any]:
    public = PublicRandomness.from_config(config)
    space = node_space(config)
    ball = config.bound.to_ball(x)
    t = config.levels
    pub: dict[str, Any] = {"level_keys": words_array(public.level_keys), "hist_seeds": words_array(public.hist_seeds),
                           "vec_key": f"{public.vec_key:016x}"}
    inter: dict[str, Any] = {}
    if config.encoder == "nettree":
        pub["shifts"] = array(public.shifts)
        if public.projection is not None:
            pub["projection"] = array(public.projection)
        assert isinstance(space, LatticeNet)
        inter["projected"] = array(space.project(ball))
    else:
        pub["planes"] = array(public.planes)
        inter["plane_products"] = array(ball @ public.planes.T)
    paths = space.paths(ball) if t > 0 else []
    inter["path"] = [[int(v) for v in np.asarray(p[0]).reshape(-1)] for p in paths]
    inter["node_keys"] = [f"{int(space.keys(j, paths[j][:1])[0]):016x}" for j in range(len(paths))]
    # The random decisions, read from the device's bytes as docs/protocol/vectors.md says.
    r = SpecReader(data)
    draws: dict[str, Any] = {}
    root = True
    if config.root_share < 1:
        draws["root_coin"] = r.double()
        root = draws["root_coin"] < config.root_share
    draws["root"] = root
    hp, vp, rp = config.hist_params, config.vec_params, config.root_params
    sends_hist = sends_vec = not root
    if not root and config.hist_only_share > 0:
        draws["hist_only_coin"] = r.double()
        sends_hist = draws["hist_only"] = draws["hist_only_coin"] < config.hist_only_share
        sends_vec = not sends_hist
    if sends_hist and hp is not None:
        level, seed = 1 + r.below(t), r.below(hp.pool)
        true = int(bucket_hash(public.hist_seeds[[seed]], space.keys(level, paths[level][:1]), hp.buckets)[0])
        keep_draw = r.below(1 << 32)
        other = r.below(hp.buckets - 1)
        keep = keep_draw < hp.keep_numerator
        draws["hist"] = {"level": level, "seed_index": seed, "true_bucket": true, "keep_draw": keep_draw,
                         "keep_numerator": hp.keep_numerator, "keep": keep, "other_draw": other,
                         "bucket": true if keep else (true + 1 + other) % hp.buckets}
    params = rp if root else (vp if sends_vec else None)
    if params is not None and (root or t > 0):
        level = 0 if root else 1 + r.below(t)
        row = r.below(1 << config.vec_columns_log2)
        node_key = int(space.keys(level, (space.root() if level == 0 else paths[level][:1]))[0])
        column = node_key >> (64 - config.vec_columns_log2)
        sign = float(hadamard_sign(np.array([row]), np.array([column]))[0])
        pu = privunit_draws(r, params)
        msg = DeviceMessage.model_validate_json(plaintext(messages[0])[0])
        assert msg.vec is not None
        draws["vec"] = {"level": level, "row": row, "column": column, "hadamard_sign": sign, **pu,
                        "index": msg.vec.index, "signed_point": array(ball[0] * sign)}
        draws["vec"]["privunit"] = privunit_facts(ball[0] * sign, params, public.vec_key, pu["nonce"], msg.vec.index, pu)
    draws["after_randomisers"] = r.pos
    check_tree_message(messages[0], config, draws)
    return {"public": pub, "intermediates": inter, "draws": draws, "server": tree_server(messages[0], config)}


def check_tree_message(message: dict[str, Any], config: Any, draws: dict[str, Any]) -> None:
    """The spec's reads give the message the Python device sent (else the page is wrong)."""
    msg = DeviceMessage.model_validate_json(plaintext(message)[0])
    if "hist" in draws:
        h = draws["hist"]
        assert msg.hist is not None and (msg.hist.level, msg.hist.seed_index, msg.hist.bucket) == (
            h["level"], h["seed_index"], h["bucket"]), (msg.hist, h)
    else:
        assert msg.hist is None
    if "vec" in draws:
        v = draws["vec"]
        assert msg.vec is not None and (msg.vec.level, msg.vec.row, msg.vec.nonce) == (v["level"], v["row"], v["nonce"])
        assert v["privunit"]["in_cap"] == v["in_cap"], "the picked index is not on the side of the cap the coin chose"


def tree_server(message: dict[str, Any], config: Any) -> dict[str, Any]:
    """The report as the server stores it (``wire.binary.TREE_ROW``) from the JSON and the binary body."""
    msg = DeviceMessage.model_validate_json(plaintext(message)[0])
    row = tree_rows(ReportBatch.from_messages([msg], config)).tobytes().hex()
    out: dict[str, Any] = {"fields": msg.model_dump(mode="json"), "tree_row": row}
    if "binary_hex" in message:
        ids, batch = decode_reports(bytes.fromhex(message["binary_hex"]), config.round_id)
        assert ids == [msg.message_id] and tree_rows(batch).tobytes().hex() == row
    return out


def shares_facts(name: str, config: Any, x: np.ndarray, messages: list[dict[str, Any]],
                 data: bytes) -> dict[str, Any]:
    """Secure-sum kinds: the contribution, its fixed point, the noise share, the shares."""
    from shoal.common.mechanisms import secure_sum

    params = config.secure_sum
    if name == "sketch":
        from shoal.common.mechanisms.sketch import record_features

        values = record_features(config.bound.to_ball(x.reshape(1, -1)), config.omega())
        pub = {"omega": array(config.omega())}
    else:
        values = CONTRIBUTIONS[name](x.reshape(1, -1), config)
        pub = {"hyperplanes": array(config.hyperplanes)} if name == "partition" else {}
    with device_random.replay(data) as source:
        rng = device_random.generator()
        fixed = secure_sum.fixed_point(values, params, rng)
        noise = secure_sum.noise_shares(1, params, rng)
        shares = secure_sum.split(fixed + noise, params, rng)
    msgs = [ShareMessage.model_validate_json(p) for p in plaintext(messages[0])]
    sent = share_array(msgs, params)
    assert np.array_equal(sent, shares[0]), "the shares sent are not fixed point + noise, split (secure_sum.py)"
    inter = {"contribution": array(values), "scale": params.scale, "modulus_bits": params.bits,
             "shares": params.shares, "fixed_point": array(fixed, "<i8"), "noise": array(noise, "<i8"),
             "split": words_array(shares[0]), "randomiser_bytes": source.position}
    return {"public": pub, "intermediates": inter,
            "server": {"rows": words_array(sent)}}


def _contributions() -> dict[str, Callable[[np.ndarray, Any], np.ndarray]]:
    from shoal.common.kinds import elbow, partition, refine

    return {"refine": refine.contributions, "partition": partition.contributions,
            "elbow": elbow.contributions}


CONTRIBUTIONS = _contributions()


def sketch_facts(config: Any, x: np.ndarray, messages: list[dict[str, Any]], data: bytes) -> dict[str, Any]:
    if config.secure_sum is not None:
        return shares_facts("sketch", config, x, messages, data)
    from shoal.common.mechanisms.sketch import record_features
    from shoal.common.wire.binary import sketch_message
    from shoal.common.wire.models import sketch_rows

    msg = (sketch_message(bytes.fromhex(messages[0]["binary_hex"]), config.round_id) if "binary_hex" in messages[0]
           else SketchMessage.model_validate_json(messages[0]["json"]))
    if "json" in messages[0]:
        assert SketchMessage.model_validate_json(messages[0]["json"]) == msg, "the binary and JSON sketches differ"
    ball = config.bound.to_ball(x)
    return {"public": {"omega": array(config.omega())},
            "intermediates": {"record_features": array(record_features(ball, config.omega())),
                              "sketch": array(msg.sketch)},
            "server": {"fields": msg.model_dump(mode="json"), "rows": array(sketch_rows([msg], config.sketch))}}


def local_refine_facts(config: Any, x: np.ndarray, messages: list[dict[str, Any]], data: bytes) -> dict[str, Any]:
    from shoal.common.kinds.local_refine import block_vectors
    from shoal.common.wire.models import codebook_rows

    block = block_vectors(x.reshape(1, -1), config)[0]
    msg = CodebookMessage.model_validate_json(messages[0]["json"])
    r = SpecReader(data)
    pu = privunit_draws(r, config.privunit)
    assert pu["nonce"] == msg.nonce, (pu, msg)
    pu["privunit"] = privunit_facts(block, config.privunit, config.codebook_key, msg.nonce, msg.index, pu)
    assert pu["privunit"]["in_cap"] == pu["in_cap"]
    pu["after_randomisers"] = r.pos
    return {"public": {"codebook_key": f"{config.codebook_key:016x}"},
            "intermediates": {"block_vector": array(block)}, "draws": pu,
            "server": {"fields": msg.model_dump(mode="json"),
                       "rows": words_array(codebook_rows([msg], config.privunit.candidates))}}


def central_facts(config: Any, x: np.ndarray, messages: list[dict[str, Any]], data: bytes) -> dict[str, Any]:
    from shoal.common.wire.models import point_rows

    msg = PointMessage.model_validate_json(plaintext(messages[0])[0])
    return {"public": {}, "intermediates": {},
            "server": {"fields": msg.model_dump(mode="json"),
                       "rows": array(point_rows([msg], config.dim, config.records_per_device))}}


def continual_facts(config: Any, x: np.ndarray, messages: list[dict[str, Any]], data: bytes) -> dict[str, Any]:
    fields = [StreamMessage.model_validate_json(plaintext(m)[0]).model_dump(mode="json") for m in messages]
    return {"public": {}, "intermediates": {}, "server": {"fields": fields}}


KIND_FACTS: dict[str, Callable[[Any, np.ndarray, list[dict[str, Any]], bytes], dict[str, Any]]] = {
    "tree": tree_facts, "sketch": sketch_facts, "refine": lambda *a: shares_facts("refine", *a),
    "partition": lambda *a: shares_facts("partition", *a), "elbow": lambda *a: shares_facts("elbow", *a), "local_refine": local_refine_facts, "central": central_facts,
    "continual": continual_facts,
}


# ---------------------------------------------------------------- generating cases

def case_random(label: str) -> random.Random:
    """The generator's choices for a case (public, from its name)."""
    return random.Random(int.from_bytes(hashlib.sha256(label.encode()).digest()[:8], "little"))


def stream(label: str, n: int) -> bytes:
    return hashlib.shake_256(b"shoal conformance device bytes\n" + label.encode()).digest(n)


def make_config(kind: str, model: str, encoder: str, i: int, rnd: random.Random, round_id: str) -> tuple[Any, int, int]:
    """A config for case i of a combination, the dimension, and the records per device."""
    # d = 100 in the last two cases of a file, the last one only where a device's shares grow with d
    big = CASES > i >= CASES - (1 if kind in ("refine", "partition", "elbow") or model == "shuffle" and kind == "sketch" else 2)
    d = 100 if big else rnd.choice([2, 3, 4, 5, 8])
    k = rnd.choice([2, 3, 4])
    eps = rnd.choice([0.5, 1.0, 2.0, 4.0, 8.0])
    seed = rnd.randrange(1 << 63)
    radius = rnd.choice([1.0, 2.5, 10.0])
    bound = (PublicBound(radius=radius) if i % 3 else
             PublicBound(low=tuple(-radius * (1 + j % 2) for j in range(d)), high=tuple(radius for _ in range(d))))
    centers = np.array([[rnd.uniform(-0.7, 0.7) for _ in range(d)] for _ in range(k)])
    centers /= np.maximum(1.0, np.linalg.norm(centers, axis=1, keepdims=True))
    records = 1
    if kind == "tree":
        from shoal.common.kinds.tree import checked_encoder, checked_model, derive_config

        extra: dict[str, Any] = {}
        if model == "shuffle":
            extra = {"delta": 1e-6, "min_batch": rnd.choice([2000, 10000])}
        cfg = derive_config(rnd.choice([1000, 10000, 100000]), d, k, eps, encoder=checked_encoder(encoder), bound=bound,
                            seed=seed, model=checked_model(model), round_id=round_id, **extra)
        if i % 4 == 1:  # more root devices, so that both branches appear
            from dataclasses import replace

            cfg = replace(cfg, root_share=0.5)
        return cfg, d, 1
    if kind == "sketch":
        from shoal.common.kinds.sketch import derive_sketch_round

        size = rnd.choice([4, 8, 16]) if not big else 32
        if model == "local":
            records = rnd.choice([1, 1, 2, 3])
            return derive_sketch_round(1000, d, k, eps, bound=bound, seed=seed, round_id=round_id, size=size), d, records
        return derive_sketch_round(10000, d, k, eps, bound=bound, seed=seed, model="shuffle", delta=1e-6,
                                   min_devices=MIN_DEVICES, round_id=round_id, size=size), d, 1
    if kind == "refine":
        from shoal.common.kinds.refine import derive_refine

        return derive_refine("parent", centers, bound, eps, 1e-6, MIN_DEVICES, round_id=round_id,
                             split=rnd.choice([1, 1, 2]), seed=seed), d, 1
    if kind == "partition":
        from shoal.common.kinds.partition import derive_partition

        return derive_partition(10000, d, k, eps, 1e-6, bound, MIN_DEVICES, seed=seed, round_id=round_id,
                                bits=1 if big else rnd.choice([1, 2, 3])), d, 1  # cases >= CASES: ``centred_case``
    if kind == "elbow":
        from shoal.common.kinds.elbow import derive_elbow

        return derive_elbow("parent", centers, bound, rnd.choice(["kmeans", "kmedian"]), eps, 1e-6, MIN_DEVICES,
                            round_id=round_id), d, 1
    if kind == "local_refine":
        from shoal.common.kinds.local_refine import derive_local_refine

        return derive_local_refine("parent", centers, bound, eps, seed, round_id=round_id,
                                   split=rnd.choice([1, 1, 2])), d, 1
    if kind == "central":
        from shoal.common.kinds.central import derive_central_round

        records = rnd.choice([1, 1, 2, 3])
        return derive_central_round(10000, d, k, eps, 1e-6, bound, seed=seed, round_id=round_id,
                                    records_per_device=records), d, rnd.randint(1, records)
    from shoal.common.errors import ConfigError
    from shoal.common.kinds.continual import derive_continual_round

    d = min(d, 8)  # a continual round keeps a dense net per level: d <= 8
    bound = PublicBound(radius=radius)
    for levels in range(rnd.choice([1, 2, 3]), 0, -1):
        try:
            return derive_continual_round(d, k, eps, rnd.choice([0.0, 1e-6]), bound, 64, levels=levels, seed=seed,
                                          round_id=round_id), d, 1
        except ConfigError:
            continue
    raise ConfigError(f"no continual round in dimension {d}")


def centred_case(config: Any, points: list[list[float]]) -> tuple[Any, list[list[float]]]:
    """A partition case whose center decides the device's bucket: the point moved to |x| <= 0.6 in the
    ball and the center at 1.5 x, so <x - center, h> = -<x, h> / 2 flips every bit of the code (a device
    that ignores the center answers another bucket, and the case names the difference)."""
    from dataclasses import replace

    from shoal.common.kinds.partition import codes

    x = config.bound.to_ball(np.asarray(points, dtype=np.float64))
    norm = float(np.linalg.norm(x))
    if norm > 0.6:
        points = np.round(config.bound.from_ball(x * (0.6 / norm)), 6).tolist()
        x = config.bound.to_ball(np.asarray(points, dtype=np.float64))
    config = replace(config, center=tuple(round(float(v), 6) for v in 1.5 * x[0]))
    if (codes(x, config) == codes(x, replace(config, center=()))).any():
        raise AssertionError(f"the center of {config.round_id} does not change the device's bucket")
    return config, points


def make_case(kind: str, model: str, encoder: str, i: int) -> dict[str, Any]:
    name = f"{kind}-{model}-{encoder}-{i:02d}"
    rnd = case_random(name)
    round_id = f"r{i:02d}-{kind}"[:32]
    config, d, records = make_config(kind, model, encoder, i, rnd, round_id)
    scale = (config.bound.radius if config.bound.radius is not None
             else max(abs(v) for v in (*config.bound.low, *config.bound.high)))
    # Points inside and outside the bound (clipped), a few exactly at the origin or on an axis.
    stretch = rnd.choice([0.2, 0.6, 0.9, 1.5, 4.0])
    points = [[round(rnd.gauss(0, 1) * scale * stretch / np.sqrt(d), 6) for _ in range(d)] for _ in range(records)]
    if i == 3:
        points = [[0.0] * d for _ in range(records)]
    if kind == "partition" and i >= CASES:
        config, points = centred_case(config, points)
    keys = {"x25519_private": hashlib.sha256(f"{name} x25519".encode()).hexdigest(),
            "ed25519_private": hashlib.sha256(f"{name} ed25519".encode()).hexdigest()}
    inputs: dict[str, Any] = {"round_id": round_id, "config": dump_config(kind, config), "server_keys": keys,
                              "points": points, "device_random": ""}
    # Run on a long stream, keep the bytes the device read, and derive again from exactly those.
    pub, key, digest, _ = published(inputs)
    _, source = run_device(inputs, parse_config(inputs["config"]), key, digest, stream(name, 1 << 20))
    inputs["device_random"] = stream(name, source.position).hex()
    return {"name": name, "inputs": inputs, "outputs": derive(inputs)}


def vector_file(kind: str, model: str, encoder: str) -> dict[str, Any]:
    return {
        "protocol": public_stream.PROTOCOL_VERSION, "kind": kind, "model": model, "encoder": encoder,
        "about": "Conformance vectors of the shoal wire protocol: a device that reproduces every output of every "
                 "case from its inputs speaks this protocol version. How to read them: docs/protocol/vectors.md.",
        "generated_by": COMMAND,
        "cases": [make_case(kind, model, encoder, i)
                  for i in range(CASES + (CENTERED_CASES if kind == "partition" else 0))],
    }


def dumps(value: Any) -> str:
    return json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


def generate(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for combo in COMBOS:
        path = folder / file_name(*combo)
        path.write_text(dumps(vector_file(*combo)))
        written.append(path)
    return written


# ---------------------------------------------------------------- checking

#: Fields built from inner products or norms (whose summation order the spec leaves free) or from the sketch's
#: phases: compared within (ulps, absolute), as docs/protocol/vectors.md "Exactness" says and the TypeScript
#: test does (clients/js/test/vectors.test.ts); the SHA-256 of such an array is then not compared (one ulp
#: changes it). Found on an AMD EPYC after vectors made on an Intel Xeon: numpy's dot, norm and the sketch's
#: matrix product sum in a CPU-dependent order (SIMD width), every other field bit for bit the same.
TOLERANT = (
    (re.compile(r"\.privunit\.(norm|score)$"), 8, 1e-13),
    (re.compile(r"\.privunit\.sphere_point\.(head|values)\[\d+\]$"), 4, 1e-15),
    (re.compile(r"\.intermediates\.(record_features|contribution)\.(head|values)\[\d+\]$"), 8, 1e-12),
    # Box-Muller normals (the spec's one transcendental step, ``public_stream.box_muller``): log and cos
    # come from the platform's libm (numpy's AVX-512 SVML on one machine, glibc on another), each within
    # an ulp of the true value, so the objects built from them agree to a few ulps, not bit for bit.
    (re.compile(r"\.(public\.(planes|projection|omega)|draws\.privunit\.candidate)\.(head|values)\[\d+\]$"), 16,
     1e-13),
)
UNCOMPARED = re.compile(r"(\.privunit\.sphere_point|\.intermediates\.(record_features|contribution)"
                        r"|\.public\.(planes|projection|omega)|\.draws\.privunit\.candidate)\.sha256$")


def _ulps(a: float, b: float) -> float:
    """How many binary64 steps apart two finite floats are (0 for equal values)."""
    if a == b:
        return 0.0
    ia, ib = (struct.unpack("<q", struct.pack("<d", x))[0] for x in (a, b))
    ia, ib = (i if i >= 0 else -(i & 0x7FFFFFFFFFFFFFFF) for i in (ia, ib))
    return float(abs(ia - ib))


def differences(expected: Any, actual: Any, where: str = "") -> list[str]:
    """The paths at which two JSON values differ: exact (floats by value, strings by character), except the
    ``TOLERANT`` fields, within their ulps or absolute difference, and the ``UNCOMPARED`` digests."""
    if UNCOMPARED.search(where):
        return []
    for pattern, ulps, absolute in TOLERANT:
        if pattern.search(where) and isinstance(expected, float) and isinstance(actual, float):
            if abs(expected - actual) <= absolute or _ulps(expected, actual) <= ulps:
                return []
            return [f"{where}: {expected!r} != derived {actual!r} (beyond {ulps} ulps and {absolute:g})"]
    if isinstance(expected, dict) and isinstance(actual, dict):
        out = [f"{where}.{k}: missing" for k in expected.keys() - actual.keys()]
        out += [f"{where}.{k}: unexpected" for k in actual.keys() - expected.keys()]
        for k in sorted(expected.keys() & actual.keys()):
            out += differences(expected[k], actual[k], f"{where}.{k}")
        return out
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return [f"{where}: {len(expected)} entries, derived {len(actual)}"]
        return [d for i, (e, a) in enumerate(zip(expected, actual, strict=True)) for d in differences(e, a, f"{where}[{i}]")]
    if type(expected) is not type(actual) or expected != actual:
        return [f"{where}: {str(expected)[:80]!r} != derived {str(actual)[:80]!r}"]
    return []


def check_case(case: dict[str, Any]) -> list[str]:
    """The fields of a stored case that its inputs no longer derive (JSON round trip on both sides)."""
    return differences(case["outputs"], json.loads(json.dumps(derive(case["inputs"]))), case["name"])


def check(folder: Path) -> list[str]:
    problems = []
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text())
        if data["protocol"] != public_stream.PROTOCOL_VERSION:
            problems.append(f"{path.name}: protocol {data['protocol']}, this build speaks "
                            f"{public_stream.PROTOCOL_VERSION}")
        for case in data["cases"]:
            problems += check_case(case)
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shoal.deploy.protocol_vectors", description=__doc__.split("\n")[0])
    parser.add_argument("verb", choices=("generate", "check"))
    parser.add_argument("folder", type=Path, nargs="?", default=Path("protocol/vectors"))
    args = parser.parse_args(argv)
    if args.verb == "generate":
        for path in generate(args.folder):
            print(f"{path}  {path.stat().st_size // 1024} KB")
        return 0
    problems = check(args.folder)
    print("\n".join(problems[:50]) or f"every vector in {args.folder} reproduces")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

__all__ = ["COMBOS", "SpecReader", "check", "check_case", "derive", "differences", "fingerprint", "generate"]
