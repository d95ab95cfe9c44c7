// Memory against MFU: the frontier (clickable, keyboard-focusable points), the layouts tried
// (grey), the current layout (a ring) and the capacity line.
import { niceScale, leftTitle, tickValues, yAxis } from "./chart-axes.js";
import { GAP, PAD, TICK_GAP, clearChart, frame, shownWidth, svg } from "./chart-svg.js";
import { centredOn, measurer, widest } from "./chart-text.js";
import { $ } from "./dom.js";
import { describeLayout, gb, pct } from "./format.js";

const PARETO_PLOT_HEIGHT = 210;

// `view.onPick(layout)` loads a point's layout.
export function drawPareto(view) {
  const chart = $("pareto-chart");
  const shown = shownWidth(chart, () => drawPareto(view));
  clearChart(chart);
  const measure = measurer(chart);
  const rows = paretoRows(measure);
  const points = view.frontier;
  if (!points || points.length === 0) {
    drawPlaceholder(chart, measure, shown, rows.height, points);
    return;
  }
  const { box, tick } = rows;
  const capacity = points[0].memory_gb.capacity;
  const at = paretoScales(measure, points.concat(view.visited), capacity, rows, shown);
  frame(chart, at.width, rows.height);
  const x = (gbValue) => box.left + (gbValue / at.xs.max) * (box.right - box.left);
  const y = (mfu) => box.bottom - (mfu / at.ys.max) * (box.bottom - box.top);
  yAxis(chart, box, at.yTicks, y, tick);
  leftTitle(chart, "MFU", rows.title, box);
  const labels = [...xAxisTexts(at.xTicks, rows, x), capacityText(measure, capacity, x, box)];
  chart.append(svg("line", { x1: x(capacity), x2: x(capacity), y1: box.top, y2: box.bottom, class: "capacity" }));
  for (const tried of view.visited) {
    chart.append(svg("circle", { cx: x(tried.memory_gb.total), cy: y(tried.mfu), r: 4, class: "tried", "aria-hidden": "true" }));
  }
  const sorted = [...points].sort((a, b) => a.memory_gb.total - b.memory_gb.total);
  chart.append(svg("polyline", { points: stepLine(sorted, x, y), class: "frontier" }));
  chart.append(...labels);
  sorted.forEach((point) => chart.append(paretoPoint(point, x, y, view)));
  const current = view.current;
  if (current) {
    chart.append(svg("circle", { cx: x(current.memory_gb.total), cy: y(current.mfu), r: 9, class: "current" }));
  }
  $("pareto-chart-desc").textContent = `${points.length} layouts on the frontier, from `
    + `${gb(sorted[0].memory_gb.total, 1)} at ${pct(sorted[0].mfu)} MFU to `
    + `${gb(sorted[sorted.length - 1].memory_gb.total, 1)} at ${pct(sorted[sorted.length - 1].mfu)}; `
    + `grey dots are the ${view.visited.length} layouts tried here, the ring the current one.`;
}

// Down: the plot, the x ticks under it and the x axis title under them.
function paretoRows(measure) {
  const tick = measure("tick", "0");
  const xTitle = measure("axis-label", "memory per GPU, GB");
  const top = PAD + Math.max(tick.height / 2, 9); // 9: the current layout's ring
  const box = { top, bottom: top + PARETO_PLOT_HEIGHT };
  const xTickTop = box.bottom + tick.height / 2 + 2; // clear of the 0% tick
  const height = xTickTop + tick.height + GAP + xTitle.height + PAD;
  return { tick, title: measure("axis-label", "MFU"), xTitle, box, xTickTop, height };
}

function drawPlaceholder(chart, measure, shown, height, points) {
  frame(chart, shown, height);
  const text = points ? "No layout of this job fits." : "Press Optimise to draw the frontier.";
  const m = measure("placeholder", text);
  chart.append(svg("text", { x: shown / 2, y: centredOn(height / 2, m), "text-anchor": "middle", class: "placeholder" }, text));
}

// Both scales, the left margin their y ticks need, and as many x ticks (up to five) as fit
// their labels side by side.
function paretoScales(measure, everything, capacity, { box, title }, shown) {
  const ys = niceScale(Math.max(...everything.map((p) => p.mfu)) * 1.1, 4);
  const yTicks = tickValues(ys, 100, "%");
  box.left = PAD + title.height + GAP + widest(yTicks.map((t) => measure("tick", t.text))) + TICK_GAP;
  const width = Math.max(shown, box.left + 200 + PAD);
  const xMax = Math.max(capacity, ...everything.map((p) => p.memory_gb.total)) * 1.05;
  let xs;
  let xTicks;
  let xTickWidths;
  for (let count = 5; ; count -= 1) {
    xs = niceScale(xMax, count);
    xTicks = tickValues(xs);
    xTickWidths = xTicks.map((t) => measure("tick", t.text).width);
    box.right = width - PAD - xTickWidths[xTickWidths.length - 1] / 2;
    const spacing = (box.right - box.left) / (xTicks.length - 1);
    if (count <= 2 || xTickWidths.every((w, k) => k === 0 || (w + xTickWidths[k - 1]) / 2 + GAP <= spacing)) break;
  }
  return { xs, ys, xTicks, yTicks, width };
}

function xAxisTexts(xTicks, { box, tick, xTickTop, xTitle }, x) {
  const texts = xTicks.map((t) => svg("text", { x: x(t.value), y: xTickTop + tick.ascent, "text-anchor": "middle", class: "tick" }, t.text));
  texts.push(svg("text", {
    x: (box.left + box.right) / 2, y: xTickTop + tick.height + GAP + xTitle.ascent, "text-anchor": "middle", class: "axis-label",
  }, "memory per GPU, GB"));
  return texts;
}

// The capacity label beside its line near the top: left of it, or right where there is no room.
function capacityText(measure, capacity, x, box) {
  const capX = x(capacity);
  const cap = { text: `${capacity} GB` };
  cap.m = measure("capacity-label", cap.text);
  const leftOfLine = capX - 4 - cap.m.width >= box.left + 2;
  return svg("text", {
    x: leftOfLine ? capX - 4 : capX + 4, y: box.top + 2 + cap.m.ascent,
    "text-anchor": leftOfLine ? "end" : "start", class: "capacity-label halo",
  }, cap.text);
}

function stepLine(sorted, x, y) {
  const coords = [];
  sorted.forEach((p, i) => {
    if (i > 0) coords.push(`${x(p.memory_gb.total)},${y(sorted[i - 1].mfu)}`);
    coords.push(`${x(p.memory_gb.total)},${y(p.mfu)}`);
  });
  return coords.join(" ");
}

function paretoPoint(point, x, y, view) {
  const label = `${describeLayout(point.layout)}: ${gb(point.memory_gb.total, 1)}, ${pct(point.mfu)} MFU. Load this layout.`;
  const group = svg("g", { class: "point", tabindex: "0", role: "button", "aria-label": label });
  group.append(svg("title", {}, label));
  const optimum = view.isOptimum(point.layout);
  group.append(svg("circle", { cx: x(point.memory_gb.total), cy: y(point.mfu), r: optimum ? 7 : 5.5, class: optimum ? "optimum" : "" }));
  const load = () => view.onPick(point.layout);
  group.addEventListener("click", load);
  group.addEventListener("keydown", (event) => {
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      load();
    }
  });
  return group;
}
