"""The CP-SAT model of one plan, read top to bottom: data, variables, one `add_<family>` per
constraint family, and the objectives its solves stage (solve.py).

Variables, each named after what it means:
- `choose[j][o]`: job j runs in its option o (option 0: nothing); one per job;
- `nodes_in[j, c]`: how many nodes of cell c (a rack, or a multi-node NVLink domain) job j
  gets; the read-back names them, lowest ids first (cluster.py);
- `uses[j, c]`: job j has nodes in cell c; `rack_used[j, p, r]`: in rack r of pool p;
- in NVLink-domain pools, `whole[j, c]` (the domain is all j's) and `remainder[j, c]` (the
  one domain holding j's nodes beyond whole domains).
Rules a conflict may name are enforcement literals in `rules` (constant true in a plain
solve): must_run, keeps_nodes, capacity, unavailable, nvlink_domains.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from ortools.sat.python import cp_model

from optimizer.planning.cluster import Cell
from optimizer.planning.options import OptionTable
from optimizer.planning.problem import PlanProblem

Literal = cp_model.IntVar
# Symmetry keys stay below this, so that CP-SAT's LP sees them exactly (doubles: 2^53).
SYMMETRY_KEY_LIMIT = 2**50


class BuildOutOfTime(Exception):
    """The caller's time ran out while the node families were being added: a model of
    tens of thousands of node-count variables takes seconds to build, more on a busy host
    than any estimate made beforehand, and a build is not a solve that a time limit stops."""


class PlanModel:
    def __init__(
        self,
        problem: PlanProblem,
        table: OptionTable,
        free_rules: bool = False,
        out_of_time: Callable[[], bool] | None = None,
    ):
        self.problem, self.table = problem, table
        self.out_of_time = out_of_time
        self.model = cp_model.CpModel()
        self.free_rules = free_rules
        self.rules: dict[str, Literal] = {}
        self.cells: tuple[Cell, ...] = problem.cells() if problem.assign_nodes else ()
        self.choose = [
            [self.model.new_bool_var(self._option_name(j, o)) for o in range(len(opts))]
            for j, opts in enumerate(table.options)
        ]
        self.nodes_in: dict[tuple[int, int], cp_model.IntVar] = {}
        self.uses: dict[tuple[int, int], Literal] = {}
        self.rack_used: dict[tuple[int, int, int], Literal] = {}
        self.add_one_option_per_job()
        self.add_job_rules()
        self.add_pool_capacity()
        if problem.assign_nodes:
            for add_family in (
                self.add_node_counts,
                self.add_cell_capacity,
                self.add_stays_keep_their_nodes,
                self.add_nvlink_domains,
                self.add_racks_spanned,
                self.add_least_racks,
                self.add_identical_racks_in_order,
            ):
                self.check_time()
                add_family()

    def check_time(self) -> None:
        """BuildOutOfTime once the caller's time is up: checked between families and, in
        those that grow with jobs x cells, job by job."""
        if self.out_of_time is not None and self.out_of_time():
            raise BuildOutOfTime()

    # --- data ----------------------------------------------------------------------------

    def _option_name(self, j: int, o: int) -> str:
        option, job = self.table.options[j][o], self.problem.jobs[j].name
        if option.point is None:
            return f"{job}_runs_nothing"
        pool = self.problem.pools[option.point.pool].name
        kind = "stays" if option.stays else "restarts" if option.restarts else "starts"
        return f"{job}_{kind}_on_{option.nodes}_{pool}_nodes"

    def pools_of(self, j: int) -> tuple[int, ...]:
        return tuple(sorted({o.pool for o in self.table.options[j] if o.pool is not None}))

    def nodes_chosen(self, j: int, pool: int) -> cp_model.LinearExpr:
        """The node count of job j in `pool`, linear in its option choice."""
        options = self.table.options[j]
        return sum(  # type: ignore[return-value]
            options[o].nodes * self.choose[j][o]
            for o in range(len(options))
            if options[o].pool == pool
        )

    def rule(self, name: str) -> Literal:
        """The literal that enforces a rule: a variable when rules are free (conflicts),
        else the constant true."""
        if name not in self.rules:
            free = self.free_rules
            self.rules[name] = self.model.new_bool_var(name) if free else self.model.new_constant(1)
        return self.rules[name]

    # --- constraint families ---------------------------------------------------------------

    def add_one_option_per_job(self) -> None:
        """Every job runs in exactly one of its options (nothing is one)."""
        for choices in self.choose:
            self.model.add_exactly_one(choices)

    def add_job_rules(self) -> None:
        """A job that must run (not preemptible, or pinned) gets something; a pinned job
        (running, not movable) keeps exactly its nodes."""
        for j, job in enumerate(self.problem.jobs):
            if job.must_run:
                self.model.add(self.choose[j][0] == 0).only_enforce_if(
                    self.rule(f"must_run:{job.name}")
                )
            if job.pinned:
                stays = [
                    self.choose[j][o] for o, opt in enumerate(self.table.options[j]) if opt.stays
                ]
                self.model.add(sum(stays) == 1).only_enforce_if(
                    self.rule(f"keeps_nodes:{job.name}")
                )
            for o, option in enumerate(self.table.options[j]):
                if option.on_unavailable and option.pool is not None:
                    pool = self.problem.pools[option.pool].name
                    self.model.add(self.choose[j][o] == 0).only_enforce_if(
                        self.rule(f"unavailable:{pool}")
                    )

    def add_pool_capacity(self) -> None:
        """The nodes given out in a pool are at most its available ones (all of them once the
        unavailable rule is let go). Implied by the cells' capacity when nodes are assigned;
        stated anyway, for the LP."""
        for p, pool in enumerate(self.problem.pools):
            used = sum(self.nodes_chosen(j, p) for j in range(len(self.problem.jobs)))
            down = len(pool.unavailable)
            relaxed = self.rule(f"unavailable:{pool.name}") if down else self.model.new_constant(1)
            self.model.add(used + down * relaxed <= pool.nodes).only_enforce_if(
                self.rule(f"capacity:{pool.name}")
            )

    def add_node_counts(self) -> None:
        """A job's nodes over a pool's cells add up to its option's node count there."""
        for j in range(len(self.problem.jobs)):
            self.check_time()
            for p in self.pools_of(j):
                counts = []
                for c, cell in enumerate(self.cells):
                    if cell.pool != p:
                        continue
                    name = f"{self.problem.jobs[j].name}_nodes_in_cell_{c}"
                    count = self.model.new_int_var(0, len(cell.node_ids), name)
                    uses = self.model.new_bool_var(f"{self.problem.jobs[j].name}_uses_cell_{c}")
                    self.model.add(count <= len(cell.node_ids) * uses)
                    self.model.add(count >= uses)
                    self.nodes_in[j, c], self.uses[j, c] = count, uses
                    counts.append(count)
                self.model.add(sum(counts) == self.nodes_chosen(j, p))

    def add_cell_capacity(self) -> None:
        """No cell gives out more nodes than it has available."""
        held: dict[int, list[cp_model.IntVar]] = {}
        for (_, c), count in self.nodes_in.items():
            held.setdefault(c, []).append(count)
        for c, counts in sorted(held.items()):
            cell = self.cells[c]
            pool = self.problem.pools[cell.pool]
            down = len(cell.node_ids) - cell.capacity
            relaxed = self.rule(f"unavailable:{pool.name}") if down else self.model.new_constant(1)
            self.model.add(sum(counts) + down * relaxed <= len(cell.node_ids)).only_enforce_if(
                self.rule(f"capacity:{pool.name}")
            )

    def add_stays_keep_their_nodes(self) -> None:
        """A job that stays holds, cell by cell, exactly the nodes it runs on now."""
        for j, job in enumerate(self.problem.jobs):
            for o, option in enumerate(self.table.options[j]):
                if not option.stays or job.running is None:
                    continue
                held = sorted(job.running.nodes)
                for c, cell in enumerate(self.cells):
                    if cell.pool == option.pool and (j, c) in self.nodes_in:
                        mine = len(cell.among(held))
                        self.model.add(self.nodes_in[j, c] == mine).only_enforce_if(
                            self.choose[j][o]
                        )

    def add_nvlink_domains(self) -> None:
        """Where an NVLink domain spans several nodes, a job takes whole domains plus at most
        one domain holding its remainder, so that its layout's NVLink groups (which divide
        the domain and the job) sit inside a domain as the cost model priced them. A job
        that stays keeps the nodes it has, whatever their domains."""
        for p, pool in enumerate(self.problem.pools):
            size = pool.domain_nodes
            if size == 1:
                continue
            enforce = self.rule(f"nvlink_domains:{pool.name}")
            for j in range(len(self.problem.jobs)):
                self.check_time()
                if p not in self.pools_of(j):
                    continue
                options = self.table.options[j]
                stays = [
                    self.choose[j][o]
                    for o, opt in enumerate(options)
                    if opt.pool == p and opt.stays
                ]
                moved = self.model.new_bool_var(f"{self.problem.jobs[j].name}_placed_anew_in_{p}")
                self.model.add(moved + sum(stays) == 1)
                enforce_here = [enforce, moved]
                rest = sum(
                    (opt.nodes % size) * self.choose[j][o]
                    for o, opt in enumerate(options)
                    if opt.pool == p
                )
                needs_rest = [
                    self.choose[j][o]
                    for o, opt in enumerate(options)
                    if opt.pool == p and opt.nodes % size
                ]
                parts = []
                for c, cell in enumerate(self.cells):
                    if cell.pool != p:
                        continue
                    name = self.problem.jobs[j].name
                    whole = self.model.new_bool_var(f"{name}_whole_domain_{c}")
                    part = self.model.new_bool_var(f"{name}_remainder_in_domain_{c}")
                    extra = self.model.new_int_var(0, size - 1, f"{name}_remainder_nodes_{c}")
                    count = self.nodes_in[j, c]
                    self.model.add(count == size * whole + extra).only_enforce_if(enforce_here)
                    self.model.add(extra == rest).only_enforce_if([*enforce_here, part])
                    self.model.add(extra == 0).only_enforce_if([*enforce_here, ~part])
                    self.model.add(whole + part <= 1)
                    parts.append(part)
                self.model.add(sum(parts) == sum(needs_rest)).only_enforce_if(enforce_here)

    def add_racks_spanned(self) -> None:
        """`rack_used[j, p, r]`: job j has a node in rack r of pool p (what the topology
        term counts)."""
        inside: dict[tuple[int, int, int], list[Literal]] = {}
        for (j, c), used in self.uses.items():
            cell = self.cells[c]
            inside.setdefault((j, cell.pool, cell.rack), []).append(used)
        for key, domains in inside.items():
            if len(domains) == 1:
                self.rack_used[key] = domains[0]
                continue
            j, p, r = key
            rack = self.model.new_bool_var(f"{self.problem.jobs[j].name}_uses_rack_{r}_of_{p}")
            for domain in domains:
                self.model.add_implication(domain, rack)
            self.model.add(rack <= sum(domains))
            self.rack_used[key] = rack

    def add_least_racks(self) -> None:
        """A job of n nodes spans at least ceil(n / the pool's largest rack) racks (implied;
        stated so that the LP bound on the topology term is tight)."""
        for j in range(len(self.problem.jobs)):
            self.check_time()
            for p in self.pools_of(j):
                racks: dict[int, int] = {}
                for cell in self.cells:
                    if cell.pool == p:
                        racks[cell.rack] = racks.get(cell.rack, 0) + len(cell.node_ids)
                room = max(racks.values(), default=1)
                spanned = [u for (jj, pp, _), u in self.rack_used.items() if (jj, pp) == (j, p)]
                least = sum(
                    -(-option.nodes // room) * self.choose[j][o]
                    for o, option in enumerate(self.table.options[j])
                    if option.pool == p
                )
                self.model.add(sum(spanned) >= least)

    def identical_racks(self) -> list[list[int]]:
        """Runs of interchangeable cells: racks of one pool (NVLink domains one node) with
        the same available nodes and no node any job could stay on."""
        held = {
            (self.problem.pool_index(job.running.pool), node)
            for job in self.problem.jobs
            if job.running is not None
            for node in job.running.nodes
        }
        classes: dict[tuple[int, int, int], list[int]] = {}
        for c, cell in enumerate(self.cells):
            if cell.domain or any((cell.pool, n) in held for n in cell.node_ids):
                continue
            classes.setdefault((cell.pool, len(cell.node_ids), cell.capacity), []).append(c)
        return [cells for cells in classes.values() if len(cells) > 1]

    def load_key(self, c: int) -> cp_model.LinearExpr:
        """Cell c's counts as one number ordered as the vector (job 0's, job 1's, ...), for as
        many leading jobs as int64 holds exactly."""
        base = len(self.cells[c].node_ids) + 1
        key: list[cp_model.LinearExpr] = []
        weight = 1
        for j in reversed(range(len(self.problem.jobs))):
            if weight * base > SYMMETRY_KEY_LIMIT:
                key.clear()  # keep only the leading jobs: drop what was built so far
                weight = 1
            if (j, c) in self.nodes_in:
                key.append(weight * self.nodes_in[j, c])
            weight *= base
        return sum(key)  # type: ignore[return-value]

    def add_identical_racks_in_order(self) -> None:
        """Interchangeable racks hold non-increasing loads (their count vectors in
        lexicographic order): any plan can be so permuted without changing its objective
        or topology, so this only cuts the copies the solver would otherwise search."""
        for run in self.identical_racks():
            for first, second in itertools.pairwise(run):
                self.model.add(self.load_key(first) >= self.load_key(second))

    def in_rack_order(self, nodes_in: dict[tuple[int, int], int]) -> dict[tuple[int, int], int]:
        """The same counts with each run of interchangeable racks sorted as
        `add_identical_racks_in_order` wants them (for hints)."""
        jobs = range(len(self.problem.jobs))
        moved = dict(nodes_in)
        for run in self.identical_racks():
            columns = sorted(
                (tuple(nodes_in.get((j, c), 0) for j in jobs) for c in run), reverse=True
            )
            for c, column in zip(run, columns, strict=True):
                for j in jobs:
                    moved.pop((j, c), None)
                    if column[j]:
                        moved[j, c] = column[j]
        return moved

    # --- objective terms ------------------------------------------------------------------

    def value(self) -> cp_model.LinearExpr:
        """The scheduler's objective as an integer (options.py): maximised."""
        return sum(  # type: ignore[return-value]
            value * self.choose[j][o]
            for j, values in enumerate(self.table.values)
            for o, value in enumerate(values)
            if value
        )

    def racks_spanned(self) -> cp_model.LinearExpr:
        """The topology term: racks each job spans, summed (fewer is better)."""
        return sum(self.rack_used.values())  # type: ignore[return-value]

    @property
    def most_racks(self) -> int:
        return len(self.rack_used)

    def preference(self, j: int) -> list[int]:
        """Job j's options ranked for the tie-break: staying where it runs (no restart),
        then most throughput, then pools in order and fewer nodes; nothing last."""
        options = self.table.options[j]
        order = sorted(
            range(len(options)),
            key=lambda o: (
                options[o].point is None,
                not options[o].stays,
                -options[o].tokens_per_s,
                options[o].pool or 0,
                options[o].nodes,
            ),
        )
        rank = [0] * len(options)
        for position, o in enumerate(order):
            rank[o] = position
        return rank

    def option_tie_break(self) -> tuple[cp_model.LinearExpr, int]:
        """Minimised below the objective, so that one plan comes back whatever the worker
        count: earlier jobs take their preferred options (`preference`), with weights
        rank * (jobs - j) that make any swap between two jobs strictly better one way.
        Returns it and its largest value."""
        jobs = len(self.problem.jobs)
        ranks = [self.preference(j) for j in range(jobs)]
        term = sum(
            ranks[j][o] * (jobs - j) * self.choose[j][o]
            for j in range(jobs)
            for o in range(len(self.choose[j]))
            if ranks[j][o]
        )
        most = sum((len(c) - 1) * (jobs - j) for j, c in enumerate(self.choose))
        return term, most  # type: ignore[return-value]

    def cell_tie_break(self) -> tuple[cp_model.LinearExpr, int]:
        """Minimised below the topology: earlier jobs on lower cells (lower node ids), with
        weights (cell + 1) * (jobs - j). Returns it and its largest value."""
        jobs = len(self.problem.jobs)
        term = sum((c + 1) * (jobs - j) * count for (j, c), count in self.nodes_in.items())
        most = sum((c + 1) * (jobs - j) * len(self.cells[c].node_ids) for (j, c) in self.nodes_in)
        return term, most  # type: ignore[return-value]

    def fix_options(self, choice: tuple[int, ...]) -> None:
        for j, o in enumerate(choice):
            self.model.add(self.choose[j][o] == 1)
