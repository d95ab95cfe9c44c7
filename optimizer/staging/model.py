"""The CP-SAT model of one layout's stage plan, read top to bottom like OR-Tools' samples:
data (plan_tables), variables, one `add_<family>` per constraint family, the objective,
read-back. The solves that drive it over many layouts are in search.py.

What the solver chooses: each pipeline rank's layer count and recompute mode. Every
constraint is a cost-model formula, linear in those choices:
- a rank's time: sum over modes of (layers at that mode x the layer's time at it), plus
  the head on the last;
- a rank's memory: the same sum over bytes per layer (state and held activations), plus
  full recompute's working layer if its mode is full, plus the embedding or head state;
- a rank's data-parallel seconds: an element lookup on its layer count;
- the step: the busiest rank (a maximum), the traffic hidden under it (maxima with zero),
  slots x the micro-batch slot plus the per-step sync left exposed.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from models.layout import Recompute
from optimizer.costmodel import RECOMPUTE_CODES
from optimizer.staging.tables import FRACTION_SCALE, MAX_OBJECTIVE, PlanTables

FULL = RECOMPUTE_CODES.index(Recompute.FULL)


class StageModel:
    """Variables and constraints of one layout's plan; `uniform` ties every rank's mode."""

    def __init__(self, tables: PlanTables, uniform_recompute: bool) -> None:
        self.tables, self.model = tables, cp_model.CpModel()
        self.add_layer_counts()
        self.add_recompute_modes(uniform_recompute)
        self.add_rank_times()
        self.add_rank_memory()
        self.add_data_parallel_lookups()
        self.add_step_objective()

    # --- variables ------------------------------------------------------------------

    def add_layer_counts(self) -> None:
        """Every rank a layer in each of its vpp chunks; all layers placed once."""
        t = self.tables
        most = t.num_layers - t.vpp * (t.pp - 1)
        self.layers = [
            self.model.new_int_var(t.vpp, most, f"layers_on_rank_{r}") for r in range(t.pp)
        ]
        self.model.add(sum(self.layers) == t.num_layers)

    def add_recompute_modes(self, uniform: bool) -> None:
        """One mode per rank (of the allowed ones); `layers_at[r][m]` is the rank's layer
        count when its mode is m, else 0."""
        t, model = self.tables, self.model
        self.mode_is: list[dict[int, cp_model.IntVar]] = []
        self.layers_at: list[dict[int, cp_model.IntVar]] = []
        for r in range(t.pp):
            is_mode = {
                m: model.new_bool_var(f"rank_{r}_recomputes_{RECOMPUTE_CODES[m].value}")
                for m in t.modes
            }
            model.add_exactly_one(is_mode.values())
            at = {m: model.new_int_var(0, t.num_layers, f"rank_{r}_layers_at_{m}") for m in t.modes}
            for m in t.modes:
                model.add(at[m] == self.layers[r]).only_enforce_if(is_mode[m])
                model.add(at[m] == 0).only_enforce_if(~is_mode[m])
            self.mode_is.append(is_mode)
            self.layers_at.append(at)
        if uniform:
            for r in range(1, t.pp):
                for m in t.modes:
                    model.add(self.mode_is[r][m] == self.mode_is[0][m])

    # --- constraint families ----------------------------------------------------------

    def add_rank_times(self) -> None:
        """busy = the slowest rank's micro-batch: its layers at their mode, the head last."""
        t, model = self.tables, self.model
        most = t.num_layers * max(t.layer_units[m] for m in t.modes) + t.head_units
        self.rank_time = []
        for r in range(t.pp):
            time = model.new_int_var(0, most, f"rank_{r}_time")
            head = t.head_units if r == t.pp - 1 else 0
            model.add(time == sum(t.layer_units[m] * self.layers_at[r][m] for m in t.modes) + head)
            self.rank_time.append(time)
        self.busy = model.new_int_var(0, most, "busiest_rank_time")
        model.add_max_equality(self.busy, self.rank_time)
        # redundant, for the bound: the slowest rank is no faster than the average
        model.add(t.pp * self.busy >= sum(self.rank_time))

    def add_rank_memory(self) -> None:
        """Each rank within the memory limit."""
        t = self.tables
        for r, rank in enumerate(t.ranks):
            held = sum(rank.layer_bytes[m] * self.layers_at[r][m] for m in t.modes)
            working = sum(
                t.working_bytes[m] * self.mode_is[r][m] for m in t.modes if t.working_bytes[m]
            )
            self.model.add(held + working + rank.fixed_bytes <= t.memory_limit_bytes).with_name(
                f"memory_of_rank_{r}"
            )

    def add_data_parallel_lookups(self) -> None:
        """Each rank's gradient sync and ZeRO-3 seconds by its layer count; the step waits
        for the slowest of each."""
        self.dp_step = self._slowest("dp_step", [rank.dp_step_units for rank in self.tables.ranks])
        self.dp_mb = self._slowest(
            "dp_micro_batch", [rank.dp_micro_batch_units for rank in self.tables.ranks]
        )
        self.zero3 = self._slowest("zero3", [rank.zero3_units for rank in self.tables.ranks])
        self.optimizer_step = self._slowest(
            "optimizer_step", [rank.optimizer_units for rank in self.tables.ranks]
        )

    def _slowest(self, name: str, by_rank: list[tuple[int, ...]]) -> cp_model.IntVar | int:
        """max over ranks of table_r[layers_r]. Ranks sharing a non-decreasing table (the
        middle ones: no embedding, same parameters per layer) look up their largest layer
        count once: f(max n) = max f(n)."""
        if not any(any(values) for values in by_rank):
            return 0
        top = max(max(values) for values in by_rank)
        groups: dict[tuple[int, ...], list[int]] = {}
        for r, values in enumerate(by_rank):
            groups.setdefault(values, []).append(r)
        each = []
        for g, (values, ranks) in enumerate(groups.items()):
            monotone = all(x <= y for x, y in zip(values[1:], values[2:], strict=False))
            lookups = [ranks] if monotone else [[r] for r in ranks]
            for i, members in enumerate(lookups):
                index = self._largest(f"{name}_{g}_{i}", members)
                var = self.model.new_int_var(0, top, f"{name}_of_group_{g}_{i}")
                self.model.add_element(index, list(values), var)
                each.append(var)
        slowest = self.model.new_int_var(0, top, f"slowest_{name}")
        self.model.add_max_equality(slowest, each)
        return slowest

    def _largest(self, name: str, ranks: list[int]) -> cp_model.IntVar:
        if len(ranks) == 1:
            return self.layers[ranks[0]]
        var = self.model.new_int_var(0, self.tables.num_layers, f"most_layers_{name}")
        self.model.add_max_equality(var, [self.layers[r] for r in ranks])
        return var

    def add_step_objective(self) -> None:
        """step x FRACTION_SCALE^2 = slots x slot + the per-step sync left exposed, where
        slot = busy + sends + ZeRO-3 and per-micro-batch sync beyond what hides under busy,
        then the slowest rank's optimiser step."""
        t, model, k = self.tables, self.model, FRACTION_SCALE
        top = MAX_OBJECTIVE // max(t.slots_scaled, 1)
        s = t.slowdown_scaled
        z3 = self._exposed(
            "zero3_exposed",
            k * self.zero3 - t.zero3_overlap_scaled * self.busy,
            s * self.zero3,
            top,
        )
        mb = self._exposed(
            "dp_micro_batch_exposed",
            k * self.dp_mb - t.zero3_overlap_scaled * self.busy,
            s * self.dp_mb,
            top,
        )
        self.slot = model.new_int_var(0, top, "micro_batch_slot")
        model.add(self.slot == k * self.busy + k * t.p2p_units + z3 + mb)
        dp = self._exposed(
            "dp_step_exposed",
            k * k * self.dp_step - t.dp_overlap_scaled * self.slot,
            t.dp_floor_scaled * k * self.dp_step,
            MAX_OBJECTIVE,
        )
        self.step = t.slots_scaled * self.slot + dp + k * k * self.optimizer_step
        model.minimize(self.step)

    def _exposed(
        self, name: str, expression: cp_model.LinearExprT, floor: cp_model.LinearExprT, top: int
    ) -> cp_model.IntVar:
        """max(expression, floor): what a term costs after hiding, at least `floor` (the
        compute a hidden transfer slows, times.exposed_s)."""
        var = self.model.new_int_var(0, top, name)
        gap = self.model.new_int_var(-top, top, f"{name}_before_hiding")
        least = self.model.new_int_var(0, top, f"{name}_when_hidden")
        self.model.add(gap == expression)
        self.model.add(least == floor)
        self.model.add_max_equality(var, [gap, least])
        return var

    # --- read-back --------------------------------------------------------------------

    def read(self, solver: cp_model.CpSolver) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(layers, recompute code) of each rank in the solver's answer."""
        layers = tuple(int(solver.value(v)) for v in self.layers)
        modes = tuple(
            next(m for m, is_mode in by_mode.items() if solver.boolean_value(is_mode))
            for by_mode in self.mode_is
        )
        return layers, modes
