"""Requests: the one request shape shared by HTTP, CLI and client.

Domain objects (`models/`, `optimizer/`) are embedded as they are; this module only adds
the edge: preset names and Hugging Face configs resolved to specs, strict JSON types.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    model_validator,
)

from models.errors import InvalidSpec
from models.hardware import MAX_GPUS, ClusterSpec, GpuSpec
from models.hf_config import from_hf_config, looks_like_hf_config
from models.job import TrainingJob
from models.layout import Layout
from models.presets import gpu_preset, gpu_presets, model_preset, model_presets
from models.strict import REQUEST_CONFIG, JsonInt
from models.training import TrainingSpec
from models.transformer import MAX_HIDDEN, MAX_LAYERS, MAX_VOCAB, TransformerSpec
from optimizer import (
    DEFAULT_PROFILE,
    CostAssumptions,
    Estimate,
    ProfileName,
    Request,
    SearchSpace,
    evaluate_on,
)
from optimizer.engines import DEFAULT_ENGINE, EngineName, EngineSettingsIn, get_engine


def _model_from_ref(value: Any) -> Any:
    """A preset name or a Hugging Face config.json becomes a TransformerSpec."""
    if isinstance(value, str):
        return model_preset(value)
    if isinstance(value, Mapping) and looks_like_hf_config(value):
        return from_hf_config(value)
    return value


def _gpu_from_ref(value: Any) -> Any:
    return gpu_preset(value) if isinstance(value, str) else value


class HfConfigIn(BaseModel):
    """The keys of a Hugging Face config.json the import needs (others pass through); its
    `model_type` names the family (models/hf_config.py lists those imported)."""

    model_config = ConfigDict(extra="allow")

    num_hidden_layers: Annotated[JsonInt, Field(gt=0, le=MAX_LAYERS)]
    hidden_size: Annotated[JsonInt, Field(gt=0, le=MAX_HIDDEN)]
    intermediate_size: Annotated[JsonInt, Field(gt=0)]
    num_attention_heads: Annotated[JsonInt, Field(gt=0, le=MAX_HIDDEN)]
    vocab_size: Annotated[JsonInt, Field(gt=0, le=MAX_VOCAB)]


# The names the catalogue holds, published as enums: what the schema admits is what resolves.
ModelPresetName = Literal[tuple(model_presets())]  # type: ignore[valid-type]
GpuPresetName = Literal[tuple(gpu_presets())]  # type: ignore[valid-type]

ModelRef = Annotated[
    TransformerSpec,
    BeforeValidator(
        _model_from_ref, json_schema_input_type=ModelPresetName | TransformerSpec | HfConfigIn
    ),
    Field(description="A preset name, a full spec, or a Hugging Face config.json object."),
]
GpuRef = Annotated[
    GpuSpec,
    BeforeValidator(_gpu_from_ref, json_schema_input_type=GpuPresetName | GpuSpec),
    Field(description="A GPU preset name or a full GPU spec."),
]

PLATE_EXAMPLE: dict[str, Any] = {
    "model": "llama3-405b",
    "cluster": {"gpus": 16384, "gpu": "h100-sxm", "gpus_per_node": 8},
    "training": {"global_batch": 2048, "seq_len": 8192},
    "layout": {
        "tp": 8,
        "pp": 16,
        "cp": 1,
        "vpp": 4,
        "micro_batch": 1,
        "zero": 2,
        "recompute": "none",
    },
    "profile": "workshop",
    "engine": "generic",
}


class ClusterIn(BaseModel):
    model_config = REQUEST_CONFIG

    gpus: JsonInt = Field(gt=0, le=MAX_GPUS, description="GPUs in the job.")
    gpu: GpuRef = Field("h100-sxm", validate_default=True)  # type: ignore[assignment]
    gpus_per_node: JsonInt = Field(8, gt=0, le=1024, description="GPUs sharing one NVLink domain.")
    nvlink_domain: JsonInt | None = Field(
        None,
        gt=0,
        le=100_000,
        description="GPUs sharing NVLink when larger than a node (GB200 NVL72: 72); "
        "profile standard prices links by it. Default: the GPU's nvlink_domain_gpus (72 "
        "on the gb200 and gb300 presets), else gpus_per_node.",
    )

    def to_domain(self) -> ClusterSpec:
        return ClusterSpec(
            gpus=self.gpus,
            gpu=self.gpu,
            gpus_per_node=self.gpus_per_node,
            nvlink_domain=self.nvlink_domain,
        )


class PlanRequest(BaseModel):
    """What every route takes: the job, and which cost model prices it."""

    model_config = REQUEST_CONFIG

    model: ModelRef
    cluster: ClusterIn
    training: TrainingSpec = TrainingSpec()
    profile: ProfileName = Field(
        DEFAULT_PROFILE,
        description="Cost-model profile (the same default on every route; `workshop` is the "
        "teaching plate's model, asked for by name).",
    )
    assumptions: CostAssumptions = CostAssumptions()
    engine: EngineName = Field(
        DEFAULT_ENGINE,
        description="The training engine that runs the layout: its rules are checked (warnings "
        "name each one broken), it is priced as the engine runs it, and its artefact is the "
        f"answer's `export`. Default {DEFAULT_ENGINE} on every route; `generic` is the "
        "engine-agnostic model. A version may follow after `@` (`megatron@core_r0.20.0`; the "
        "bare name is the newest known): its defaults apply.",
    )
    engine_settings: EngineSettingsIn = {}

    def job(self) -> TrainingJob:
        return TrainingJob(
            model=self.model, cluster=self.cluster.to_domain(), training=self.training
        )

    def to_request(self) -> Request:
        """The request as the optimiser takes it, its engine resolved once here."""
        return Request(
            self.job(),
            profile=self.profile,
            assumptions=self.assumptions,
            engine=get_engine(self.engine, self.engine_settings),
        )


class EvaluateRequest(PlanRequest):
    model_config = REQUEST_CONFIG | ConfigDict(json_schema_extra={"examples": [PLATE_EXAMPLE]})

    layout: Layout = Layout()
    # An answer's layout carries its derived micro-batch count; POSTed back, it must agree.
    _stated_micro_batches: object = PrivateAttr(None)

    @model_validator(mode="wrap")
    @classmethod
    def _answer_layout_accepted(
        cls, data: Any, handler: ModelWrapValidatorHandler[EvaluateRequest]
    ) -> EvaluateRequest:
        stated = None
        if isinstance(data, dict) and isinstance(data.get("layout"), dict):
            layout = dict(data["layout"])
            stated = layout.pop("micro_batches", None)
            data = {**data, "layout": layout}
        request = handler(data)
        request._stated_micro_batches = stated
        return request

    @property
    def stated_micro_batches(self) -> object:
        return self._stated_micro_batches

    def to_request(self) -> Request:
        return replace(super().to_request(), layout=self.layout)


def evaluated(request: EvaluateRequest) -> Estimate:
    """The request's layout priced under its profile, as its engine runs it; the layout's
    stated micro-batch count, where it states one, checked against the one derived."""
    estimate = evaluate_on(request.to_request())
    check_stated_micro_batches(request.stated_micro_batches, estimate.micro_batches)
    return estimate


def check_stated_micro_batches(stated: object, derived: int) -> None:
    """A layout's `micro_batches`, when stated, is the one the job derives (as `dp` is)."""
    if stated is not None and (type(stated) is not int or stated != derived):
        raise InvalidSpec(
            f"micro_batches({stated!r}) disagrees with global_batch / (dp * micro_batch) = "
            f"{derived}",
            "layout.micro_batches",
        )


SEARCH_EXAMPLE: dict[str, Any] = {
    key: value for key, value in PLATE_EXAMPLE.items() if key not in ("layout", "engine")
} | {"search": {"max_vpp": 4, "zero_stages": [0, 1, 2], "recompute": ["none", "full"]}}


class SearchRequest(PlanRequest):
    """A job and the space to search: every `search` field is optional."""

    model_config = REQUEST_CONFIG | ConfigDict(json_schema_extra={"examples": [SEARCH_EXAMPLE]})

    search: SearchSpace = SearchSpace()
    time_limit_s: float | None = Field(
        None, gt=0, le=600, description="Solver time limit in seconds; default the server's."
    )
    explain: bool = Field(
        True,
        description="Work out what binds the optimum and what each choice buys (optimize); "
        "false answers the layout alone, cheaper, for scripts and schedulers.",
    )

    def to_request(self) -> Request:
        return replace(
            super().to_request(),
            space=self.search,
            explain=self.explain,
            time_limit_s=self.time_limit_s,
        )
