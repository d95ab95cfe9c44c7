"""The objectives of the layout model and the bounds the searches move: one model serves
every solve (the optimum, its tie-break, each frontier point, the least memory above an MFU)
by setting variable domains rather than adding constraints."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from ortools.sat.python import cp_model, cp_model_helper

from optimizer.search.problem import KNOBS, SearchProblem
from optimizer.search.tables import Tables, axis_size
from optimizer.search.terms import PLACEMENT

# Memory tie-breaks compare kilobytes, so that memory * rank radix stays inside int64.
TIE_MEMORY_UNIT_BYTES = 1000
# The frontier weighs ln(MFU) above memory counted in MB (a layout within the same MB of a
# better one is dropped afterwards as dominated), so each point takes one solve.
FRONTIER_MEMORY_UNIT_BYTES = 10**6
INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class TieKey:
    """One key of the tie-break: sum(weights * literals), a value in 0..size-1."""

    literals: Sequence[cp_model.IntVar]
    weights: Sequence[int]
    size: int


@dataclass(frozen=True)
class TieStage:
    """Keys folded into one mixed-radix integer that stays inside int64."""

    var: cp_model.IntVar
    size: int


def tie_break_stages(keys: Sequence[TieKey], model: cp_model.CpModel) -> list[TieStage]:
    """Fold consecutive keys into as few mixed-radix stages as int64 allows; each stage is
    minimised in turn, the ones before it held. One stage, one solve, in every ordinary
    search; a model with 83,160 experts (and memory in hundreds of TB) needs two."""
    groups: list[list[TieKey]] = [[]]
    radix = 1
    for key in keys:
        if groups[-1] and radix * key.size >= INT64_MAX // 4:
            groups.append([])
            radix = 1
        groups[-1].append(key)
        radix *= key.size
    stages = []
    for number, group in enumerate(groups):
        literals: list[cp_model.IntVar] = []
        weights: list[int] = []
        size = 1
        for key in reversed(group):  # least significant first
            literals += key.literals
            weights += [size * w for w in key.weights]
            size *= key.size
        var = model.new_int_var(0, size - 1, f"tie_break_{number}")
        model.add(var == cp_model.LinearExpr.weighted_sum(literals, weights))
        stages.append(TieStage(var, size))
    return stages


class Objectives:
    """What LayoutModel (model.py) adds once its variables and constraints are in place."""

    model: cp_model.CpModel
    tables: Tables
    problem: SearchProblem
    rules: dict[str, cp_model.IntVar]
    degree_is: list[cp_model.IntVar]
    knob_is: dict[str, list[cp_model.IntVar]]
    memory_sum: cp_model.LinearExpr
    ln_mfu: cp_model.LinearExpr

    def add_search_bounds(self) -> None:
        """Memory as one variable whose domain caps it (the frontier's epsilon) and a floor
        under ln(MFU) (the tie-break stage): each solve sets their domains, so one model
        serves every solve."""
        self.unit_bytes = self.tables.memory_unit_bytes
        self.objectives: dict[str, cp_model_helper.CpObjectiveProto] = {}
        self.most_memory = self.most_memory_units()
        self.memory = self.model.new_int_var(0, self.most_memory, "memory")
        self.model.add(self.memory_sum == self.memory)
        low, high = self.ln_mfu_bounds()
        # ln(MFU) as one variable, equal to the rows' sum once: the floor, the objectives and
        # the read-back then name one variable instead of every row (a sum over 6,600 rows
        # took OR-Tools' Python ~20 ms to write as an objective, and ~3 ms to read back)
        self.ln_mfu_value = self.model.new_int_var(low, high, "ln_mfu")
        self.model.add(self.ln_mfu == self.ln_mfu_value)
        self.ln_mfu_floor = self.model.new_int_var(low, high, "ln_mfu_floor")
        self.model.add(self.ln_mfu_value >= self.ln_mfu_floor)
        memory_kb = self._memory_in_units(TIE_MEMORY_UNIT_BYTES, "memory_kb")
        memory_key = TieKey(
            [memory_kb], [1], self.most_memory // self._step(TIE_MEMORY_UNIT_BYTES) + 1
        )
        self.tie_break = tie_break_stages([memory_key, *self.tie_break_keys()], self.model)
        # The frontier's one-solve objective: most ln(MFU), then least memory in MB, over the
        # ln(MFU) variable: CP-SAT bounds a weighted sum by its terms' magnitudes, and over
        # the rows themselves that is every row's ln term (6,600 of them on the plate) times
        # the weight, past int64 on standard's tables, which then took two solves a point;
        # over one variable it is the largest |ln(MFU)| times the weight
        most_mb = self.most_memory // self._step(FRONTIER_MEMORY_UNIT_BYTES) + 1
        memory_mb = self._memory_in_units(FRONTIER_MEMORY_UNIT_BYTES, "memory_mb")
        self.mfu_then_memory = (most_mb + 1) * self.ln_mfu_value - memory_mb
        largest_ln = max(abs(low), abs(high))
        self.frontier_in_one_solve = (most_mb + 1) * (largest_ln + 1) < INT64_MAX // 4

    def to_units(self, value_bytes: float) -> int:
        """Bytes in the model's memory units (`Tables.memory_unit_bytes`), rounded down."""
        return int(np.floor(value_bytes / self.unit_bytes))

    def memory_bytes(self, solver: cp_model.CpSolver) -> int:
        return int(solver.value(self.memory)) * self.unit_bytes

    def _step(self, unit_bytes: int) -> int:
        return max(1, unit_bytes // self.unit_bytes)

    def _memory_in_units(self, unit_bytes: int, name: str) -> cp_model.IntVar:
        """Memory per device rounded down to whole `unit_bytes`."""
        step = self._step(unit_bytes)
        units = self.model.new_int_var(0, self.most_memory // step + 1, name)
        self.model.add(self.memory - step * units >= 0)
        self.model.add(self.memory - step * units < step)
        return units

    def _set_domain(self, var: cp_model.IntVar, low: int, high: int) -> None:
        domain = var.proto.domain  # writes through to the model
        domain[0], domain[1] = low, high

    def enforce(self, relaxed: frozenset[str] = frozenset()) -> None:
        """Every rule holds except the `relaxed` ones, which the solver may drop."""
        for name, literal in self.rules.items():
            self._set_domain(literal, 0 if name in relaxed else 1, 1)

    def cap_memory(self, cap_bytes: int | None) -> None:
        cap = (
            self.most_memory
            if cap_bytes is None
            else min(self.to_units(cap_bytes), self.most_memory)
        )
        self._set_domain(self.memory, 0, cap)

    def _objective(self, name: str, write: Callable[[], None]) -> None:
        """Set the objective `write` sets: a sum over every table row takes OR-Tools' Python
        ~20 ms to write (0.45 s of the plate's explanations), so each is written once per
        model and its proto copied back on later solves (the same proto, the same solve)."""
        saved = self.objectives.get(name)
        if saved is not None:
            self.model.clear_objective()
            self.model.proto.objective.copy_from(saved)
            return
        write()
        self.objectives[name] = cp_model_helper.CpObjectiveProto()
        self.objectives[name].copy_from(self.model.proto.objective)

    def _release_bounds(self) -> None:
        low, high = self.ln_mfu_bounds()
        self._set_domain(self.ln_mfu_floor, low, high)
        for stage in self.tie_break:
            self._set_domain(stage.var, 0, stage.size - 1)
        self.model.clear_hints()

    def stage_most_mfu(self) -> None:
        self._release_bounds()
        self._objective("most_mfu", lambda: self.model.maximize(self.ln_mfu_value))

    def stage_frontier_point(self) -> None:
        """Most ln(MFU) and, at it, least memory to the MB, in one solve."""
        self._release_bounds()
        self._objective("mfu_then_memory", lambda: self.model.maximize(self.mfu_then_memory))

    def stage_least_memory_above(self, ln_mfu_floor: int) -> None:
        """Least memory among layouts of ln(MFU) at least `ln_mfu_floor`."""
        self._set_domain(self.ln_mfu_floor, ln_mfu_floor, self.ln_mfu_bounds()[1])
        self.model.clear_hints()
        self.model.minimize(self.memory)

    def stage_tie_break(self, ln_mfu: int, solver: cp_model.CpSolver, stage: int = 0) -> None:
        """Among layouts of this ln(MFU): least memory (kB), then the tie-break rank, one
        stage at a time (`tie_break`), the stages before `stage` held at what `solver` found."""
        self._set_domain(self.ln_mfu_floor, ln_mfu, self.ln_mfu_bounds()[1])
        for earlier in self.tie_break[:stage]:
            value = int(solver.value(earlier.var))
            self._set_domain(earlier.var, value, value)
        self.model.clear_hints()
        for literals in [self.degree_is, *self.knob_is.values()]:
            for literal in literals:
                self.model.add_hint(literal, solver.boolean_value(literal))
        self.model.minimize(self.tie_break[stage].var)

    def ln_mfu_term_count(self) -> int:
        """How many rounded ln terms make up ln(MFU) (one per term and table)."""
        return sum(
            1
            for table in self.tables.tables
            for term in self.tables.terms
            if term.kind == "ln_mfu" and term.name in table.values
        )

    def ln_mfu_bounds(self) -> tuple[int, int]:
        low = high = 0
        for table in self.tables.tables:
            for term in self.tables.terms:
                if term.kind == "ln_mfu" and term.name in table.values:
                    low += int(table.values[term.name].min())
                    high += int(table.values[term.name].max())
        return low, high

    def tie_break_keys(self) -> list[TieKey]:
        """The tie-break order after memory, most significant first: tp, pp, cp (each by
        its rank among the candidates' values), each knob, the placement class."""
        keys = []
        for column in (0, 1, 2):
            ordered = np.unique(self.problem.degrees[:, column])
            positions = np.searchsorted(ordered, self.problem.degrees[:, column])
            keys.append(TieKey(self.degree_is, [int(p) for p in positions], len(ordered)))
        for axis in (*KNOBS, PLACEMENT):
            size = axis_size(self.tables, axis)
            keys.append(TieKey(self.knob_is[axis], list(range(size)), size))
        return keys

    def most_memory_units(self) -> int:
        return sum(
            int(table.values[t.name].max())
            for table in self.tables.tables
            for t in self.tables.terms
            if t.kind == "memory_bytes" and t.name in table.values
        )
