// Scales and axes: round maxima and steps, their tick labels, the grid and the left axis title.
import { PAD, TICK_GAP, svg } from "./chart-svg.js";
import { centredOn } from "./chart-text.js";

// A round axis maximum and step: 1, 2, 2.5 or 5 times a power of ten.
export function niceScale(maximum, ticks = 5) {
  const raw = (maximum > 0 ? maximum : 1) / ticks;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * power).find((s) => s >= raw * (1 - 1e-9));
  return { max: Math.ceil(maximum / step - 1e-9) * step || step * ticks, step };
}

// The ticks of a scale, printed with as many decimals as its step needs (times `unit`).
export function tickValues(scale, unit = 1, suffix = "") {
  const step = scale.step * unit;
  const digits = [0, 1, 2, 3, 4].find((d) => Math.abs(Number(step.toFixed(d)) - step) < 1e-9 * step) ?? 4;
  const count = Math.round(scale.max / scale.step);
  return Array.from({ length: count + 1 }, (_, k) => ({
    value: k * scale.step, text: `${(k * step).toFixed(digits)}${suffix}`,
  }));
}

export function yAxis(chart, box, ticks, y, tickMeasure) {
  for (const tick of ticks) {
    const at = y(tick.value);
    chart.append(svg("line", { x1: box.left, x2: box.right, y1: at, y2: at, class: "grid" }));
    chart.append(svg("text", {
      x: box.left - TICK_GAP, y: centredOn(at, tickMeasure), class: "tick", "text-anchor": "end",
    }, tick.text));
  }
}

// An axis title turned 90° against the left edge (it takes its text's height), centred on the plot.
export function leftTitle(chart, text, m, box) {
  const x = PAD + m.ascent;
  const mid = (box.top + box.bottom) / 2;
  chart.append(svg("text", {
    x, y: mid, class: "axis-label", "text-anchor": "middle", transform: `rotate(-90 ${x} ${mid})`,
  }, text));
}
