// Charts drawn by hand as SVG, each with a text alternative (<desc>) and a table of its numbers.
// Pure drawing: every figure comes from the server's estimates passed in.
//
// Layout: every label is measured by the browser (getBBox) before anything is placed, and the
// margins, columns and label positions are worked out from those measures, so that no two
// labels overlap and none leaves its chart. A chart is laid out in CSS pixels at the width it
// is shown (its viewBox is that width), so its text keeps the page's size at any window width
// and it is drawn again when its width changes; only where its labels need more room than it
// has is it laid out wider and scaled down to fit.

const $ = (id) => document.getElementById(id);
const SVG_NS = "http://www.w3.org/2000/svg";

const PAD = 4; // between any label and the chart's edge
const GAP = 6; // between a label and the mark it names
const TICK_GAP = 6; // between a tick label and its axis
const INSET = 3; // around a value printed inside its bar
const SIN45 = Math.SQRT1_2;
const MAX_TURNED = 140; // a step name turned 45° is cut to this length (the table has it whole)
const MAX_LINES = 3; // a step name across its column takes at most this many lines

const MEMORY_PARTS = [
  { key: "weights", label: "Weights", colour: "#2f5d9e" },
  { key: "gradients", label: "Gradients", colour: "#6aa5dc" },
  { key: "optimizer", label: "Optimiser state", colour: "#e3a33b" },
  { key: "activations", label: "Activations", colour: "#3f9e74" },
];

const STEP_LABELS = {
  "kernel efficiency": "kernel efficiency",
  "after pipeline bubble": "pipeline bubble",
  "after tensor-parallel communication": "TP comm.",
  "after data-parallel communication": "DP comm.",
  "after recomputation": "recompute",
  "after uneven stages": "uneven stages",
  "after context-parallel communication": "CP comm.",
  "after expert all-to-all": "expert all-to-all",
  "after pipeline sends": "PP sends",
};

// The short name under a bar; names the table above does not know are shortened the same way.
const stepLabel = (name) => STEP_LABELS[name] || name.replace(/^after /, "").replaceAll("communication", "comm.");

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

// ---------- measuring and sizing ----------

// The box a text of a class takes, as the browser lays it out: its width, and how far it
// reaches above (ascent) and below (descent) its baseline. Estimated from the font size only
// when the chart is not rendered (nothing is then seen, so nothing can collide).
function measurer(chart) {
  const known = new Map();
  return (cls, content) => {
    const key = `${cls}\n${content}`;
    if (!known.has(key)) {
      const probe = svg("text", { x: 0, y: 0, class: cls, visibility: "hidden" }, content);
      chart.append(probe);
      const box = probe.getBBox();
      const size = parseFloat(getComputedStyle(probe).fontSize) || 12;
      probe.remove();
      known.set(key, box.height > 0
        ? { width: box.width, ascent: -box.y, descent: box.y + box.height, height: box.height }
        : { width: 0.6 * size * content.length, ascent: 0.9 * size, descent: 0.25 * size, height: 1.15 * size });
    }
    return known.get(key);
  };
}

// The baseline that centres a measured text on y.
const centredOn = (y, m) => y + (m.ascent - m.descent) / 2;

const widest = (measures) => Math.max(0, ...measures.map((m) => m.width));

// Redraw a chart when the width it is shown at changes (the window, or the page's columns).
const drawn = new Map();
const resizes = typeof ResizeObserver === "function"
  ? new ResizeObserver((entries) => {
    for (const { target, contentRect } of entries) {
      const last = drawn.get(target);
      if (last && Math.abs(contentRect.width - last.width) >= 0.5) {
        last.width = contentRect.width;
        requestAnimationFrame(() => drawn.get(target).draw());
      }
    }
  })
  : null;

// The width to lay the chart out at, and how to draw it again at another.
function shownWidth(chart, draw) {
  if (!drawn.has(chart) && resizes) resizes.observe(chart);
  const width = chart.getBoundingClientRect().width || chart.viewBox.baseVal.width;
  drawn.set(chart, { width, draw });
  return width;
}

const frame = (chart, width, height) => chart.setAttribute("viewBox", `0 0 ${width} ${height}`);

// ---------- scales and axes ----------

// A round axis maximum and step: 1, 2, 2.5 or 5 times a power of ten.
function niceScale(maximum, ticks = 5) {
  const raw = (maximum > 0 ? maximum : 1) / ticks;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * power).find((s) => s >= raw * (1 - 1e-9));
  return { max: Math.ceil(maximum / step - 1e-9) * step || step * ticks, step };
}

// The ticks of a scale, printed with as many decimals as its step needs (times `unit`).
function tickValues(scale, unit = 1, suffix = "") {
  const step = scale.step * unit;
  const digits = [0, 1, 2, 3, 4].find((d) => Math.abs(Number(step.toFixed(d)) - step) < 1e-9 * step) ?? 4;
  const count = Math.round(scale.max / scale.step);
  return Array.from({ length: count + 1 }, (_, k) => ({
    value: k * scale.step, text: `${(k * step).toFixed(digits)}${suffix}`,
  }));
}

function yAxis(chart, box, ticks, y, tickMeasure) {
  for (const tick of ticks) {
    const at = y(tick.value);
    chart.append(svg("line", { x1: box.left, x2: box.right, y1: at, y2: at, class: "grid" }));
    chart.append(svg("text", {
      x: box.left - TICK_GAP, y: centredOn(at, tickMeasure), class: "tick", "text-anchor": "end",
    }, tick.text));
  }
}

// An axis title turned 90° against the left edge (it takes its text's height), centred on the plot.
function leftTitle(chart, text, m, box) {
  const x = PAD + m.ascent;
  const mid = (box.top + box.bottom) / 2;
  chart.append(svg("text", {
    x, y: mid, class: "axis-label", "text-anchor": "middle", transform: `rotate(-90 ${x} ${mid})`,
  }, text));
}

const apart = (a, b) => a.right <= b.left || b.right <= a.left || a.bottom <= b.top || b.bottom <= a.top;

// Where items of one size go, each as near as it can be to the position it wants (its
// middle), none overlapping another and all within [lo, hi]: items that would collide move as
// one block, centred on the mean of what they want.
function spread(wants, size, lo, hi) {
  const blocks = [];
  for (const item of wants.map((want, i) => ({ want, i })).sort((a, b) => a.want - b.want)) {
    blocks.push({ items: [item], top: 0 });
    for (;;) {
      const block = blocks[blocks.length - 1];
      const n = block.items.length;
      const ideal = block.items.reduce((sum, it, k) => sum + it.want - size * (k + 0.5), 0) / n;
      block.top = Math.max(lo, Math.min(ideal, hi - n * size));
      const previous = blocks[blocks.length - 2];
      if (!previous || previous.top + previous.items.length * size <= block.top + 1e-9) break;
      previous.items.push(...block.items);
      blocks.pop();
    }
  }
  const middles = [];
  for (const block of blocks) block.items.forEach((it, k) => { middles[it.i] = block.top + size * (k + 0.5); });
  return middles;
}

// ---------- memory by part ----------

const MEMORY_PLOT_HEIGHT = 256;
const SWATCH = 10;
const SWATCH_GAP = 5;

export function drawMemoryChart(memory, fits) {
  const chart = $("memory-chart");
  const shown = shownWidth(chart, () => drawMemoryChart(memory, fits));
  clearChart(chart);
  const measure = measurer(chart);
  const scale = niceScale(Math.max(memory.total, memory.capacity));
  const ticks = tickValues(scale);
  const tick = measure("tick", "0");
  const title = measure("axis-label", "GB per GPU");
  const totalClass = fits ? "total-label" : "total-label bad";
  const total = { text: gb(memory.total, 1), m: measure(totalClass, gb(memory.total, 1)) };
  const capacity = { text: `capacity ${memory.capacity} GB` };
  capacity.m = measure("capacity-label", capacity.text);
  const legend = MEMORY_PARTS.map((part) => {
    const text = `${part.label} ${memory[part.key].toFixed(2)}`;
    return { part, text, m: measure("segment-label", text) };
  });
  const legendWidth = SWATCH + SWATCH_GAP + widest(legend.map((l) => l.m));
  const row = Math.max(SWATCH, legend[0].m.height) + 4;

  // Room above the plot for the total or the capacity label over a bar at the top of the scale.
  const top = PAD + Math.max(tick.height / 2, total.m.height + GAP, capacity.m.height + GAP);
  const box = { top, bottom: top + MEMORY_PLOT_HEIGHT, left: PAD + title.height + GAP + widest(ticks.map((t) => measure("tick", t.text))) + TICK_GAP };
  const height = box.bottom + tick.height / 2 + PAD;
  const y = (value) => box.bottom - (value / scale.max) * (box.bottom - box.top);

  // Across: axis | bar | legend, with `reserve` kept free right of the legend (for the
  // capacity label, when it cannot share the legend's column). The bar is never narrower than
  // its total; the chart is laid out wider when even that does not fit.
  const across = (reserve) => {
    const least = 12 + total.m.width + 8;
    let width = shown;
    let room = width - PAD - reserve - legendWidth - 10 - box.left;
    if (room < least) {
      width += least - room;
      room = least;
    }
    const plot = width - PAD - box.left;
    const barWidth = Math.min(Math.max(plot * 0.24, total.m.width + 8), 110, room - 12);
    const barX = box.left + Math.min(Math.max(plot * 0.08, 12), 40, room - barWidth);
    return { width, right: width - PAD, barX, barWidth, legendX: barX + barWidth + 10 };
  };

  // The legend beside the bar, each label at its segment's middle, spread so none collide.
  let base = 0;
  const wants = legend.map((l) => {
    const value = memory[l.part.key];
    base += value;
    return (y(base - value) + y(base)) / 2;
  });
  const middles = spread(wants, row, PAD, height - PAD);

  // The total above its bar, lifted over the capacity line rather than struck through by it.
  const capY = y(memory.capacity);
  let totalBase = y(memory.total) - GAP - total.m.descent;
  if (capY > totalBase - total.m.ascent - GAP && capY < totalBase + total.m.descent + GAP) {
    totalBase = Math.min(totalBase, capY - GAP - total.m.descent);
  }

  // The capacity label at the right end of its line, above it or else below it, wherever no
  // legend label is; failing both, in a column of its own beyond the legend.
  const place = (x) => {
    const labels = legend.map((l, i) => ({
      left: x.legendX, right: x.legendX + legendWidth, top: middles[i] - l.m.height / 2, bottom: middles[i] + l.m.height / 2,
    }));
    labels.push({
      left: x.barX + x.barWidth / 2 - total.m.width / 2, right: x.barX + x.barWidth / 2 + total.m.width / 2,
      top: totalBase - total.m.ascent, bottom: totalBase + total.m.descent,
    });
    const left = x.right - capacity.m.width;
    for (const baseline of [capY - GAP / 2 - capacity.m.descent, capY + GAP / 2 + capacity.m.ascent]) {
      const label = { left, right: x.right, top: baseline - capacity.m.ascent, bottom: baseline + capacity.m.descent };
      if (label.top >= PAD && label.bottom <= height - PAD && labels.every((other) => apart(label, other))) return baseline;
    }
    return null;
  };
  let x = across(0);
  let capBase = place(x);
  if (capBase === null) {
    x = across(capacity.m.width + GAP);
    capBase = capY - GAP / 2 - capacity.m.descent;
  }
  box.right = x.right;
  frame(chart, x.width, height);

  yAxis(chart, box, ticks, y, tick);
  leftTitle(chart, "GB per GPU", title, box);
  base = 0;
  for (const part of MEMORY_PARTS) {
    const value = memory[part.key];
    chart.append(svg("rect", {
      x: x.barX, width: x.barWidth, y: y(base + value), height: Math.max(0, y(base) - y(base + value)),
      fill: part.colour, class: "segment",
    }));
    base += value;
  }
  chart.append(svg("line", { x1: box.left, x2: box.right, y1: capY, y2: capY, class: "capacity" }));
  legend.forEach((label, i) => {
    chart.append(svg("rect", { x: x.legendX, y: middles[i] - SWATCH / 2, width: SWATCH, height: SWATCH, fill: label.part.colour }));
    chart.append(svg("text", {
      x: x.legendX + SWATCH + SWATCH_GAP, y: centredOn(middles[i], label.m), class: "segment-label halo",
    }, label.text));
  });
  chart.append(svg("text", {
    x: box.right, y: capBase, class: "capacity-label halo", "text-anchor": "end",
  }, capacity.text));
  chart.append(svg("text", {
    x: x.barX + x.barWidth / 2, y: totalBase, "text-anchor": "middle", class: `${totalClass} halo`,
  }, total.text));
  $("memory-chart-desc").textContent = `${MEMORY_PARTS.map((p) => `${p.label} ${memory[p.key].toFixed(2)} GB`).join(", ")}; `
    + `total ${memory.total.toFixed(2)} GB against a capacity of ${memory.capacity} GB: ${fits ? "fits" : "does not fit"}.`;
  renderMemoryTable(memory);
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

// ---------- the MFU waterfall ----------

const MFU_PLOT_HEIGHT = 228;

// A step name in lines no wider than `room`, or null when a word alone is wider or it takes
// more than MAX_LINES lines.
function wrap(text, room, measure) {
  const lines = [];
  for (const word of text.split(" ")) {
    const longer = lines.length ? `${lines[lines.length - 1]} ${word}` : word;
    if (lines.length && measure("axis-label", longer).width <= room) lines[lines.length - 1] = longer;
    else if (measure("axis-label", word).width <= room) lines.push(word);
    else return null;
  }
  return lines.length <= MAX_LINES ? lines : null;
}

// A text cut, with an ellipsis, to fit `room`.
function cut(text, room, measure) {
  if (measure("axis-label", text).width <= room) return text;
  let [fits, fails] = [0, text.length];
  while (fails - fits > 1) {
    const mid = Math.floor((fits + fails) / 2);
    if (measure("axis-label", `${text.slice(0, mid).trimEnd()}…`).width <= room) fits = mid;
    else fails = mid;
  }
  return `${text.slice(0, fits).trimEnd()}…`;
}

export function drawMfuChart(steps) {
  const chart = $("mfu-chart");
  const shown = shownWidth(chart, () => drawMfuChart(steps));
  clearChart(chart);
  renderMfuTable(steps);
  $("mfu-chart-desc").textContent = steps.map((s) => `${s.name}: ${pct(s.mfu)}`).join("; ") + ".";
  if (steps.length === 0) return;
  const measure = measurer(chart);
  const n = steps.length;
  const scale = niceScale(Math.max(...steps.map((s) => s.mfu)), 4);
  const ticks = tickValues(scale, 100, "%");
  const tick = measure("tick", "0%");
  const line = measure("axis-label", "x");
  const bars = steps.map((step, i) => {
    const before = i === 0 ? step.mfu : steps[i - 1].mfu;
    const loss = before > step.mfu ? `−${((before - step.mfu) * 100).toFixed(1)}` : null;
    return {
      step, before, value: pct(step.mfu), valueM: measure("bar-label", pct(step.mfu)),
      loss, lossM: loss && measure("loss-label", loss),
    };
  });
  const valueHeight = bars[0].valueM.height;

  // Columns wide enough for any value printed over its bar and for step names turned 45°
  // (whose spacing across their slant is a column's width times sin 45°).
  const top = PAD + Math.max(tick.height / 2, valueHeight + INSET);
  const box = { top, bottom: top + MFU_PLOT_HEIGHT, left: PAD + widest(ticks.map((t) => measure("tick", t.text))) + TICK_GAP };
  const least = Math.max(widest(bars.map((b) => b.valueM)) + GAP, (line.height + 2) / SIN45);
  let width = Math.max(shown, box.left + n * least + PAD);
  const columnAt = () => (width - PAD - box.left) / n;

  // Step names across their columns, wrapped; where a word is wider than its column, all turned
  // 45° (ending under their bar) with the left margin widened so the first stays in the chart.
  const names = steps.map((s) => stepLabel(s.name));
  let lines = names.map((name) => wrap(name, columnAt() - 4, measure));
  let turned = null;
  if (lines.some((l) => l === null)) {
    lines = null;
    turned = names.map((name) => {
      const text = cut(name, MAX_TURNED, measure);
      return { text, m: measure("axis-label", text) };
    });
    turned.forEach((t, i) => {
      const f = (i + 0.5) / n;
      const reach = PAD + SIN45 * (t.m.width + t.m.ascent) - SIN45 * (t.m.ascent - t.m.descent) / 2;
      box.left = Math.max(box.left, (reach - (width - PAD) * f) / (1 - f));
    });
    width = Math.max(width, box.left + n * least + PAD);
  }
  box.right = width - PAD;
  const column = columnAt();
  const labelTop = box.bottom + tick.height / 2 + 2; // clear of the 0% tick
  const height = PAD + (lines
    ? labelTop + Math.max(...lines.map((l) => l.length)) * line.height
    : labelTop + SIN45 * Math.max(...turned.map((t) => t.m.ascent + t.m.width + t.m.descent)));
  frame(chart, width, height);

  const y = (value) => box.bottom - (value / scale.max) * (box.bottom - box.top);
  yAxis(chart, box, ticks, y, tick);
  const barWidth = Math.min(72, column * 0.7);
  const labels = [];
  bars.forEach((bar, i) => {
    const middle = box.left + column * (i + 0.5);
    const x = middle - barWidth / 2;
    const barTop = y(bar.step.mfu);
    const lossTop = y(bar.before);
    chart.append(svg("rect", { x, width: barWidth, y: barTop, height: box.bottom - barTop, class: i === 0 ? "bar first" : "bar" }));
    if (bar.loss) chart.append(svg("rect", { x, width: barWidth, y: lossTop, height: barTop - lossTop, class: "loss" }));
    if (i > 0) {
      chart.append(svg("line", { x1: x - (column - barWidth), x2: x, y1: lossTop, y2: lossTop, class: "connector" }));
    }
    // The value inside the top of its bar where it fits there, else over the bar (and its loss).
    const m = bar.valueM;
    const inside = m.width + 2 * INSET <= barWidth && m.height + 2 * INSET <= box.bottom - barTop;
    labels.push(svg("text", {
      x: middle, y: inside ? barTop + INSET + m.ascent : Math.min(barTop, lossTop) - INSET - m.descent,
      "text-anchor": "middle", class: inside ? "bar-label inside" : "bar-label halo",
    }, bar.value));
    // The loss inside its red block where it fits (the table below always has it).
    if (bar.loss && bar.lossM.width + 2 <= barWidth && bar.lossM.height + 2 <= barTop - lossTop) {
      labels.push(svg("text", {
        x: middle, y: centredOn((barTop + lossTop) / 2, bar.lossM), "text-anchor": "middle", class: "loss-label",
      }, bar.loss));
    }
    if (lines) {
      lines[i].forEach((text, k) => labels.push(svg("text", {
        x: middle, y: labelTop + line.ascent + k * line.height, "text-anchor": "middle", class: "axis-label",
      }, text)));
    } else {
      const t = turned[i].m;
      const ax = middle + SIN45 * (t.ascent - t.descent) / 2;
      const ay = labelTop + SIN45 * t.ascent;
      labels.push(svg("text", {
        x: ax, y: ay, "text-anchor": "end", class: "axis-label", transform: `rotate(-45 ${ax} ${ay})`,
      }, turned[i].text));
    }
  });
  chart.append(...labels);
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

// ---------- memory against MFU ----------

const PARETO_PLOT_HEIGHT = 210;

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
  const shown = shownWidth(chart, () => drawPareto(view));
  clearChart(chart);
  const measure = measurer(chart);
  const tick = measure("tick", "0");
  const title = measure("axis-label", "MFU");
  const xTitle = measure("axis-label", "memory per GPU, GB");
  const top = PAD + Math.max(tick.height / 2, 9); // 9: the current layout's ring
  const box = { top, bottom: top + PARETO_PLOT_HEIGHT };
  const xTickTop = box.bottom + tick.height / 2 + 2; // clear of the 0% tick
  const height = xTickTop + tick.height + GAP + xTitle.height + PAD;
  const points = view.frontier;
  if (!points || points.length === 0) {
    frame(chart, shown, height);
    const text = points ? "No layout of this job fits." : "Press Optimise to draw the frontier.";
    const m = measure("placeholder", text);
    chart.append(svg("text", { x: shown / 2, y: centredOn(height / 2, m), "text-anchor": "middle", class: "placeholder" }, text));
    return;
  }
  const everything = points.concat(view.visited);
  const capacity = points[0].memory_gb.capacity;
  const ys = niceScale(Math.max(...everything.map((p) => p.mfu)) * 1.1, 4);
  const yTicks = tickValues(ys, 100, "%");
  box.left = PAD + title.height + GAP + widest(yTicks.map((t) => measure("tick", t.text))) + TICK_GAP;
  const width = Math.max(shown, box.left + 200 + PAD);
  // As many x ticks (up to five) as fit their labels side by side.
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
  frame(chart, width, height);
  const x = (gbValue) => box.left + (gbValue / xs.max) * (box.right - box.left);
  const y = (mfu) => box.bottom - (mfu / ys.max) * (box.bottom - box.top);
  yAxis(chart, box, yTicks, y, tick);
  leftTitle(chart, "MFU", title, box);
  const labels = xTicks.map((t) => svg("text", { x: x(t.value), y: xTickTop + tick.ascent, "text-anchor": "middle", class: "tick" }, t.text));
  labels.push(svg("text", {
    x: (box.left + box.right) / 2, y: xTickTop + tick.height + GAP + xTitle.ascent, "text-anchor": "middle", class: "axis-label",
  }, "memory per GPU, GB"));
  // The capacity label beside its line near the top: left of it, or right where there is no room.
  const capX = x(capacity);
  const cap = { text: `${capacity} GB` };
  cap.m = measure("capacity-label", cap.text);
  const leftOfLine = capX - 4 - cap.m.width >= box.left + 2;
  labels.push(svg("text", {
    x: leftOfLine ? capX - 4 : capX + 4, y: box.top + 2 + cap.m.ascent,
    "text-anchor": leftOfLine ? "end" : "start", class: "capacity-label halo",
  }, cap.text));
  chart.append(svg("line", { x1: capX, x2: capX, y1: box.top, y2: box.bottom, class: "capacity" }));
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
