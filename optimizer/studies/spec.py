"""A study spec and its expansion into scenarios.

A study is a `base` request (the same shape as everywhere) with `grid` (dotted field paths
to lists of values: their cartesian product) and/or `scenarios` (explicit overrides). Each
scenario is the base with its overrides laid on, named by a stable key: a digest of what it
computes, so a resumed study skips exactly the scenarios it already has, however the spec
orders them.

The room knows nothing of the request's schema (that is the API's, `api/schemas/`): the
caller hands in `parse`, which turns a scenario's request into the request object or raises
`ScenarioError` naming the field, and the spec is checked against it value by value.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from optimizer.request import Request

# What a study may hold: every scenario is a solve, and the expansion is held in memory.
MAX_SCENARIOS = 100_000
MAX_VALUES_PER_AXIS = 10_000
MAX_PATH_DEPTH = 4
# Requests nest a few levels (an HF config's rope_scaling sits 3 deep). A study's base and
# values are deep-copied into each scenario, and copy.deepcopy recurses about three frames a
# level: 600 levels ran out of Python's recursion limit. Checked before any copy.
MAX_NESTING_DEPTH = 32
KEY_HEX_DIGITS = 16  # 64 bits: no collision in 1e5 scenarios (odds ~1e-10)

Compute = Literal["optimize", "pareto", "evaluate", "stages"]
# A dotted path into the request. Checked by a validator, not published as the keys' schema:
# whether a path names a field is the request's rule, found by parsing (check_values).
FIELD_PATH = re.compile(rf"[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*){{0,{MAX_PATH_DEPTH - 1}}}")
MAX_PATH_CHARS = 200


class ScenarioError(ValueError):
    """A scenario's request cannot be built or solved: its message names the numbers and,
    when one field is to blame, `field` names it (a dotted path of the request)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message, self.field = message, field


class StudyError(ValueError):
    """The spec itself is wrong (a bad path or value, too many scenarios): `field` names the
    spec's culprit (`grid.cluster.gpus[2]`, `base.model`, `scenarios[3]`)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message, self.field = message, field


# (compute, request JSON) -> the request, parsed by the API's schema; raises ScenarioError.
# Module-level functions only: it travels to worker processes and Dask workers by reference.
Parse = Callable[[str, dict[str, Any]], Request]


class StudySpec(BaseModel):
    """A batch of what-if scenarios over one base request."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    base: dict[str, Any] = Field(description="The request every scenario starts from.")
    grid: dict[str, list[Any]] = Field(
        default_factory=dict,
        max_length=16,
        description="Dotted field paths to lists of values: one scenario per combination.",
    )
    scenarios: list[dict[str, Any]] = Field(
        default_factory=list,
        max_length=MAX_SCENARIOS,
        description="Explicit scenarios, each a map of dotted paths to values over the base.",
    )
    compute: Compute = Field("optimize", description="What each scenario answers.")
    train_tokens: float = Field(
        15e12, gt=0, le=1e18, description="Tokens to train, for days and GPU-hours."
    )
    gpu_hour_cost: (
        Annotated[float, Field(ge=0, le=1e6)]
        | dict[str, Annotated[float, Field(ge=0, le=1e6)]]
        | None
    ) = Field(
        None,
        description="Price of one GPU-hour, for each scenario's cost: one price, or a price "
        "per GPU preset name ({'h100-sxm': 2.5, 'b200': 4.0}), as GPU types are priced apart.",
    )

    @field_validator("base", "grid", "scenarios", mode="before")
    @classmethod
    def _not_too_deep(cls, value: Any) -> Any:
        if nests_deeper_than(value, MAX_NESTING_DEPTH):
            raise ValueError(
                f"nests objects and lists more than {MAX_NESTING_DEPTH} levels deep; "
                "a request needs a few"
            )
        return value

    @field_validator("grid")
    @classmethod
    def _axes_hold_values(cls, grid: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for path, values in grid.items():
            _check_path(path, "")
            if not 0 < len(values) <= MAX_VALUES_PER_AXIS:
                raise ValueError(
                    f"grid.{path} holds {len(values)} values; give 1 to {MAX_VALUES_PER_AXIS:,}"
                )
        return grid

    @field_validator("scenarios")
    @classmethod
    def _paths_are_paths(cls, scenarios: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for position, overrides in enumerate(scenarios):
            for path in overrides:
                _check_path(path, f"scenarios[{position}]")
        return scenarios

    def count(self) -> int:
        """Scenarios before duplicates are dropped: the grid's product plus the explicit ones
        (the base alone when neither is given)."""
        product = math.prod(len(values) for values in self.grid.values()) if self.grid else 0
        return product + len(self.scenarios) or 1

    def override_paths(self) -> list[str]:
        """Every path any scenario sets, grid axes first: the rows' override columns."""
        paths = dict.fromkeys(self.grid)
        for scenario in self.scenarios:
            paths.update(dict.fromkeys(scenario))
        return list(paths)


def nests_deeper_than(value: Any, levels: int) -> bool:
    """Whether objects and lists nest in `value` more than `levels` deep (the value itself
    is level 1). Walked with a stack of its own, not by recursion, so any depth is safe."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            node = list(node.values())
        if isinstance(node, list):
            if depth > levels:
                return True
            stack.extend((child, depth + 1) for child in node)
    return False


def _check_path(path: str, where: str) -> None:
    if len(path) > MAX_PATH_CHARS or not FIELD_PATH.fullmatch(path):
        raise ValueError(
            f"{where + ': ' if where else ''}{path[:60]!r} is not a dotted field path of the request (such as "
            f"cluster.gpus or search.memory_limit_gb, at most {MAX_PATH_DEPTH} deep)"
        )


@dataclass(frozen=True)
class Scenario:
    index: int  # position in the expansion: for reading, never for resuming
    key: str
    overrides: dict[str, Any]
    request: dict[str, Any]


def count_message(spec: StudySpec, limit: int) -> str:
    sizes = " x ".join(str(len(values)) for values in spec.grid.values())
    grid = f"a grid of {sizes}" if spec.grid else "no grid"
    return (
        f"the study has {spec.count():,} scenarios ({grid} plus {len(spec.scenarios):,} "
        f"explicit); the limit is {limit:,}: split it into several studies"
    )


def check_count(spec: StudySpec, limit: int = MAX_SCENARIOS) -> None:
    if spec.count() > limit:
        raise StudyError(count_message(spec, limit), "grid" if spec.grid else "scenarios")


def with_overrides(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The base request with each dotted path set (objects created where absent)."""
    request = copy.deepcopy(dict(base))
    for path, value in overrides.items():
        *parents, leaf = path.split(".")
        node = request
        for depth, part in enumerate(parents):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                where = ".".join(parents[: depth + 1])
                raise ScenarioError(
                    f"cannot set {path}: {where} is {json.dumps(child)}, not an object; "
                    f"override the whole {where} instead",
                    path,
                )
            node = child
        node[leaf] = copy.deepcopy(value)
    return request


def scenario_key(compute: str, request: Mapping[str, Any]) -> str:
    """A digest of what the scenario computes: the same on every run and machine."""
    canonical = json.dumps(
        {"compute": compute, "request": request}, sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode()).hexdigest()[:KEY_HEX_DIGITS]


def _override_sets(spec: StudySpec) -> Iterator[dict[str, Any]]:
    if spec.grid:
        for values in itertools.product(*spec.grid.values()):
            yield dict(zip(spec.grid, values, strict=True))
    yield from (dict(scenario) for scenario in spec.scenarios)
    if not spec.grid and not spec.scenarios:
        yield {}


def expand(spec: StudySpec) -> list[Scenario]:
    """Every scenario once, in the spec's order (grid, then explicit); a scenario that
    computes the same as an earlier one is dropped."""
    check_count(spec)
    scenarios: list[Scenario] = []
    seen: set[str] = set()
    for overrides in _override_sets(spec):
        request = with_overrides(spec.base, overrides)
        key = scenario_key(spec.compute, request)
        if key not in seen:
            seen.add(key)
            scenarios.append(Scenario(len(scenarios), key, overrides, request))
    return scenarios


def _blames(error: ScenarioError, path: str) -> bool:
    """Whether the error is about `path` itself (or a field inside it)."""
    field = error.field or ""
    return bool(field) and (
        field == path or field.startswith(path + ".") or path.startswith(field + ".")
    )


def _parse_reference(spec: StudySpec, parse: Parse, reference: dict[str, Any]) -> None:
    """The first grid combination must parse, but for its own values' faults (checked per
    value next) and faults of combinations (rows with their error)."""
    try:
        parse(spec.compute, with_overrides(spec.base, reference))
    except ScenarioError as error:
        if error.field and not any(_blames(error, path) for path in reference):
            raise StudyError(
                f"base.{error.field}: {_reason(error)}", f"base.{error.field}"
            ) from None


def check_values(spec: StudySpec, parse: Parse) -> None:
    """Each grid value and each explicit scenario laid on the base (with the grid's first
    value elsewhere): a fault of the value's own field is the spec's (a StudyError naming
    it); a fault of the combination is left to the scenario's row."""
    reference = {path: values[0] for path, values in spec.grid.items()}
    _parse_reference(spec, parse, reference)
    for path, values in spec.grid.items():
        for position, value in enumerate(values):
            _check_one(spec, parse, {**reference, path: value}, [path], f"grid.{path}[{position}]")
    checked: set[str] = set()
    for position, overrides in enumerate(spec.scenarios):
        digest = json.dumps(overrides, sort_keys=True)
        if digest not in checked:  # explicit scenarios often repeat a few values
            checked.add(digest)
            _check_one(spec, parse, overrides, list(overrides), f"scenarios[{position}]")


def _check_one(
    spec: StudySpec, parse: Parse, overrides: dict[str, Any], paths: list[str], where: str
) -> None:
    try:
        parse(spec.compute, with_overrides(spec.base, overrides))
    except ScenarioError as error:
        if any(_blames(error, path) for path in paths):
            raise StudyError(f"{where}: {_reason(error)}", where) from None


def _reason(error: ScenarioError) -> str:
    """The message without its leading field name (the spec's own path replaces it)."""
    head, sep, rest = error.message.partition(": ")
    return rest if sep and error.field and head.startswith(error.field) else error.message
