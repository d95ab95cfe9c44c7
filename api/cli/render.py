"""Human output for the terminal: aligned tables and text bars. Formatting lives only here."""

from __future__ import annotations

from api.schemas import EstimateOut, MemoryFitOut, OptimizeOut, ParetoOut, SolverOut, TrialsOut

BAR_WIDTH = 48
_EIGHTHS = " ▏▎▍▌▋▊▉"


def bar(value: float, full_scale: float, width: int = BAR_WIDTH) -> str:
    """A horizontal bar of `value` on a scale where `full_scale` fills `width` cells."""
    if full_scale <= 0 or value <= 0:
        return ""
    cells = min(value / full_scale, 1.0) * width
    whole = int(cells)
    partial = _EIGHTHS[int((cells - whole) * 8)]
    return ("█" * whole + partial).rstrip()


def layout_line(est: EstimateOut) -> str:
    lay = est.layout
    # ep only exists for mixture-of-experts models; the schedule always shapes the bubble
    experts = f"ep {lay.ep}  " if lay.ep > 1 else ""
    return (
        f"tp {lay.tp}  pp {lay.pp}  cp {lay.cp}  dp {lay.dp}  {experts}vpp {lay.vpp}  "
        f"schedule {lay.schedule}  micro-batch {lay.micro_batch} x {lay.micro_batches}  "
        f"ZeRO-{lay.zero}  recompute {lay.recompute}  placement {'<'.join(lay.placement)}"
    )


MEMORY_PARTS = ("weights", "gradients", "optimizer", "activations")
# shown where they hold something: the workshop profile prices neither, and the allocator's
# reserve is 0 under expandable segments
OPTIONAL_MEMORY_PARTS = ("fragmentation", "runtime")


def memory_chart(est: EstimateOut) -> list[str]:
    mem = est.memory_gb
    scale = max(mem.capacity, mem.total)
    lines = [f"memory per device (GB), capacity {mem.capacity:.2f} GB"]
    for name in (*MEMORY_PARTS, *OPTIONAL_MEMORY_PARTS):
        value = getattr(mem, name)
        if value == 0 and name in OPTIONAL_MEMORY_PARTS:
            continue
        lines.append(f"  {name:<12}{value:>9.2f}  {bar(value, scale)}")
    verdict = (
        f"fits, {mem.capacity - mem.total:.2f} GB free"
        if est.fits
        else f"DOES NOT FIT, {mem.total - mem.capacity:.2f} GB over"
    )
    if est.fits_interval is False and est.fits and est.interval and est.interval.memory_gb:
        verdict += f" at the estimate; like runs up to {est.interval.memory_gb[1]:.2f} GB"
    lines.append(
        f"  {'total':<12}{mem.total:>9.2f}  {bar(mem.total, scale):<{BAR_WIDTH}}| {verdict}"
    )
    return lines


def mfu_waterfall(est: EstimateOut) -> list[str]:
    lines = ["utilisation (MFU estimate), step by step"]
    width = max(len(step.name) for step in est.mfu_steps)
    for step in est.mfu_steps:
        lines.append(f"  {step.name:<{width}}  {step.mfu * 100:>5.1f}%  {bar(step.mfu, 1.0)}")
    return lines


def engine_line(est: EstimateOut) -> list[str]:
    """What the request's engine says of the layout, where the answer carries it."""
    if est.export is not None:
        return [
            f"engine   {est.export.engine} runs it: `layoutopt export` writes {est.export.filename}"
        ]
    if est.export_error is not None:
        return [f"engine   {est.export_error.partition(':')[0]} (the warnings say why)"]
    return []


def interval_line(est: EstimateOut) -> list[str]:
    """Where the measured figures are expected, and on what that rests."""
    if est.interval is None:
        return []
    i = est.interval
    memory = "" if i.memory_gb is None else f", memory {i.memory_gb[0]:.1f}-{i.memory_gb[1]:.1f} GB"
    return [
        f"expected ({i.coverage:.0%} of like runs): MFU {100 * i.mfu[0]:.1f}-{100 * i.mfu[1]:.1f}%, "
        f"step {i.step_time_s[0]:.3f}-{i.step_time_s[1]:.3f} s{memory}; from {i.basis}"
    ]


def estimate_text(est: EstimateOut) -> str:
    lines = [f"layout   {layout_line(est)}", f"profile  {est.profile}", *engine_line(est), ""]
    lines += memory_chart(est)
    lines.append("")
    lines += mfu_waterfall(est)
    lines.append("")
    lines.append(
        f"bubble {est.bubble * 100:.2f}%   MFU {est.mfu * 100:.2f}%   step {est.step_time_s:.3f} s   "
        f"{est.tokens_per_s_per_gpu:,.1f} tokens/s per GPU"
    )
    lines += interval_line(est)
    if est.mfu_fp8_peak is not None:
        low = est.mfu_fp8_peak_format or "fp8"
        lines.append(
            f"{low:<8} MFU {est.mfu * 100:.2f}% of the bf16 dense peak (as Megatron-LM and "
            f"torchtitan count it), {est.mfu_fp8_peak * 100:.2f}% of the {low.upper()} dense peak"
        )
    lines += [f"warning: {warning}" for warning in est.warnings]
    return "\n".join(lines)


# --- search: optimize and pareto -------------------------------------------------------


def solver_line(solver: SolverOut, status: str = "optimal") -> str:
    """`status` names the claim: optimal (or feasible), infeasible, or a whole frontier."""
    if status == "frontier":
        proof = "frontier " + ("proved" if solver.proved_optimal else "NOT proved")
    else:
        claim = "infeasible" if status == "infeasible" else "optimal"
        proof = f"proved {claim}" if solver.proved_optimal else f"{claim}, NOT proved"
    details = [f"{solver.solves} solve{'' if solver.solves == 1 else 's'}"] if solver.solves else []
    if solver.explain_wall_s:
        details.append(f"explanations {solver.explain_wall_s:.3f} s")
    extra = f" ({', '.join(details)})" if details else ""
    return f"solver   {proof} in {solver.wall_s:.3f} s{extra}"


def optimize_text(answer: OptimizeOut) -> str:
    lines = [f"status   {answer.status}", solver_line(answer.solver, answer.status)]
    if answer.best is None:
        lines.append("")
        if answer.solver.proved_optimal and answer.conflict:
            lines.append("no layout satisfies these rules together:")
            lines += [f"  - {item.description}" for item in answer.conflict]
        elif answer.solver.proved_optimal:  # conflicts are explanations: off, or out of time
            lines.append("no layout satisfies the request; which rules conflict was not worked out")
        else:  # neither a layout nor a proof: claiming a conflict would be a guess
            lines.append("no layout found within the time limit, and none ruled out")
        lines += memory_fit_lines(answer.memory_fit, answer.best)
        lines += [f"warning: {warning}" for warning in answer.warnings]
        return "\n".join(lines)
    lines += ["", estimate_text(answer.best)]
    lines += memory_fit_lines(answer.memory_fit, answer.best)
    lines.append("")
    lines.append("what holds it back (the best without each rule; not layouts to use)")
    complete = answer.explanations_complete
    nothing = "nothing we can relax" if complete else "none found before the time limit"
    if answer.explanations_skipped:
        nothing = (
            "none among those worked out: some spaces are too large to search (warnings below)"
        )
    if not answer.explained:
        nothing = "not worked out: explanations off (--no-explain, explain: false)"
    # the memory rule's cost is said with the rule, above
    held = [b for b in answer.binding if b.name != "memory_fit"]
    lines += [f"  - {b.description}" for b in held] or [f"  - {nothing}"]
    idle = [r.name for r in answer.relaxations if not r.binds]
    if idle:
        lines.append(f"  relaxing would not raise MFU: {', '.join(idle)}")
    if answer.choices:
        lines.append("")
        lines.append("what each choice buys (the best of the same request without it)")
        lines += [f"  - {choice.description}" for choice in answer.choices]
    lines += tied_block(answer)
    lines.append("")
    lines.append("slack of the chosen layout")
    for s in answer.slack:
        lines.append(f"  {s.description:<45} {s.value:>9.2f} of {s.limit:>9.2f} {s.unit}")
    shown = set(answer.best.warnings)
    lines += [f"warning: {w}" for w in answer.warnings if w not in shown]
    return "\n".join(lines)


def memory_fit_lines(fit: MemoryFitOut | None, best: EstimateOut | None) -> list[str]:
    """The rule the layouts' memory was held to and, where worked out, what it costs."""
    if fit is None:
        return []
    lines = [f"memory fit ({fit.rule}): {fit.description}"]
    point = fit.point_best
    if point is not None and fit.binds:
        cost = "without the margin there is a layout"
        if fit.point_mfu_gain is not None:
            cost = f"the margin costs {100 * fit.point_mfu_gain:.2f} MFU points"
        lines.append(
            f"  {cost}: at the estimate alone (--memory-fit point) the best is "
            f"{layout_line(point)} at {100 * point.mfu:.2f}% with {point.memory_gb.total:.2f} of "
            f"{point.memory_gb.capacity:.2f} GB"
        )
    elif fit.binds is False and best is not None:
        lines.append("  the margin costs nothing: at the estimate alone the best is no better")
    elif fit.binds is False:
        lines.append("  no layout fits at the estimate alone either")
    return lines


def tied_block(answer: OptimizeOut) -> list[str]:
    """The layouts tied with the optimum, each with what their difference rests on."""
    if not answer.explained or answer.tied_note is None:
        return []
    lines = ["", f"tied with the optimum: {answer.tied_note}"]
    for tie in answer.tied:
        lay = tie.layout
        lines.append(
            f"  - tp {lay.tp}, pp {lay.pp}, cp {lay.cp}, dp {lay.dp}, vpp {lay.vpp}, "
            f"micro-batch {lay.micro_batch}, ZeRO-{lay.zero}, recompute {lay.recompute}"
            f"{'' if lay.schedule == '1f1b' else f', schedule {lay.schedule}'}"
            f"{f', ep {lay.ep}' if lay.ep > 1 else ''} at {100 * tie.mfu:.2f}% "
            f"(step {tie.step_time_s:.3f} s): differs most in {tie.mechanism}"
        )
    return lines


def pareto_text(answer: ParetoOut) -> str:
    """The frontier as a chart: one row per point, memory ascending, MFU as a bar."""
    lines = [solver_line(answer.solver, "frontier"), ""]
    if not answer.frontier and answer.solver.proved_optimal:
        lines.append("no layout fits: the frontier is empty")
    elif not answer.frontier:
        lines.append("the time limit ran out before the frontier's first point: nothing is proved")
    else:
        lines.append(f"{'memory GB':>10}  {'MFU':>6}  {'':<{BAR_WIDTH // 2}}  layout")
    if answer.memory_fit is not None:
        fit = answer.memory_fit
        lines.insert(1, f"memory fit ({fit.rule}): {fit.description}")
    for est in answer.frontier:
        chart = bar(est.mfu, 0.6, BAR_WIDTH // 2)
        lines.append(
            f"{est.memory_gb.total:>10.2f}  {est.mfu * 100:>5.2f}%  {chart:<{BAR_WIDTH // 2}}  "
            f"{layout_line(est)}"
        )
    lines += [f"warning: {warning}" for warning in answer.warnings]
    return "\n".join(lines)


def trials_text(answer: TrialsOut) -> str:
    lines = [
        f"{answer.tied} layouts tied with the optimum ({answer.status}) within its interval; "
        f"{len(answer.trials)} runs to separate them:"
    ]
    for trial in answer.trials:
        est = trial.estimate
        lines += [
            "",
            f"{trial.name}: {layout_line(est)}",
            f"  MFU {est.mfu * 100:.2f}%, {trial.steps} steps",
        ]
        lines += [f"  {line}" for line in interval_line(est)]
        lines.append(f"  why: {trial.why}")
        lines += [f"  {line}" for line in engine_line(est)]
    lines += [f"warning: {warning}" for warning in answer.warnings]
    return "\n".join(lines)
