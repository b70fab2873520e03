"""HTTP-edge models: separate input and output shapes, mirroring the dataclasses.

Over 300 lines because it is the whole HTTP contract in one place (the
OpenAPI document is generated from it)."""

from __future__ import annotations

import base64
import binascii
import math
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    FiniteFloat,
    SerializerFunctionWrapHandler,
    StrictInt,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from shoal.common.bounds import PublicBound
from shoal.common.kinds.base import MAX_RECORDS
from shoal.common.kinds.continual import MAX_HORIZON
from shoal.common.wire.models import CodebookMessage, DeviceMessage, PointMessage, SketchMessage
from shoal.server.rounds.kinds import ElbowRequest, RefineRequest, RoundRequest
from shoal.server.rounds.sealed import RefuseReason


class BoundIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    radius: float | None = Field(default=None, gt=0)
    low: list[float] | None = Field(default=None, max_length=10_000)
    high: list[float] | None = Field(default=None, max_length=10_000)

    @model_validator(mode="after")
    def _finite(self) -> BoundIn:
        for v in [self.radius or 1.0, *(self.low or []), *(self.high or [])]:
            if not math.isfinite(v):
                raise ValueError("bounds must be finite numbers")
        return self


class TreeKnobsIn(BaseModel):
    """``tuning.tree``: the decoder's search (``config.TreeParams``)."""

    model_config = ConfigDict(extra="forbid")
    a: StrictInt | None = Field(None, ge=1, le=64)
    gamma_steps: StrictInt | None = Field(None, ge=1, le=1000)
    noise_z: FiniteFloat | None = Field(None, ge=0, le=100)
    max_nodes_per_level: StrictInt | None = Field(None, ge=2, le=10_000_000)
    centers: Literal["kmeans", "greedy", "greedy-weighted"] | None = Field(None, description=(
        "how the coreset's k centers are chosen: weighted k-means (default) or seed 001's greedy (nettree "
        "only: the centers come in order, the first k' answer k', and the result has an elbow curve); "
        "greedy-weighted: the greedy with seed 001's distance-weighted ball values (measured worse on "
        "average than greedy's counts; README, seed 001's greedy)"))


class TreeTuningIn(BaseModel):
    """Overrides of a tree round's derived parameters (``derive_config``);
    unknown keys are refused by name, integers must be integers."""

    model_config = ConfigDict(extra="forbid")
    levels: StrictInt | None = Field(None, ge=0, le=40)
    proj_dim: StrictInt | None = Field(None, ge=1, le=10_000)
    vec_share: FiniteFloat | None = Field(None, ge=0, le=1)
    hist_only_share: FiniteFloat | None = Field(None, ge=0, lt=1)
    eps_hist: FiniteFloat | None = Field(None, ge=0, le=50)
    eps_vec: FiniteFloat | None = Field(None, ge=0, le=50)
    root_share: FiniteFloat | None = Field(None, gt=0, le=1)
    hist_buckets: StrictInt | None = Field(None, ge=2, le=1 << 20)
    hist_pool: StrictInt | None = Field(None, ge=1, le=1 << 16)
    vec_columns_log2: StrictInt | None = Field(None, ge=0, le=20)
    seed: StrictInt | None = Field(None, ge=0, lt=1 << 63)
    vec_candidates: StrictInt | None = Field(None, ge=2, le=1 << 16)
    vec_cap: StrictInt | None = Field(None, ge=1, lt=1 << 16)
    amplification_bound: Literal["fmt21-numerical", "fmt21-closed-form"] | None = None
    tree: TreeKnobsIn | None = None


class SketchTuningIn(BaseModel):
    """Overrides of a sketch round's derived parameters (``derive_sketch_round``)."""

    model_config = ConfigDict(extra="forbid")
    size: StrictInt | None = Field(None, ge=1, le=1 << 20)
    measurements: StrictInt | None = Field(None, ge=1, le=1 << 20)
    restarts: StrictInt | None = Field(None, ge=1, le=20)
    max_devices: StrictInt | None = Field(None, ge=2, le=10**9)


def _tuning_error(exc: ValidationError) -> str:
    """One line per problem, naming the key: ``tuning.levels: Input should be a valid integer``."""
    parts = []
    for e in exc.errors():
        where = ".".join(str(p) for p in ("tuning", *e.get("loc", ())))
        msg = "unknown key" if e.get("type") == "extra_forbidden" else e.get("msg", "")
        parts.append(f"{where}: {msg}")
    return "; ".join(parts)


class PartitionTuningIn(BaseModel):
    """Overrides of a partition round's derived parameters (``derive_partition``)."""

    model_config = ConfigDict(extra="forbid")
    bits: StrictInt | None = Field(None, ge=1, le=10, description="2^bits buckets (default: bucket_bits' rule)")
    max_devices: StrictInt | None = Field(None, ge=2, le=10**9, description=(
        "most devices decoded (the secure sum's overflow bound); default 2 x n_expected"))
    center: list[float] | None = Field(None, min_length=1, max_length=100_000, description=(
        "the point the hyperplanes pass through, in the data's coordinates (default: the bound's centre): a "
        "released mean, e.g. diagnostics.mean of a one-bit partition round (tuning.bits = 1) on the same devices"))


class CentralTuningIn(BaseModel):
    """Expert overrides for a central round (``derive_central``)."""

    model_config = ConfigDict(extra="forbid")
    lift_steps: int | None = Field(None, ge=0, le=7, description="private Lloyd steps in the original space, sharing the lift's budget (default: Su et al.'s count unprojected, 1-2 projected)")
    records_per_device: int | None = Field(None, ge=1, le=MAX_RECORDS, description=(
        "records a device may seal in its one message (default 1); eps and delta are per record, a device's "
        "records together get the group-privacy guarantee (the round's privacy statement says both)"))
    objective: Literal["kmeans", "kmedian"] | None = Field(None, description=(
        "kmedian: maxcover-003 or greedy-001 where nothing is projected (d <= d'); default kmeans"))


class ContinualTuningIn(BaseModel):
    """A continual round's parameters (``common/kinds/continual.py``)."""

    model_config = ConfigDict(extra="forbid")
    horizon: int = Field(ge=1, le=MAX_HORIZON, description="steps the round releases (the budget covers them all)")
    levels: int | None = Field(None, ge=1, le=12, description="net levels, radii 2 .. 2^(1 - levels) (default 6)")
    objective: Literal["kmeans", "kmedian"] | None = Field(None, description="the greedy's objective (default kmeans)")


class CreateRoundIn(BaseModel):
    """What an operator gives; every other parameter is derived (``derive_config``)."""

    model_config = ConfigDict(extra="forbid")
    k: int = Field(ge=1, le=1000)
    dim: int = Field(ge=1, le=10_000)
    epsilon: float = Field(ge=1e-3, le=50, description="below 1e-3 no round can locate anything")
    n_expected: int = Field(ge=1, le=10**9)
    encoder: Literal["auto", "lsh", "nettree", "sketch", "partition"] = Field(
        "auto", description=("auto: nettree or lsh by a measured rule from (n_expected, dim, k, the device's epsilon) "
                             "(common/kinds/encoder_rule.py); the round's config says which. "
                             "sketch: scrambled compressive sketches decoded by CL-OMPR (common/kinds/sketch.py). "
                             "partition (shuffle model): per-bucket secure sums over a public LSH partition, "
                             "central noise, no local guarantee (common/kinds/partition.py); auto never picks it"))
    model: Literal["local", "shuffle", "central"] = Field(
        "local", description=("shuffle: epsilon/delta are the central target for batches of >= min_batch; "
                              "central: the server is the curator (devices seal raw points to it; "
                              "common/kinds/central.py)"))
    algorithm: Literal["auto", "maxcover-000", "maxcover-003", "gridhist", "greedy-001", "lsh-partition",
                       "continual"] | None = Field(
        None, description=("central model only: seed 000's or seed 003's private max coverage, seed 000's "
                           "pipeline with a thresholded histogram cover (gridhist), or seed 001's greedy "
                           "(greedy-001: centers in order, the first k' answer k', with a private elbow curve), "
                           "the shuffle model's partition stage run by the curator (lsh-partition: a private mean, "
                           "buckets under public hyperplanes through it, Lloyd steps; for broad, overlapping "
                           "clusters; chosen by name), "
                           "or continual observation of a stream of insertions and deletions (continual: a release "
                           "at every step the operator closes, POST /rounds/{id}/steps; tuning.horizon required; "
                           "delta optional: none is pure eps); "
                           "auto: by dimension"))
    delta: float | None = Field(None, gt=0, lt=1, description="shuffle and central models only")
    min_batch: int | None = Field(None, ge=2, le=10**9, description=(
        "shuffle model only: smallest batch released (sketch rounds: fewest devices whose noise shares give the guarantee)"))
    bound: BoundIn = Field(default_factory=lambda: BoundIn(radius=1.0))
    tuning: dict[str, Any] = Field(default_factory=dict, description=(
        "expert overrides: TreeTuningIn's fields for lsh/nettree rounds, SketchTuningIn's for sketch rounds"))

    def to_request(self) -> RoundRequest:
        """The domain object the round service takes."""
        b = self.bound
        bound = PublicBound(radius=b.radius, low=tuple(b.low) if b.low else None, high=tuple(b.high) if b.high else None)
        encoder: str = self.encoder
        if self.model == "central":  # the central kind serves its algorithms as encoders
            encoder = "maxcover" if self.algorithm in (None, "auto") else self.algorithm
        return RoundRequest(k=self.k, dim=self.dim, epsilon=self.epsilon, n_expected=self.n_expected,
                            encoder=encoder, model=self.model, delta=self.delta or 0.0,
                            min_batch=self.min_batch or 0, bound=bound, tuning=dict(self.tuning))

    @model_validator(mode="after")
    def _tuning_fields(self) -> CreateRoundIn:
        """Every override is checked here, by name and type; only the keys given
        are kept (the rest stay derived)."""
        if self.model == "central":
            model: type[BaseModel] = ContinualTuningIn if self.algorithm == "continual" else CentralTuningIn
        else:
            tunings: dict[str, type[BaseModel]] = {"sketch": SketchTuningIn, "partition": PartitionTuningIn}
            model = tunings.get(self.encoder, TreeTuningIn)
        try:
            checked = model.model_validate(self.tuning)
        except ValidationError as exc:
            raise ValueError(f"{_tuning_error(exc)} (known keys for {'an' if self.encoder == 'auto' else 'a'} "
                             f"{'central' if self.model == 'central' else self.encoder} round: "
                             f"{', '.join(model.model_fields)})") from exc
        self.tuning = checked.model_dump(exclude_none=True)
        return self

    @model_validator(mode="after")
    def _shuffle_fields(self) -> CreateRoundIn:
        if self.model == "shuffle" and (self.delta is None or self.min_batch is None):
            raise ValueError("a shuffle round needs delta and min_batch")
        if self.model == "local" and (self.delta is not None or self.min_batch is not None):
            raise ValueError("delta and min_batch apply to shuffle rounds only")
        pure = self.algorithm == "continual"  # a continual round may be pure eps (discrete Laplace nodes)
        if self.model == "central" and ((self.delta is None and not pure) or self.min_batch is not None
                                        or self.encoder != "auto"):
            raise ValueError("a central round needs delta, and takes an algorithm instead of encoder and min_batch")
        if self.model != "central" and self.algorithm is not None:
            raise ValueError("algorithm applies to central rounds only (model: central)")
        return self

    @field_validator("epsilon")
    @classmethod
    def _finite_eps(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("epsilon must be finite")
        return v


class ClusterIn(BaseModel):
    """Options of a decode (``POST /rounds/{id}/cluster``); the body may be omitted."""

    model_config = ConfigDict(extra="forbid")
    dask: str | None = Field(default=None, max_length=256, pattern=r"^((tcp|tls)://\S+)?$", description=(
        "sum the round's reports on this Dask scheduler (tcp://HOST:PORT); \"\": in the server's process; "
        "default: the server's SHOAL_DASK_SCHEDULER (server/rounds/reduction.py)"))
    again: bool = Field(default=False, description=(
        "decode a done round anew (post-processing: kinds whose devices did all the randomising); the earlier "
        "results stay (GET /rounds/{id}/results). Refused (409) for rounds whose decode draws private noise "
        "(central): their first result is their one release. Without it, a done round's stored result is "
        "returned unchanged"))
    fallback: bool | None = Field(default=None, description=(
        "if the Dask cluster is lost or passes the decode's deadline, decode in the server's process instead "
        "of answering 503; default: the server's SHOAL_DASK_FALLBACK"))


class ResultVersionOut(BaseModel):
    """One result a round's decodes wrote (``GET /rounds/{id}/results``)."""

    version: int = Field(description="1 for the first decode (the release); re-decodes add versions")
    written: float = Field(description="when it was written (seconds since the epoch)")
    result: dict[str, Any]


class ElbowIn(BaseModel):
    """An elbow round on a done round's ordered centers (``common/kinds/elbow.py``):
    each device's cost drops to the first k' centers through secure summation
    (shuffle model, no local guarantee), composed with the parent's budget."""

    model_config = ConfigDict(extra="forbid")
    epsilon: float = Field(gt=0, le=50, description="central epsilon of the elbow round, composed with the parent's")
    delta: float = Field(gt=0, lt=1, description="delta of the elbow round (its secure sum's)")
    min_devices: int = Field(ge=16, le=10**9, description="fewest devices whose noise shares give the guarantee")
    max_devices: int | None = Field(None, ge=16, le=10**9, description="most devices decoded (overflow bound); "
                                                                      "default 100 x min")

    def to_request(self) -> ElbowRequest:
        return ElbowRequest(self.epsilon, self.delta, self.min_devices, self.max_devices)

    @model_validator(mode="after")
    def _order(self) -> ElbowIn:
        if not math.isfinite(self.epsilon):
            raise ValueError("epsilon must be finite")
        if self.max_devices is not None and self.max_devices < self.min_devices:
            raise ValueError("max_devices must be >= min_devices")
        return self


class RefineIn(BaseModel):
    """A refine round on a done round's centers: one Lloyd step, through secure
    summation (shuffle model) or from fresh devices' eps-LDP reports (local)."""

    model_config = ConfigDict(extra="forbid")
    model: Literal["local", "shuffle"] | None = Field(None, description=(
        "local: fresh devices send eps-LDP reports (common/kinds/local_refine.py); shuffle: secure summation "
        "through the shuffler, no local guarantee (common/kinds/refine.py); default: shuffle when delta or "
        "min_devices is given, else the parent round's model"))
    epsilon: float = Field(gt=0, le=50, description="epsilon of the refine round (local: per device; shuffle: "
                                                      "central, composed with the parent's)")
    delta: float | None = Field(None, gt=0, lt=1, description="shuffle refine rounds only (required there)")
    min_devices: int | None = Field(None, ge=16, le=10**9, description=(
        "shuffle refine rounds only (required there): fewest devices whose noise shares give the guarantee"))
    max_devices: int | None = Field(None, ge=16, le=10**9, description="most devices decoded (overflow bound); default 100 x min")
    split: StrictInt | None = Field(None, ge=1, le=4, description=(
        "candidates per parent center, reduced back to k after the Lloyd step (common/kinds/refine.py); "
        "default 2 on a partition round, 1 otherwise"))

    def to_request(self) -> RefineRequest:
        return RefineRequest(self.epsilon, self.delta or 0.0, self.min_devices or 0, self.max_devices, self.split,
                             model=self.model)

    @model_validator(mode="after")
    def _order(self) -> RefineIn:
        if not math.isfinite(self.epsilon):
            raise ValueError("epsilon must be finite")
        if self.model == "local" and (self.delta is not None or self.min_devices is not None
                                      or self.max_devices is not None):
            raise ValueError("a local refine round takes no delta, min_devices or max_devices (each report is eps-LDP)")
        if self.model == "shuffle" and (self.delta is None or self.min_devices is None):
            raise ValueError("a shuffle refine round needs delta and min_devices")
        if self.max_devices is not None and self.min_devices is not None and self.max_devices < self.min_devices:
            raise ValueError("max_devices must be >= min_devices")
        return self


class RoundPrivacyOut(BaseModel):
    """A round's privacy in brief, from its kind's privacy statement
    (``server/edge/round_privacy.py``); the full statement is in its result."""

    model: str = Field(description="local, shuffle or central")
    epsilon: float | None = Field(description=(
        "the guarantee of this round's release: central in the shuffle and central models, each device's in the "
        "local model (a round opened on a parent: its own share; its result composes it with the parent's)"))
    delta: float | None = Field(None, description="the central delta; absent in the local model (pure eps-LDP)")
    device_epsilon: float | None = Field(None, description=(
        "shuffle rounds whose devices randomise: the eps0 one device's message has if the shuffler colludes; "
        "absent where it does not apply"))

    @model_serializer(mode="wrap")
    def _without_what_does_not_apply(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        return {k: v for k, v in out.items() if v is not None or k == "epsilon"}


class RoundOut(BaseModel):
    id: str
    state: str
    reports: int
    created: float
    config: dict[str, Any]
    server_public_key: str
    error: str | None = None
    privacy: RoundPrivacyOut = Field(description=(
        "the round's privacy in brief, from its kind's privacy statement (the config's epsilon is the device's "
        "eps0 in the shuffle model, not the central epsilon asked for)"))


MAX_PAGE = 1000  # most rounds one GET /rounds answers


def encode_cursor(created: float, round_id: str) -> str:
    """The opaque cursor after the round (``created``, ``round_id``): base64url
    of its creation time (``repr``, exact) and id, which ``RoundsPageIn`` reads back."""
    return base64.urlsafe_b64encode(f"{created!r}:{round_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, str]:
    """(created, id) of a cursor ``encode_cursor`` wrote; ValueError naming what is wrong."""
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        created_text, round_id = text.split(":", 1)
        created = float(created_text)
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise ValueError("cursor: not a cursor this server gave (copy it from the X-Next-Cursor or Link header "
                         "of the previous page)") from exc
    if not math.isfinite(created) or not round_id:
        raise ValueError("cursor: not a cursor this server gave (copy it from the X-Next-Cursor or Link header "
                         "of the previous page)")
    return created, round_id


class RoundsPageIn(BaseModel):
    """The query of ``GET /rounds``: one page of rounds, newest first."""

    model_config = ConfigDict(extra="forbid")
    limit: StrictInt = Field(100, ge=1, le=MAX_PAGE, description=f"rounds per page, 1 to {MAX_PAGE}")
    cursor: str | None = Field(None, max_length=512, description=(
        "where the page starts: the X-Next-Cursor header (or the Link header's rel=\"next\" URL) of the previous "
        "page; absent: the newest rounds"))

    @field_validator("limit", mode="before")
    @classmethod
    def _integer_text(cls, value: Any) -> Any:
        """A query string is text: "10" is the integer 10, "10.5" or "ten" is refused."""
        if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
            return int(value)
        return value

    @field_validator("cursor")
    @classmethod
    def _readable(cls, value: str | None) -> str | None:
        if value is not None:
            decode_cursor(value)
        return value

    def before(self) -> tuple[float, str] | None:
        """(created, id) of the last round of the previous page, or None for the first page."""
        return decode_cursor(self.cursor) if self.cursor is not None else None


class BatchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    messages: list[DeviceMessage | SketchMessage | PointMessage | CodebookMessage] = Field(min_length=1)


class RefusedOut(BaseModel):
    """One item of a shuffled batch the server did not store, and why."""

    index: int = Field(description="position of the item in the posted batch")
    reason: RefuseReason
    detail: str


class AcceptedOut(BaseModel):
    accepted: int
    duplicates: int


class ShuffledOut(AcceptedOut):
    """A shuffled batch's outcome, item by item."""

    refused: list[RefusedOut] = Field(description="items not stored, and why (never retry them)")


class SealedBatchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sealed: list[str] = Field(min_length=1, description="base64 sealed messages")


class QualityOut(BaseModel):
    """The verdict of a decoded round (``server/decoders/quality.py``; README, "Reading a result")."""

    answer: Literal["clusters", "private mean", "mean-only round", "unreliable sketch"] = Field(
        description="clusters: shown better than the private mean (tree) or decoded at a reliable SNR (sketch); "
                    "private mean: the mean is one center, the others the tree's guesses; mean-only round: too few "
                    "devices for the eps and k; unreliable sketch: SNR x m/(kd) below the measured failure level")
    clusters_found: bool
    verdict: str = Field(description="the answer in one sentence")
    k: int = Field(description="centers asked for")
    distinct_centers: int = Field(description="how many of them differ")
    center_errors: list[float] | None = Field(description="expected error of each center, original units")
    center_errors_note: str | None = Field(default=None, description="why center_errors is null, when it is")
    mean_error: float | None = Field(description="expected error of the private mean, original units")
    units: str
    bound: dict[str, Any] = Field(description="the public bound the units come from")
    snr_times_m_over_kd: float | None = Field(default=None, description="sketch rounds: SNR x m / (k d)")
    reliable_above: float | None = Field(default=None, description="sketch rounds: measured reliable level")
    fails_below: float | None = Field(default=None, description="sketch rounds: measured failure level")


class PictureOut(BaseModel):
    """The private coreset to draw under the centers (``common/picture.py``): post-processing only."""

    axes: list[list[float]] = Field(description="2 x d orthonormal rows: the plot's axes in the original space")
    origin: list[float] = Field(description="the weighted mean of the coreset, the plot's origin")
    xy: list[list[float]] = Field(description="the heaviest coreset nodes on the axes")
    weights: list[float] = Field(description="their noisy counts")
    nodes: int = Field(description="coreset nodes with positive weight (before keeping the heaviest)")
    note: str


class GuaranteeOut(BaseModel):
    """One threat's statement (``common/privacy/threats.py``)."""

    epsilon: float
    delta: float
    against: list[Literal["curious server", "colluding shuffler", "hostile server", "readers of the result"]] = Field(
        description="the adversaries this guarantee holds against (central rounds: only readers of the result)")
    assumes: list[str] = Field(description="what must hold for it")
    words: str = Field(description="the guarantee in one sentence")


class PrivacyOut(BaseModel):
    """A result's privacy statement, built from the round's event records. The
    fields every kind has are typed; kind-specific ones (the tree's reports and
    root share, a shuffle round's batch size and amplification bound, a secure
    sum's mechanism, a refine round's composition) are kept as they are."""

    model_config = ConfigDict(extra="allow")
    model: Literal["local", "shuffle", "central"] = Field(description="the trust model of the round")
    device_epsilon: float | None = Field(description="what one device's messages reveal to whoever reads them "
                                                     "(null: no local guarantee, a secure sum)")
    central_epsilon: float = Field(description="the guarantee of the server's view (equal to device_epsilon locally)")
    delta: float
    guarantees: list[GuaranteeOut] = Field(description="one statement per threat model, in words")


class ElbowCostOut(BaseModel):
    k: int = Field(description="k': the first k' centers of the ordered answer")
    cost: float = Field(description="their private cost (sum over points, in the unit ball's units)")
    band: float = Field(description="half-width of the cost's noise band (ElbowOut.band_rule says what it covers)")


class ElbowOut(BaseModel):
    """greedy-001 rounds (seed 001): the centers come in order, the first k' are the answer for k'."""

    costs: list[ElbowCostOut]
    suggested_k: int
    objective: Literal["kmeans", "kmedian"]
    units: str
    rule: str = Field(description="how suggested_k is chosen")
    band_rule: str = Field("two standard deviations of each cost's noise, k' by k'", description=(
        "what the band covers: elbow rounds' bands hold every k' at once with the stated probability"))


class StepOut(BaseModel):
    """One closed step of a continual round: k ordered centers for the population at that step."""

    round_id: str
    step: int
    horizon: int
    centers: list[list[float]]
    ball_centers: list[list[float]]
    elbow: ElbowOut
    diagnostics: dict[str, Any]


class ResultOut(BaseModel):
    round_id: str
    centers: list[list[float]]
    sizes: list[float]
    privacy: PrivacyOut
    diagnostics: dict[str, Any]
    ball_centers: list[list[float]] | None = None
    quality: QualityOut | None = Field(default=None, description="the verdict (refine rounds have none)")
    picture: PictureOut | None = Field(default=None, description="tree rounds: the coreset the dashboard draws")
    elbow: ElbowOut | None = Field(default=None, description="greedy-001 rounds: the private elbow curve")
