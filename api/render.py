"""Human output for the terminal: aligned tables and text bars. Formatting lives only here."""

from __future__ import annotations

from api.schemas import EstimateOut

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
    return (
        f"tp {lay.tp}  pp {lay.pp}  cp {lay.cp}  dp {lay.dp}  vpp {lay.vpp}  "
        f"micro-batch {lay.micro_batch} x {lay.micro_batches}  ZeRO-{lay.zero}  "
        f"recompute {lay.recompute}  placement {'<'.join(lay.placement)}"
    )


def memory_chart(est: EstimateOut) -> list[str]:
    mem = est.memory_gb
    scale = max(mem.capacity, mem.total)
    lines = [f"memory per device (GB), capacity {mem.capacity:.2f} GB"]
    for name in ("weights", "gradients", "optimizer", "activations"):
        value = getattr(mem, name)
        lines.append(f"  {name:<12}{value:>9.2f}  {bar(value, scale)}")
    verdict = (
        f"fits, {mem.capacity - mem.total:.2f} GB free"
        if est.fits
        else f"DOES NOT FIT, {mem.total - mem.capacity:.2f} GB over"
    )
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


def estimate_text(est: EstimateOut) -> str:
    lines = [f"layout   {layout_line(est)}", f"profile  {est.profile}", ""]
    lines += memory_chart(est)
    lines.append("")
    lines += mfu_waterfall(est)
    lines.append("")
    lines.append(
        f"bubble {est.bubble * 100:.2f}%   MFU {est.mfu * 100:.2f}%   step {est.step_time_s:.3f} s   "
        f"{est.tokens_per_s_per_gpu:,.1f} tokens/s per GPU"
    )
    lines += [f"warning: {warning}" for warning in est.warnings]
    return "\n".join(lines)
