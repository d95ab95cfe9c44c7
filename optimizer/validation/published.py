"""Published training runs as data: each row's job, layout, engine, precision and what its
source reports, read from `models/presets/published_runs.json`.

A row reports a utilisation (`mfu` or `hfu`), a throughput (`tokens_per_s_per_gpu`), a step
time (`step_time_s`) or model FLOP/s per GPU (`model_tflops_per_gpu`), as its source prints
it; a peak memory beside or instead of it (`peak_memory_gb`, or `peak_memory_gib` when the
source reads GiB). No per-row calibration, and no cost assumption on a row: a row names its
engine at the version it ran (`megatron@v2.5`) and states only the engine settings its source
prints or its pinned recipe sets (`engine_settings`); what its engine did beyond them is that
version's (optimizer/engines/*_versions.py), as a user's request would price it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from models.errors import InvalidSpec
from models.hardware import ClusterSpec, GpuSpec
from models.hf_config import from_hf_config, looks_like_hf_config
from models.job import TrainingJob
from models.layout import Layout
from models.presets import (
    gpu_preset,
    model_preset,
    published_data,
    published_gpus,
    published_hf_configs,
)
from models.stage_plan import StagePlan
from models.training import TrainingSpec
from models.transformer import TransformerSpec
from optimizer.costmodel import CostAssumptions
from optimizer.engines import get_engine
from optimizer.engines.stages import layout_string_ranks
from optimizer.engines.versions import split_spec
from optimizer.request import Request
from optimizer.search import SearchSpace

# What a row's `reported.metric` may be: utilisations are fractions of the bf16 dense peak.
UTILISATION_METRICS = ("mfu", "hfu")
THROUGHPUT_METRICS = ("tokens_per_s_per_gpu", "step_time_s", "model_tflops_per_gpu")
METRICS = UTILISATION_METRICS + THROUGHPUT_METRICS
# Precisions a row may name. fp16 and bf16 matmuls share a peak on every preset GPU (an
# engine may reduce them apart); fp8 rows are priced under training.precision fp8. Since
# they are, their errors are of the bf16 rows' size (docs/validation.md: 8.21 points mean
# against 7.69), so they are in the headline means; a precision the profile could not price
# would be reported on its own, as fp8 was before.
PRECISIONS = ("bf16", "fp16", "fp8")
PRICED_PRECISIONS = frozenset(PRECISIONS)
GIB = 2**30 / 1e9  # GB per GiB


@dataclass(frozen=True)
class PublishedRun:
    name: str
    source: str
    job: TrainingJob
    layout: Layout
    metric: str | None  # one of METRICS; None for a row that reports memory only
    reported: float | None  # in the metric's unit, as printed (fractions for mfu and hfu)
    # what the row is priced under before its engine's: nothing from the data (a row carries
    # no assumptions); validation lays the engine's over it (report.compare)
    assumptions: CostAssumptions
    notes: str
    search: SearchSpace  # the engine's constraints at the time, for the ranking check
    engine: str = "generic"  # the engine it ran on, at its version (`megatron@core_r0.20.0`)
    engine_settings: Mapping[str, Any] = field(default_factory=dict)  # the flags it printed
    precision: str = "bf16"
    reported_memory_gb: float | None = None  # the source's peak per GPU, in GB of 1e9 bytes
    memory_note: str = ""  # what the memory figure is (allocated, reserved, GiB as printed)
    excluded_from_mean: str | None = None  # why the row is kept but not averaged
    also: Mapping[str, float] = field(default_factory=dict)  # other figures the source prints
    # the layers per pipeline rank the run's recipe placed (its pipeline layout string), where
    # they differ from the even split; priced as a stage plan at the layout's recompute mode
    stage_plan: StagePlan | None = None

    @property
    def engine_name(self) -> str:
        """The engine without its version: `megatron` for `megatron@v2.5` (groups by engine
        are not split by version)."""
        return split_spec(self.engine)[0]

    @property
    def degrees(self) -> tuple[int, int, int, int]:
        tp, pp, cp = self.layout.tp, self.layout.pp, self.layout.cp
        return tp, pp, cp, self.job.cluster.gpus // (tp * pp * cp)

    def request(self, profile: str, overrides: Mapping[str, Any] | None = None) -> Request:
        """The row as a request priced under `profile`: its job, layout, space and engine at
        its version with its settings, and `overrides` as the request's assumptions."""
        assumptions = self.assumptions.model_copy(update=dict(overrides or {}))
        engine = get_engine(self.engine, self.engine_settings)
        return Request(self.job, self.search, self.layout, profile, assumptions, engine)

    @property
    def group(self) -> str:
        """`priced` (in the headline means), `excluded`, or a precision the profile does
        not price (reported on its own; none since fp8 is priced)."""
        if self.excluded_from_mean:
            return "excluded"
        return "priced" if self.precision in PRICED_PRECISIONS else self.precision

    @property
    def exclusion(self) -> str | None:
        """Why the row is not in the headline means, in words (None when it is)."""
        if self.excluded_from_mean:
            return self.excluded_from_mean
        if self.precision not in PRICED_PRECISIONS:
            return f"{self.precision}: the profile does not price this precision"
        return None

    @property
    def source_label(self) -> str:
        """The source's short name: its text up to the first comma or parenthesis."""
        cut = min((i for i in (self.source.find(","), self.source.find(" (")) if i > 0), default=0)
        return self.source[:cut].strip() if cut else self.source.strip()


def _model(entry: str | dict[str, Any], hf_configs: Mapping[str, Any]) -> TransformerSpec:
    """A preset name, a full spec, a Hugging Face config.json object, or a reference to one
    of the data file's `hf_configs` ({"hf_config": name})."""
    if isinstance(entry, str):
        return model_preset(entry)
    if set(entry) == {"hf_config"}:
        name = entry["hf_config"]
        if name not in hf_configs:
            raise InvalidSpec(f"hf_config {name!r} is not in the data file's hf_configs", "model")
        return from_hf_config(hf_configs[name]["config"])
    if looks_like_hf_config(entry):
        return from_hf_config(entry)
    return TransformerSpec.model_validate(entry)


def _gpu(entry: str | dict[str, Any]) -> GpuSpec:
    """A GPU of the data file's `gpus` (a published cluster no preset describes), a preset,
    or a full spec."""
    if isinstance(entry, dict):
        return GpuSpec.model_validate(entry)
    published = published_gpus().get(entry)
    if published is None:
        return gpu_preset(entry)
    return GpuSpec.model_validate({**published["spec"], "source": published["source"]})


def _memory_gb(reported: Mapping[str, Any]) -> float | None:
    if "peak_memory_gb" in reported and "peak_memory_gib" in reported:
        raise InvalidSpec("give peak_memory_gb or peak_memory_gib, not both", "reported")
    if "peak_memory_gib" in reported:
        return float(reported["peak_memory_gib"]) * GIB
    if "peak_memory_gb" in reported:
        return float(reported["peak_memory_gb"])
    return None


REPORTED_KEYS = frozenset(
    {"metric", "value", "peak_memory_gb", "peak_memory_gib", "memory_note", "also"}
)
ROW_KEYS = frozenset(
    {
        "name",
        "source",
        "engine",
        "engine_notes",
        "engine_settings",
        "precision",
        "model",
        "gpu",
        "gpus",
        "gpus_per_node",
        "nvlink_domain",
        "training",
        "layout",
        "reported",
        "notes",
        "search",
        "search_notes",
        "excluded_from_mean",
        "pipeline_layout",
    }
)


def _run(entry: dict[str, Any], hf_configs: Mapping[str, Any]) -> PublishedRun:
    name = entry.get("name", "?")
    if "assumptions" in entry:
        raise InvalidSpec(
            f"{name}: a row carries no cost assumptions; name the engine's version and state "
            "its settings (engine, engine_settings)",
            "assumptions",
        )
    unknown_keys = set(entry) - ROW_KEYS
    if unknown_keys:
        raise InvalidSpec(f"{name}: unknown keys {sorted(unknown_keys)}")
    reported = entry["reported"]
    unknown = set(reported) - REPORTED_KEYS
    if unknown:
        raise InvalidSpec(f"{name}: unknown reported keys {sorted(unknown)}", "reported")
    metric = reported.get("metric")
    if metric is not None and metric not in METRICS:
        raise InvalidSpec(f"{name}: metric {metric!r} is none of {METRICS}", "reported.metric")
    if (metric is None) != ("value" not in reported):
        raise InvalidSpec(f"{name}: a metric needs a value and a value a metric", "reported")
    memory_gb = _memory_gb(reported)
    if metric is None and memory_gb is None:
        raise InvalidSpec(f"{name}: reports neither a figure nor a peak memory", "reported")
    engine = entry["engine"]
    get_engine(engine, entry.get("engine_settings", {}))  # an unknown name, version or setting
    precision = entry.get("precision", "bf16")
    if precision not in PRECISIONS:
        raise InvalidSpec(f"{name}: precision {precision!r} is none of {PRECISIONS}")
    cluster = ClusterSpec(
        gpus=entry["gpus"],
        gpu=_gpu(entry["gpu"]),
        gpus_per_node=entry.get("gpus_per_node", 8),
        nvlink_domain=entry.get("nvlink_domain"),
    )
    job = TrainingJob(
        model=_model(entry["model"], hf_configs),
        cluster=cluster,
        training=TrainingSpec.model_validate(
            {**entry["training"], "precision": matmul_precision(precision)}
        ),
    )
    layout = Layout.model_validate(entry["layout"])
    return PublishedRun(
        name=name,
        source=entry["source"],
        job=job,
        layout=layout,
        metric=metric,
        reported=None if metric is None else float(reported["value"]),
        assumptions=CostAssumptions(),
        notes=entry.get("notes", ""),
        search=SearchSpace.model_validate(entry.get("search", {})),
        engine=engine,
        engine_settings=entry.get("engine_settings", {}),
        precision=precision,
        reported_memory_gb=memory_gb,
        memory_note=reported.get("memory_note", ""),
        excluded_from_mean=entry.get("excluded_from_mean"),
        also={key: float(value) for key, value in reported.get("also", {}).items()},
        stage_plan=_stage_plan(name, entry.get("pipeline_layout"), layout, job),
    )


def _stage_plan(
    name: str, pipeline_layout: str | None, layout: Layout, job: TrainingJob
) -> StagePlan | None:
    """The recipe's Megatron pipeline layout as layers per rank, every rank at the layout's
    recompute mode; checked to place the model's layers."""
    if pipeline_layout is None:
        return None
    try:
        ranks = layout_string_ranks(pipeline_layout, layout.pp)
    except ValueError as error:
        raise InvalidSpec(f"{name}: {error}", "pipeline_layout") from None
    plan = StagePlan(layers=ranks, recompute=(layout.recompute,) * layout.pp)
    try:
        plan.check(layout, job.model.num_layers)
    except InvalidSpec as error:
        raise InvalidSpec(f"{name}: pipeline_layout: {error.message}", "pipeline_layout") from None
    return plan


def matmul_precision(precision: str) -> str:
    """What a row's GEMMs are priced in: fp8 rows in fp8; fp16 at the bf16 peak it shares."""
    return "fp8" if precision == "fp8" else "bf16"


@cache
def published_runs() -> tuple[PublishedRun, ...]:
    hf_configs = published_hf_configs()
    return tuple(_run(entry, hf_configs) for entry in published_data()["runs"])


def hf_config_sources() -> dict[str, str]:
    """The data file's named Hugging Face configs and where each was read."""
    return {name: entry["source"] for name, entry in published_hf_configs().items()}


def gpu_sources() -> dict[str, str]:
    """The data file's GPUs of published clusters and where each figure came from."""
    return {name: entry["source"] for name, entry in published_gpus().items()}
