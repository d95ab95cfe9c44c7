"""Probe: profile standard's step time and memory as CP-SAT expressions over factored term
tables, the encoding issue 13 asks for, timed against the numpy optimum of the same box.

Run `.venv/bin/python -m bench.factored [MODEL GPUS [WORKERS]]` (default Llama 3 8B on 64
H100s, no engine). Not the production path and not a test: it measures whether the
encoding can answer fast (docs/performance.md, "Solver", what was tried).

Each term is taken from the cost model's own functions on a LayoutBox, so it depends on
exactly the box axes it reads: a layer's time (tuple, recompute, schedule, placement class),
the output head (tuple), the stage's layer counts (tuple, vpp), the pipeline sends, the
data-parallel sync and ZeRO-3 gathers (tuple, vpp, ZeRO, class), the schedule's slots
(tuple, vpp, schedule) and the worst stage's memory (tuple, vpp, ZeRO, recompute,
schedule). In CP-SAT each is an element constraint over its table, indexed by the choices
it reads; the busiest stage is three products and a maximum, each exposure a bound (the step
grows with it), and the step `slots x per micro-batch + exposed sync` one more product.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from ortools.sat.python import cp_model

from bench.report import h100_job
from optimizer import Request
from optimizer.costmodel import LayoutBox
from optimizer.costmodel.standard import breakdown as bd
from optimizer.costmodel.standard import data_parallel as dpl
from optimizer.costmodel.standard import memory as mem
from optimizer.costmodel.standard import ranks as rnk
from optimizer.costmodel.standard import times as tim
from optimizer.costmodel.standard.profile import box_degrees
from optimizer.search import narrow_to_rules
from optimizer.search.placements import placement_classes
from optimizer.search.problem import KNOBS, SearchProblem, valid_knob_mask
from optimizer.searches import prepare_search

AXES = ("tuple", *KNOBS, "class")
NS = 1e9  # times in integer nanoseconds
BIG = 4 * 10**15
COUNTS = ("first", "middle", "last", "pp_is_1")  # unitless terms


@dataclass(frozen=True)
class Box:
    problem: SearchProblem
    shape: tuple[int, ...]
    terms: dict[str, np.ndarray]  # each broadcastable to shape
    memory_bytes: np.ndarray  # on the axes it reads, broadcastable to shape
    step_s: np.ndarray  # the cost model's own step time, every cell
    valid: np.ndarray  # layouts (knob rules and the tuple's placement classes)
    class_codes: np.ndarray
    overlaps: tuple[float, float]  # ZeRO-3 / per-micro-batch sync, per-step sync


def priced_box(model: str, gpus: int) -> Box:
    job = h100_job(gpus, model)
    problem, a = prepare_search(Request(job, engine=None))
    problem = narrow_to_rules(problem)
    codes = placement_classes(problem).codes()
    knobs = {knob: tuple(problem.knobs[knob]) for knob in KNOBS}
    box = LayoutBox(problem.degrees, knobs, np.maximum(codes, 0))
    k = box_degrees(box)
    with np.errstate(all="ignore"):
        m = job.training.global_batch // (k.dp * k.micro_batch)
        layers = mem.stage_layers(job.model.num_layers, k.pp, k.vpp)
        times = bd.layer_times(job, a, k)
        warmup = tim.warmup_micro_batches(
            k.pp, k.vpp, k.schedule, a.zero_bubble_weight_grad_fraction
        )
        dp_step, dp_mb, zero3_mb = dpl.data_parallel_s(
            job, dpl.data_parallel_sync(job, a), k, layers
        )
        parts = bd.stage_memory(job, a, k, m)
        terms = {
            "layer": sum(times[part] for part in bd.LAYER_PARTS),
            "head": rnk.head_s(job, a, k),
            "first": layers.first,
            "middle": np.where(k.pp > 2, layers.middle, 0),
            "last": layers.last,
            "pp_is_1": (k.pp == 1).astype(float),
            "p2p": rnk.p2p_s(job, a, k),
            "dp_step": dp_step,
            "dp_mb": dp_mb,
            "zero3_mb": zero3_mb,
            "slots": m + warmup,
        }
        step = bd.breakdown(job, a, k).step_time_s
    memory = parts.weights + parts.gradients + parts.optimizer + parts.activations
    return Box(
        problem,
        box.shape,
        terms,
        memory,
        np.broadcast_to(step, box.shape),
        _valid(job, k, codes, box.shape),
        codes,
        (float(a.zero3_overlap_fraction), float(a.dp_overlap_microbatches)),
    )


def _valid(job: Any, k: Any, codes: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The knob rules (valid_knob_mask) over the box, and each tuple's own classes."""
    args = np.broadcast_arrays(k.pp, k.dp, k.vpp, k.micro_batch, k.cp, k.schedule, k.ep)
    one_class = tuple(slice(None) if i < len(shape) - 1 else slice(0, 1) for i in range(len(shape)))
    rules = valid_knob_mask(job, *[np.ascontiguousarray(x[one_class]) for x in args])
    classes = (codes >= 0).reshape(shape[0], *([1] * (len(shape) - 2)), shape[-1])
    return np.broadcast_to(rules, shape) & np.broadcast_to(classes, shape)


def axes_of(values: Any, shape: tuple[int, ...]) -> tuple[tuple[int, ...], np.ndarray]:
    """The box axes a term varies along, and the term on those axes alone."""
    x = np.asarray(values, dtype=float)
    x = x.reshape((1,) * (len(shape) - x.ndim) + x.shape)
    axes = tuple(i for i, size in enumerate(x.shape) if size > 1)
    squeezed = x.reshape([x.shape[i] for i in axes] or [1])
    return axes, squeezed


class FactoredModel:
    """The CP-SAT model: one integer choice per box axis, one element per term."""

    def __init__(self, box: Box) -> None:
        self.box, self.model = box, cp_model.CpModel()
        self.choice = [self.model.new_int_var(0, n - 1, AXES[i]) for i, n in enumerate(box.shape)]
        self.add_validity()
        scale = {name: 1.0 if name in COUNTS else NS for name in box.terms}
        scale["slots"] = 1000.0  # thousandths of a slot
        self.term = {name: self.element(name, t, scale[name]) for name, t in box.terms.items()}
        self.add_memory_limit()
        self.add_step_time()

    def add_validity(self) -> None:
        axes, rules = axes_of(self.box.valid[..., :1], self.box.shape)
        allowed = [tuple(int(i) for i in row) for row in np.argwhere(rules > 0)]
        self.model.add_allowed_assignments([self.choice[i] for i in axes], allowed)
        pairs = [(int(t), int(c)) for t, c in np.argwhere(self.box.class_codes >= 0)]
        self.model.add_allowed_assignments([self.choice[0], self.choice[-1]], pairs)

    def element(self, name: str, values: Any, scale: float) -> cp_model.IntVar:
        axes, table = axes_of(values, self.box.shape)
        scaled = np.nan_to_num(np.rint(table.ravel() * scale), nan=BIG, posinf=BIG)
        flat = np.minimum(scaled, BIG).astype(np.int64)
        var = self.model.new_int_var(int(flat.min()), int(flat.max()), name)
        if not axes:
            self.model.add(var == int(flat[0]))
            return var
        sizes = [self.box.shape[i] for i in axes]
        radix = [int(np.prod(sizes[j + 1 :])) for j in range(len(sizes))]
        index = self.model.new_int_var(0, flat.size - 1, f"{name}_index")
        self.model.add(index == sum(r * self.choice[i] for r, i in zip(radix, axes, strict=True)))
        self.model.add_element(index, flat.tolist(), var)
        return var

    def add_memory_limit(self) -> None:
        memory_kb = self.element("memory_kb", self.box.memory_bytes, 1e-3)
        self.model.add(memory_kb <= int(self.box.problem.memory_limit_bytes / 1e3))

    def product(self, x: cp_model.IntVar, y: cp_model.IntVar, name: str) -> cp_model.IntVar:
        z = self.model.new_int_var(0, BIG, name)
        self.model.add_multiplication_equality(z, [x, y])
        return z

    def exposed(self, comm: Any, hiding: Any, overlap: float, name: str) -> cp_model.IntVar:
        """max(comm - overlap x hiding, 0), as a lower bound: the step grows with it."""
        exposed = self.model.new_int_var(0, BIG, name)
        num, den = overlap.as_integer_ratio()
        self.model.add(den * exposed >= den * comm - num * hiding)
        return exposed

    def add_step_time(self) -> None:
        t, p = self.term, self.product
        first = p(t["first"], t["layer"], "first_layers") + p(t["pp_is_1"], t["head"], "head_1")
        last = p(t["last"], t["layer"], "last_layers") + t["head"]
        busy = self.model.new_int_var(0, BIG, "busiest_stage")
        stages = [first, p(t["middle"], t["layer"], "middle_layers"), last]
        stage_vars = [self.model.new_int_var(0, BIG, f"stage_{i}") for i in range(3)]
        for var, expr in zip(stage_vars, stages, strict=True):
            self.model.add(var == expr)
        self.model.add_max_equality(busy, stage_vars)
        mb_overlap, step_overlap = self.box.overlaps
        per_mb = self.model.new_int_var(0, BIG, "per_micro_batch")
        hidden = [
            self.exposed(t[n], busy, mb_overlap, f"{n}_exposed") for n in ("zero3_mb", "dp_mb")
        ]
        self.model.add(per_mb == busy + t["p2p"] + sum(hidden))
        dp_exposed = self.exposed(t["dp_step"], per_mb, step_overlap, "dp_exposed")
        self.step = self.model.new_int_var(0, BIG, "step_ns_x1000")
        self.model.add(self.step == p(t["slots"], per_mb, "slots_x_per_mb") + 1000 * dp_exposed)
        self.model.minimize(self.step)


def main(argv: list[str]) -> int:
    model, gpus = (argv[0], int(argv[1])) if len(argv) >= 2 else ("llama3-8b", 64)
    workers = int(argv[2]) if len(argv) >= 3 else 1
    start = time.perf_counter()
    box = priced_box(model, gpus)
    fits = box.valid & (
        np.broadcast_to(box.memory_bytes, box.shape) <= box.problem.memory_limit_bytes
    )
    cells = np.where(fits & np.isfinite(box.step_s), box.step_s, np.inf)
    best = np.unravel_index(np.argmin(cells), box.shape)
    print(f"{model} on {gpus:,}: box {box.shape}, {int(fits.sum()):,} layouts that fit; "
          f"numpy optimum {float(cells[best]):.4f} s; terms in {time.perf_counter() - start:.2f} s")  # fmt: skip
    for name, values in {**box.terms, "memory": box.memory_bytes}.items():
        axes, table = axes_of(values, box.shape)
        print(f"  {name:9s} over {', '.join(AXES[i] for i in axes) or '-'}: {table.size:,} entries")
    start = time.perf_counter()
    factored = FactoredModel(box)
    built_s = time.perf_counter() - start
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = workers
    solver.parameters.max_time_in_seconds = 60.0
    status = solver.solve(factored.model)
    print(f"CP-SAT ({workers} worker): built in {built_s:.2f} s, {solver.status_name(status)} in "
          f"{solver.wall_time:.2f} s, {solver.num_branches:,} branches")  # fmt: skip
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        cell = tuple(solver.value(var) for var in factored.choice)
        print(f"  its layout: {solver.value(factored.step) / 1000 / NS:.4f} s in the model, "
              f"{float(box.step_s[cell]):.4f} s by the cost model")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
