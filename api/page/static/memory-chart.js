// Memory per GPU by part: one stacked bar against the capacity line, a legend beside it, and a
// table of the same numbers.
import { niceScale, leftTitle, tickValues, yAxis } from "./chart-axes.js";
import { GAP, PAD, TICK_GAP, clearChart, frame, shownWidth, svg } from "./chart-svg.js";
import { apart, centredOn, measurer, spread, widest } from "./chart-text.js";
import { $ } from "./dom.js";
import { gb } from "./format.js";

const MEMORY_PARTS = [
  { key: "weights", label: "Weights", colour: "#2f5d9e" },
  { key: "gradients", label: "Gradients", colour: "#6aa5dc" },
  { key: "optimizer", label: "Optimiser state", colour: "#e3a33b" },
  { key: "activations", label: "Activations", colour: "#3f9e74" },
  // priced by profile standard only: shown where they hold something
  { key: "fragmentation", label: "Allocator reserve", colour: "#b07aa1", optional: true },
  { key: "runtime", label: "CUDA context, NCCL", colour: "#8c8c8c", optional: true },
];

// The parts this answer holds: the optional ones only where they are above zero.
const partsOf = (memory) => MEMORY_PARTS.filter((p) => !p.optional || memory[p.key] > 0);

const MEMORY_PLOT_HEIGHT = 256;
const SWATCH = 10;
const SWATCH_GAP = 5;

export function drawMemoryChart(memory, fits) {
  const chart = $("memory-chart");
  const shown = shownWidth(chart, () => drawMemoryChart(memory, fits));
  clearChart(chart);
  const measure = measurer(chart);
  const labels = memoryLabels(measure, memory, fits);
  const { box, height, y } = memoryRows(measure, labels);
  const at = {
    left: box.left, height, capY: y(memory.capacity),
    middles: legendMiddles(memory, labels, y, height), totalBase: totalBaseline(memory, labels.total, y),
  };
  const { x, capBase } = placeCapacity(shown, labels, at);
  box.right = x.right;
  frame(chart, x.width, height);

  yAxis(chart, box, labels.ticks, y, labels.tick);
  leftTitle(chart, "GB per GPU", labels.title, box);
  drawSegments(chart, memory, x, y);
  chart.append(svg("line", { x1: box.left, x2: box.right, y1: at.capY, y2: at.capY, class: "capacity" }));
  drawMemoryLabels(chart, labels, x, at, capBase);
  $("memory-chart-desc").textContent = `${partsOf(memory).map((p) => `${p.label} ${memory[p.key].toFixed(2)} GB`).join(", ")}; `
    + `total ${memory.total.toFixed(2)} GB against a capacity of ${memory.capacity} GB: ${fits ? "fits" : "does not fit"}.`;
  renderMemoryTable(memory);
}

// Every label of the chart, measured: the ticks, the axis title, the total, the capacity and the legend.
function memoryLabels(measure, memory, fits) {
  const scale = niceScale(Math.max(memory.total, memory.capacity));
  const totalClass = fits ? "total-label" : "total-label bad";
  const capacity = { text: `capacity ${memory.capacity} GB` };
  capacity.m = measure("capacity-label", capacity.text);
  const legend = partsOf(memory).map((part) => {
    const text = `${part.label} ${memory[part.key].toFixed(2)}`;
    return { part, text, m: measure("segment-label", text) };
  });
  return {
    scale,
    ticks: tickValues(scale),
    tick: measure("tick", "0"),
    title: measure("axis-label", "GB per GPU"),
    totalClass,
    total: { text: gb(memory.total, 1), m: measure(totalClass, gb(memory.total, 1)) },
    capacity,
    legend,
    legendWidth: SWATCH + SWATCH_GAP + widest(legend.map((l) => l.m)),
    row: Math.max(SWATCH, legend[0].m.height) + 4,
  };
}

// Down: room above the plot for the total or the capacity label over a bar at the top of the scale.
function memoryRows(measure, { scale, ticks, tick, title, total, capacity }) {
  const top = PAD + Math.max(tick.height / 2, total.m.height + GAP, capacity.m.height + GAP);
  const box = { top, bottom: top + MEMORY_PLOT_HEIGHT, left: PAD + title.height + GAP + widest(ticks.map((t) => measure("tick", t.text))) + TICK_GAP };
  const height = box.bottom + tick.height / 2 + PAD;
  const y = (value) => box.bottom - (value / scale.max) * (box.bottom - box.top);
  return { box, height, y };
}

// Across: axis | bar | legend, with `reserve` kept free right of the legend (for the
// capacity label, when it cannot share the legend's column). The bar is never narrower than
// its total; the chart is laid out wider when even that does not fit.
function memoryColumns(shown, left, { total, legendWidth }, reserve) {
  const least = 12 + total.m.width + 8;
  let width = shown;
  let room = width - PAD - reserve - legendWidth - 10 - left;
  if (room < least) {
    width += least - room;
    room = least;
  }
  const plot = width - PAD - left;
  const barWidth = Math.min(Math.max(plot * 0.24, total.m.width + 8), 110, room - 12);
  const barX = left + Math.min(Math.max(plot * 0.08, 12), 40, room - barWidth);
  return { width, right: width - PAD, barX, barWidth, legendX: barX + barWidth + 10 };
}

// The legend beside the bar, each label at its segment's middle, spread so none collide.
function legendMiddles(memory, { legend, row }, y, height) {
  let base = 0;
  const wants = legend.map((l) => {
    const value = memory[l.part.key];
    base += value;
    return (y(base - value) + y(base)) / 2;
  });
  return spread(wants, row, PAD, height - PAD);
}

// The total above its bar, lifted over the capacity line rather than struck through by it.
function totalBaseline(memory, total, y) {
  const capY = y(memory.capacity);
  let totalBase = y(memory.total) - GAP - total.m.descent;
  if (capY > totalBase - total.m.ascent - GAP && capY < totalBase + total.m.descent + GAP) {
    totalBase = Math.min(totalBase, capY - GAP - total.m.descent);
  }
  return totalBase;
}

// The capacity label at the right end of its line, above it or else below it, wherever no
// legend label is; failing both, in a column of its own beyond the legend.
function placeCapacity(shown, labels, at) {
  let x = memoryColumns(shown, at.left, labels, 0);
  let capBase = capacityBaseline(x, labels, at);
  if (capBase === null) {
    x = memoryColumns(shown, at.left, labels, labels.capacity.m.width + GAP);
    capBase = at.capY - GAP / 2 - labels.capacity.m.descent;
  }
  return { x, capBase };
}

// The capacity label's baseline above or below its line, or null where both collide.
function capacityBaseline(x, { legend, legendWidth, total, capacity }, { middles, totalBase, capY, height }) {
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
}

function drawSegments(chart, memory, x, y) {
  let base = 0;
  for (const part of partsOf(memory)) {
    const value = memory[part.key];
    chart.append(svg("rect", {
      x: x.barX, width: x.barWidth, y: y(base + value), height: Math.max(0, y(base) - y(base + value)),
      fill: part.colour, class: "segment",
    }));
    base += value;
  }
}

function drawMemoryLabels(chart, { legend, capacity, total, totalClass }, x, { middles, totalBase }, capBase) {
  legend.forEach((label, i) => {
    chart.append(svg("rect", { x: x.legendX, y: middles[i] - SWATCH / 2, width: SWATCH, height: SWATCH, fill: label.part.colour }));
    chart.append(svg("text", {
      x: x.legendX + SWATCH + SWATCH_GAP, y: centredOn(middles[i], label.m), class: "segment-label halo",
    }, label.text));
  });
  chart.append(svg("text", {
    x: x.right, y: capBase, class: "capacity-label halo", "text-anchor": "end",
  }, capacity.text));
  chart.append(svg("text", {
    x: x.barX + x.barWidth / 2, y: totalBase, "text-anchor": "middle", class: `${totalClass} halo`,
  }, total.text));
}

function renderMemoryTable(memory) {
  const rows = partsOf(memory).map((p) => [p.label, memory[p.key].toFixed(2), p.colour]);
  rows.push(["Total", memory.total.toFixed(2)], ["Capacity", memory.capacity.toFixed(2)]);
  $("memory-table").tBodies[0].replaceChildren(...rows.map(([name, value, colour]) => {
    const row = document.createElement("tr");
    const swatch = colour ? `<span class="swatch" style="background:${colour}"></span>` : "";
    row.innerHTML = `<th scope="row">${swatch}${name}</th><td class="num">${value}</td>`;
    return row;
  }));
}
