// Charts drawn by hand as SVG, each with a text alternative (<desc>) and a table of its numbers.
// Pure drawing: every figure comes from the server's estimates passed in.

const $ = (id) => document.getElementById(id);
const SVG_NS = "http://www.w3.org/2000/svg";

const MEMORY_PARTS = [
  { key: "weights", label: "Weights", colour: "#2f5d9e" },
  { key: "gradients", label: "Gradients", colour: "#6aa5dc" },
  { key: "optimizer", label: "Optimiser state", colour: "#e3a33b" },
  { key: "activations", label: "Activations", colour: "#3f9e74" },
];

const STEP_LABELS = {
  "kernel efficiency": ["kernel", "efficiency"],
  "after pipeline bubble": ["pipeline", "bubble"],
  "after tensor-parallel communication": ["TP", "comm."],
  "after data-parallel communication": ["DP", "comm."],
  "after recomputation": ["recompute"],
  "after uneven stages": ["uneven", "stages"],
  "after context-parallel communication": ["CP", "comm."],
  "after expert all-to-all": ["expert", "all-to-all"],
  "after pipeline sends": ["PP", "sends"],
};

// Axis labels for step names the table above does not know: two short lines.
function stepLabel(name) {
  if (STEP_LABELS[name]) return STEP_LABELS[name];
  const words = name.replace(/^after /, "").replace("communication", "comm.").split(" ");
  const half = Math.ceil(words.length / 2);
  return [words.slice(0, half).join(" "), words.slice(half).join(" ")].filter(Boolean);
}

// Halves round up, as Python prints the unrounded figure (0.4255 -> 42.6%, not 42.5%).
export const pct = (fraction, digits = 1) => `${(fraction * 100 + 1e-9).toFixed(digits)}%`;

export const gb = (value, digits = 2) => `${value.toFixed(digits)} GB`;

function svg(tag, attrs = {}, text) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs)) el.setAttribute(name, value);
  if (text !== undefined) el.textContent = text;
  return el;
}

function clearChart(chart) {
  for (const child of [...chart.children]) {
    if (child.tagName !== "title" && child.tagName !== "desc") child.remove();
  }
}

// A round axis maximum and step: 1, 2 or 5 times a power of ten.
function niceScale(maximum, ticks = 5) {
  const raw = maximum / ticks;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * power).find((s) => s >= raw);
  return { max: Math.ceil(maximum / step) * step, step };
}

function yAxis(chart, box, scale, format) {
  for (let value = 0; value <= scale.max + 1e-9; value += scale.step) {
    const y = box.bottom - (value / scale.max) * (box.bottom - box.top);
    chart.append(svg("line", { x1: box.left, x2: box.right, y1: y, y2: y, class: "grid" }));
    chart.append(svg("text", { x: box.left - 6, y: y + 4, class: "tick", "text-anchor": "end" }, format(value)));
  }
}

export function drawMemoryChart(memory, fits) {
  const chart = $("memory-chart");
  clearChart(chart);
  const box = { left: 52, right: 410, top: 18, bottom: 280 };
  const scale = niceScale(Math.max(memory.total, memory.capacity) * 1.08);
  const y = (value) => box.bottom - (value / scale.max) * (box.bottom - box.top);
  yAxis(chart, box, scale, (v) => `${v}`);
  const mid = (box.top + box.bottom) / 2;
  chart.append(svg("text", { x: 12, y: mid, class: "axis-label", "text-anchor": "middle", transform: `rotate(-90 12 ${mid})` }, "GB per GPU"));
  const bar = { x: 96, width: 92 };
  let base = 0;
  const labels = [];
  for (const part of MEMORY_PARTS) {
    const value = memory[part.key];
    chart.append(svg("rect", {
      x: bar.x, width: bar.width, y: y(base + value), height: Math.max(0, y(base) - y(base + value)),
      fill: part.colour, class: "segment",
    }));
    labels.push({ y: (y(base) + y(base + value)) / 2, text: `${part.label} ${value.toFixed(2)}`, colour: part.colour });
    base += value;
  }
  drawSegmentLabels(chart, labels, bar.x + bar.width + 10, box.top + 10);
  const capY = y(memory.capacity);
  chart.append(svg("line", { x1: box.left, x2: box.right, y1: capY, y2: capY, class: "capacity" }));
  chart.append(svg("text", { x: box.right, y: capY - 6, class: "capacity-label", "text-anchor": "end" }, `capacity ${memory.capacity} GB`));
  chart.append(svg("text", {
    x: bar.x + bar.width / 2, y: y(memory.total) - 8, "text-anchor": "middle",
    class: fits ? "total-label" : "total-label bad",
  }, gb(memory.total, 1)));
  $("memory-chart-desc").textContent = `${MEMORY_PARTS.map((p) => `${p.label} ${memory[p.key].toFixed(2)} GB`).join(", ")}; `
    + `total ${memory.total.toFixed(2)} GB against a capacity of ${memory.capacity} GB: ${fits ? "fits" : "does not fit"}.`;
  renderMemoryTable(memory);
}

// Labels beside the bar at their segment's middle, pushed apart so thin segments stay legible.
function drawSegmentLabels(chart, labels, x, minY) {
  const gap = 16;
  let previous = Infinity;
  for (const label of labels) { // bottom-up
    label.y = Math.min(label.y, previous - gap);
    previous = label.y;
  }
  const shift = Math.max(0, minY - labels[labels.length - 1].y);
  for (const label of labels) {
    const ly = label.y + shift;
    chart.append(svg("rect", { x, y: ly - 5, width: 10, height: 10, fill: label.colour }));
    chart.append(svg("text", { x: x + 15, y: ly + 4, class: "segment-label" }, label.text));
  }
}

function renderMemoryTable(memory) {
  const rows = MEMORY_PARTS.map((p) => [p.label, memory[p.key].toFixed(2), p.colour]);
  rows.push(["Total", memory.total.toFixed(2)], ["Capacity", memory.capacity.toFixed(2)]);
  $("memory-table").tBodies[0].replaceChildren(...rows.map(([name, value, colour]) => {
    const row = document.createElement("tr");
    const swatch = colour ? `<span class="swatch" style="background:${colour}"></span>` : "";
    row.innerHTML = `<th scope="row">${swatch}${name}</th><td class="num">${value}</td>`;
    return row;
  }));
}

export function drawMfuChart(steps) {
  const chart = $("mfu-chart");
  clearChart(chart);
  const box = { left: 44, right: 512, top: 22, bottom: 250 };
  const scale = niceScale(Math.max(...steps.map((s) => s.mfu)) * 1.12, 4);
  const y = (value) => box.bottom - (value / scale.max) * (box.bottom - box.top);
  yAxis(chart, box, scale, (v) => `${Math.round(v * 100)}%`);
  const column = (box.right - box.left) / steps.length;
  const width = Math.min(64, column * 0.62);
  steps.forEach((step, i) => {
    const x = box.left + column * i + (column - width) / 2;
    const before = i === 0 ? step.mfu : steps[i - 1].mfu;
    chart.append(svg("rect", { x, width, y: y(step.mfu), height: box.bottom - y(step.mfu), class: i === 0 ? "bar first" : "bar" }));
    if (before > step.mfu) {
      chart.append(svg("rect", { x, width, y: y(before), height: y(step.mfu) - y(before), class: "loss" }));
    }
    if (i > 0) {
      chart.append(svg("line", { x1: x - (column - width), x2: x, y1: y(before), y2: y(before), class: "connector" }));
    }
    barLabels(chart, { x: x + width / 2, top: y(step.mfu), bottom: box.bottom, lossTop: y(before) }, step.mfu, before - step.mfu);
    const lines = stepLabel(step.name);
    lines.forEach((line, k) => chart.append(svg("text", {
      x: x + width / 2, y: box.bottom + 16 + k * 14, "text-anchor": "middle", class: "axis-label",
    }, line)));
  });
  $("mfu-chart-desc").textContent = steps.map((s) => `${s.name}: ${pct(s.mfu)}`).join("; ") + ".";
  renderMfuTable(steps);
}

// The value inside the top of its bar (above it when the bar is short); the loss inside its
// red block when there is room for the text (the table below always has it).
function barLabels(chart, at, mfu, loss) {
  const inside = at.bottom - at.top > 24;
  chart.append(svg("text", {
    x: at.x, y: inside ? at.top + 16 : at.lossTop - 6, "text-anchor": "middle",
    class: inside ? "bar-label inside" : "bar-label",
  }, pct(mfu)));
  if (at.top - at.lossTop >= 15) {
    chart.append(svg("text", { x: at.x, y: (at.top + at.lossTop) / 2 + 4, "text-anchor": "middle", class: "loss-label" },
      `−${(loss * 100).toFixed(1)}`));
  }
}

function renderMfuTable(steps) {
  $("mfu-table").tBodies[0].replaceChildren(...steps.map((step, i) => {
    const row = document.createElement("tr");
    const change = i === 0 ? "" : `${((step.mfu - steps[i - 1].mfu) * 100).toFixed(1)} pts`;
    row.innerHTML = `<th scope="row"></th><td class="num">${pct(step.mfu, 2)}</td><td class="num">${change}</td>`;
    row.cells[0].textContent = step.name;
    return row;
  }));
}

function xAxis(chart, box, scale, x) {
  for (let value = 0; value <= scale.max + 1e-9; value += scale.step) {
    chart.append(svg("text", { x: x(value), y: box.bottom + 16, "text-anchor": "middle", class: "tick" }, `${value}`));
  }
  chart.append(svg("text", { x: (box.left + box.right) / 2, y: box.bottom + 34, "text-anchor": "middle", class: "axis-label" }, "memory per GPU, GB"));
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

export const describeLayout = (l) =>
  `tp ${l.tp} · pp ${l.pp} · cp ${l.cp} · dp ${l.dp} · vpp ${l.vpp} · micro-batch ${l.micro_batch} · ZeRO-${l.zero} · recompute ${l.recompute}`
  + (l.placement ? ` · placement ${l.placement.join(" › ")}` : "");

// The frontier (clickable, keyboard-focusable points), the layouts tried (grey), the current
// layout (a ring) and the capacity line. `view.onPick(layout)` loads a point's layout.
export function drawPareto(view) {
  const chart = $("pareto-chart");
  clearChart(chart);
  const points = view.frontier;
  if (!points || points.length === 0) {
    chart.append(svg("text", { x: 260, y: 140, "text-anchor": "middle", class: "placeholder" },
      points ? "No layout of this job fits." : "Press Optimise to draw the frontier."));
    return;
  }
  const everything = points.concat(view.visited);
  const capacity = points[0].memory_gb.capacity;
  const box = { left: 52, right: 506, top: 16, bottom: 226 };
  const xs = niceScale(Math.max(capacity, ...everything.map((p) => p.memory_gb.total)) * 1.05);
  const ys = niceScale(Math.max(...everything.map((p) => p.mfu)) * 1.1, 4);
  const x = (gbValue) => box.left + (gbValue / xs.max) * (box.right - box.left);
  const y = (mfu) => box.bottom - (mfu / ys.max) * (box.bottom - box.top);
  yAxis(chart, box, ys, (v) => `${Math.round(v * 100)}%`);
  xAxis(chart, box, xs, x);
  const mid = (box.top + box.bottom) / 2;
  chart.append(svg("text", { x: 12, y: mid, class: "axis-label", "text-anchor": "middle", transform: `rotate(-90 12 ${mid})` }, "MFU"));
  const capX = x(capacity);
  chart.append(svg("line", { x1: capX, x2: capX, y1: box.top, y2: box.bottom, class: "capacity" }));
  chart.append(svg("text", { x: capX - 4, y: box.top + 10, "text-anchor": "end", class: "capacity-label" }, `${capacity} GB`));
  for (const tried of view.visited) {
    chart.append(svg("circle", { cx: x(tried.memory_gb.total), cy: y(tried.mfu), r: 4, class: "tried", "aria-hidden": "true" }));
  }
  const sorted = [...points].sort((a, b) => a.memory_gb.total - b.memory_gb.total);
  chart.append(svg("polyline", { points: stepLine(sorted, x, y), class: "frontier" }));
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

// Layouts evaluated since the job last changed: grey dots against the frontier.
