"""The CP-SAT model of the layout search, read top to bottom like OR-Tools' samples:
data (tables from the cost model), variables, one `add_<family>` per constraint family,
objective (most ln(MFU), the tie-break, the frontier's bounds), read-back; the solves
that drive it are in solve.py, on the CP-SAT kernel (optimizer/cpsat).

Encoding (docs: cpsat-notes.md): one Boolean per candidate degree tuple and per knob value;
prime-exponent variables per degree carrying the degree product and the divisibility rules;
one Boolean per row of each term table, tied to those by channelling sums. Memory is the sum of its four parts in whole bytes;
ln(MFU) is the sum of the logarithms of its utilisation factors scaled by LN_MFU_SCALE.
Every rule the user may relax has an enforcement literal named after it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
from ortools.sat.python import cp_model, cp_model_helper

from models.layout import Layout
from optimizer.costmodel import RECOMPUTE_CODES, LayoutGrid
from optimizer.search.problem import (
    EVEN_STAGES,
    KNOBS,
    KV_HEADS,
    MEMORY_LIMIT,
    MIN_INTERLEAVED_PP,
    degree_columns,
)
from optimizer.search.structure import DegreeStructure
from optimizer.search.tables import Tables, axis_size
from optimizer.search.terms import PLACEMENT, Table, term_totals
from optimizer.search.tie_break import INT64_MAX, TieKey, tie_break_stages

# Memory tie-breaks compare kilobytes, so that memory * rank radix stays inside int64.
TIE_MEMORY_UNIT_BYTES = 1000
# The frontier weighs ln(MFU) above memory counted in MB (a layout within the same MB of a
# better one is dropped afterwards as dominated), so each point takes one solve.
FRONTIER_MEMORY_UNIT_BYTES = 10**6


def _name(value: int, knob: str) -> str:
    return RECOMPUTE_CODES[value].value if knob == "recompute" else str(value)


class LayoutModel:
    """Variables and constraints of one search problem; `rules` maps names to literals."""

    def __init__(self, tables: Tables, without: frozenset[str] = frozenset()) -> None:
        """`without`: structural families to leave out (tests show each one does work)."""
        self.tables, self.problem = tables, tables.problem
        self.model = cp_model.CpModel()
        self.rules: dict[str, cp_model.IntVar] = {}
        self.add_degree_variables()
        self.add_knob_variables()
        self.add_structure(without)
        self.add_term_tables()
        self.add_kv_heads()
        self.add_even_stages()
        self.add_min_interleaved_pp()
        self.add_engine_rules()
        self.add_fixed_values()
        self.add_allowed_knobs()
        self.add_search_bounds()
        self.add_memory_limit()

    # --- variables ------------------------------------------------------------------

    def add_degree_variables(self) -> None:
        """Exactly one (tp, pp, cp, dp) tuple of the candidates."""
        self.degree_is = [
            self.model.new_bool_var(f"degrees_are_t{t}_p{p}_c{c}_d{d}")
            for t, p, c, d in self.problem.degrees
        ]
        self.model.add_exactly_one(self.degree_is)

    def degree_expr(self, column: int, values: np.ndarray | None = None) -> cp_model.LinearExpr:
        """A per-tuple number (by default the degree in `column`) of the chosen tuple."""
        coefficients = self.problem.degrees[:, column] if values is None else values
        return cp_model.LinearExpr.weighted_sum(self.degree_is, [int(v) for v in coefficients])

    def add_knob_variables(self) -> None:
        """Exactly one value per knob; placement is chosen as a class of equally priced orders."""
        self.knob_is: dict[str, list[cp_model.IntVar]] = {}
        for knob in KNOBS:
            self.knob_is[knob] = [
                self.model.new_bool_var(f"{knob}_is_{_name(value, knob)}")
                for value in self.problem.knobs[knob]
            ]
        self.knob_is[PLACEMENT] = [
            self.model.new_bool_var(f"placement_class_is_{j}")
            for j in range(self.tables.classes.count)
        ]
        for literals in self.knob_is.values():
            self.model.add_exactly_one(literals)

    def knob_expr(self, knob: str, values: Sequence[int]) -> cp_model.LinearExpr:
        return cp_model.LinearExpr.weighted_sum(self.knob_is[knob], [int(v) for v in values])

    # --- constraints ----------------------------------------------------------------

    def add_structure(self, without: frozenset[str]) -> None:
        """The degree product, divisibility and layer rules over prime exponents
        (cpsat_structure.py: one `add_<family>` each)."""
        problem = self.problem
        self.structure = DegreeStructure(
            self, problem.degrees, problem.knobs["micro_batch"], problem.knobs["vpp"]
        )
        self.structure.add(problem.job, without)

    def add_term_tables(self) -> None:
        """One row of each table holds: the row whose degree tuple and knob values are chosen.

        Its terms give the memory parts and the logarithms of the utilisation factors;
        memory and ln(MFU) are each one weighted sum of the rows, their terms added per row
        beforehand (four memory parts are one coefficient a row, not four)."""
        self.table_rows: list[list[cp_model.IntVar]] = []
        memory_parts, ln_mfu_parts = [], []
        for table in self.tables.tables:
            rows = [self.model.new_bool_var(name) for name in self._row_names(table)]
            self.model.add_exactly_one(rows)
            self.table_rows.append(rows)
            row_index = np.asarray([row.index for row in rows], dtype=np.int64)
            self._channel(row_index, table.degree_index, self.degree_is)
            for axis in table.axes:
                self._channel(row_index, table.axis_index[axis], self.knob_is[axis])
            if table.values:
                totals = term_totals(table, self.tables.terms)
                memory_parts.append(self._weighted_rows(rows, totals["memory_bytes"]))
                ln_mfu_parts.append(self._weighted_rows(rows, totals["ln_mfu"]))
        self.add_search_order()
        self.memory_sum = cp_model.LinearExpr.sum(memory_parts)
        self.ln_mfu = cp_model.LinearExpr.sum(ln_mfu_parts)

    def _weighted_rows(self, rows: list, values: np.ndarray) -> cp_model.LinearExpr:
        return cp_model.LinearExpr.weighted_sum(rows, values.tolist())

    def _row_names(self, table: Table) -> list[str]:
        """e.g. `row_t8_p16_c1_d128_vpp_4_micro_batch_1_recompute_none_placement_0`."""
        degrees = [f"row_t{t}_p{p}_c{c}_d{d}" for t, p, c, d in self.problem.degrees]
        columns = [[degrees[k] for k in table.degree_index]]
        for axis in table.axes:
            size = axis_size(self.tables, axis)
            values = (
                range(size)
                if axis == PLACEMENT
                else [_name(v, axis) for v in self.problem.knobs[axis]]
            )
            labels = [f"_{axis}_{value}" for value in values]
            columns.append([labels[j] for j in table.axis_index[axis]])
        return ["".join(parts) for parts in zip(*columns, strict=True)]

    def add_search_order(self) -> None:
        """Branch on the largest table's rows best first: most ln(MFU), least memory, then
        the tie-break order. With one table (each row a whole layout) the first row that
        fits is the optimum, and the bound that follows closes the proof."""
        # the largest table with terms (a table of engine rules alone has no order to give)
        sizes = [len(t.degree_index) if t.values else -1 for t in self.tables.tables]
        largest = int(np.argmax(sizes))
        table = self.tables.tables[largest]
        parts = term_totals(table, self.tables.terms)
        ranks = [table.axis_index[axis] for axis in reversed(table.axes)]
        order = np.lexsort((*ranks, parts["memory_bytes"], -parts["ln_mfu"]))
        rows = self.table_rows[largest]
        # written into the proto as variable indices: OR-Tools' add_decision_strategy wraps
        # each row in an expression object, ~24 ms on a 6,600-row table, a quarter of a build
        strategy = self.model.proto.search_strategy.add()
        strategy.variables.extend([rows[r].index for r in order])
        strategy.variable_selection_strategy = cp_model.CHOOSE_FIRST
        strategy.domain_reduction_strategy = cp_model.SELECT_MAX_VALUE

    def _channel(self, row_index: np.ndarray, index: np.ndarray, literals: list) -> None:
        """The rows of each value of an axis sum to that value's literal. Written into the
        proto from the rows' variable indices: OR-Tools' expression objects took ~5 ms an
        axis on a 6,600-row table, a quarter of a model's build."""
        order = np.argsort(index, kind="stable")
        bounds = np.searchsorted(index[order], np.arange(len(literals) + 1))
        for value, literal in enumerate(literals):
            chosen = row_index[order[bounds[value] : bounds[value + 1]]].tolist()
            linear = self.model.proto.constraints.add().linear
            linear.vars.extend([*chosen, literal.index])
            linear.coeffs.extend([1] * len(chosen) + [-1])
            linear.domain.extend([0, 0])

    def _rule(self, name: str) -> cp_model.IntVar:
        self.rules[name] = self.model.new_bool_var(f"rule_{name}")
        return self.rules[name]

    def add_kv_heads(self) -> None:
        """tp divides the KV heads (Megatron-LM's rule; the cost model prices it anyway)."""
        if not self.problem.require_kv_divisibility:
            return
        kv_heads = self.problem.job.model.num_kv_heads
        breaks = (kv_heads % self.problem.degrees[:, 0] != 0).astype(np.int64)
        if not breaks.any():  # a rule nothing breaks has nothing to relax or to blame
            return
        self.model.add(self.degree_expr(0, breaks) == 0).only_enforce_if(self._rule(KV_HEADS))

    def add_even_stages(self) -> None:
        """Every chunk holds the same number of layers: pp * vpp divides num_layers (engines
        without uneven pipeline splits). Per vpp value, the tuples whose pp breaks it are
        barred while that value is chosen."""
        if not self.problem.require_even_stages:
            return
        layers, pp = self.problem.job.model.num_layers, self.problem.degrees[:, 1]
        self._bar_pp_by_vpp(EVEN_STAGES, lambda vpp: layers % (pp * vpp) != 0)

    def add_min_interleaved_pp(self) -> None:
        """Interleaving needs at least `min_interleaved_pp` stages (Megatron-LM asserted more
        than 2): with vpp > 1 chosen, the tuples with fewer stages are barred."""
        fewest = self.problem.min_interleaved_pp
        if fewest is None:
            return
        pp = self.problem.degrees[:, 1]
        self._bar_pp_by_vpp(MIN_INTERLEAVED_PP, lambda vpp: (vpp > 1) & (pp < fewest))

    def _bar_pp_by_vpp(self, name: str, breaks: Callable[[int], np.ndarray]) -> None:
        """A rule on (pp, vpp): per vpp value, the degree tuples it breaks are barred while
        that value is chosen and the rule holds."""
        barred_by_vpp = [breaks(int(vpp)).astype(np.int64) for vpp in self.problem.knobs["vpp"]]
        if not any(barred.any() for barred in barred_by_vpp):
            return  # a rule nothing breaks has nothing to relax or to blame
        rule = self._rule(name)
        for barred, vpp_is in zip(barred_by_vpp, self.knob_is["vpp"], strict=True):
            if barred.any():
                self.model.add(self.degree_expr(1, barred) == 0).only_enforce_if([rule, vpp_is])

    def add_engine_rules(self) -> None:
        """Each rule of the request's engine ("Megatron-LM requires ..."): the rows of a table
        of whole layouts that break it are barred while it holds."""
        for name in self.problem.engine_rules:
            for table, rows in zip(self.tables.tables, self.table_rows, strict=True):
                if name not in table.breaks:
                    continue
                barred = [rows[r] for r in np.flatnonzero(table.breaks[name])]
                if barred:  # a rule nothing breaks has nothing to relax or to blame
                    literal = self._rule(name)
                    self.model.add(cp_model.LinearExpr.sum(barred) == 0).only_enforce_if(literal)
                break

    def add_fixed_values(self) -> None:
        """Degrees and knobs the user fixed."""
        columns = {"tp": 0, "pp": 1, "cp": 2}
        for name, value in self.problem.fixed.items():
            if name in columns:
                expr = self.degree_expr(columns[name])
            else:
                expr = self.knob_expr(name, self.problem.knobs[name])
            self.model.add(expr == value).only_enforce_if(self._rule(f"fixed_{name}"))

    def add_allowed_knobs(self) -> None:
        """Knob values the user allows among those the profile prices (ZeRO, recompute)."""
        for knob, allowed in self.problem.allowed.items():
            barred = [
                lit
                for v, lit in zip(self.problem.knobs[knob], self.knob_is[knob], strict=True)
                if v not in allowed
            ]
            if not barred:
                continue
            self.model.add(sum(barred) == 0).only_enforce_if(self._rule(f"{knob}_allowed"))

    def add_memory_limit(self) -> None:
        """Memory per device (whole bytes, the sum of its parts) within the limit."""
        limit = self.to_units(self.problem.memory_limit_bytes)
        self.model.add(self.memory <= limit).only_enforce_if(self._rule(MEMORY_LIMIT))

    # --- read-back ------------------------------------------------------------------

    def layout(self, solver: cp_model.CpSolver) -> Layout:
        k = next(i for i, lit in enumerate(self.degree_is) if solver.boolean_value(lit))
        chosen = {
            axis: next(i for i, lit in enumerate(lits) if solver.boolean_value(lit))
            for axis, lits in self.knob_is.items()
        }
        values = {
            knob: np.asarray([self.problem.knobs[knob][chosen[knob]]], dtype=np.int64)
            for knob in KNOBS
        }
        placement = self.tables.classes.representative[k][chosen[PLACEMENT]]
        degrees = self.problem.degrees[k : k + 1]
        grid = LayoutGrid(**degree_columns(degrees), placement=np.asarray([placement]), **values)
        return grid.layout(0)

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


def rule_names(tables: Tables) -> tuple[str, ...]:
    """The rules a LayoutModel of `tables` holds a literal for, read off a model of a few of
    its rows: the first and one breaking each engine rule. An engine rule gets a literal when
    some row breaks it (add_engine_rules), every other rule from the problem's degrees and
    knobs alone, so a few rows name the same rules as thousands (on the megatron plate the
    wide table's 10,542 rows take 0.1 s to load)."""
    if len(tables.tables) != 1:
        return tuple(LayoutModel(tables).rules)
    table = tables.tables[0]
    breaking = {int(np.argmax(broken)) for broken in table.breaks.values() if broken.any()}
    few = table.take(np.array(sorted(breaking | {0})))
    return tuple(LayoutModel(replace(tables, tables=(few,))).rules)
