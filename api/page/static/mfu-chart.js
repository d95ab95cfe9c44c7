// The MFU waterfall: a bar per step, each loss in red above the bar it leaves, the step names
// across their columns or turned 45°, and a table of the same numbers.
import { niceScale, tickValues, yAxis } from "./chart-axes.js";
import { GAP, PAD, TICK_GAP, clearChart, frame, shownWidth, svg } from "./chart-svg.js";
import { centredOn, cut, measurer, widest, wrap } from "./chart-text.js";
import { $ } from "./dom.js";
import { pct } from "./format.js";

const INSET = 3; // around a value printed inside its bar
const SIN45 = Math.SQRT1_2;
const MAX_TURNED = 140; // a step name turned 45° is cut to this length (the table has it whole)
const MFU_PLOT_HEIGHT = 228;
const LEADING = 1; // between the lines of a wrapped step name, so that their boxes never touch

const STEP_LABELS = {
  "kernel efficiency": "kernel efficiency",
  "after pipeline bubble": "pipeline bubble",
  "after tensor-parallel communication": "TP comm.",
  "after data-parallel communication": "DP comm.",
  "after recomputation": "recompute",
  "after uneven stages": "uneven stages",
  "after context-parallel communication": "CP comm.",
  "after expert all-to-all": "expert all-to-all",
  "after host overhead": "host overhead",
  "after pipeline sends": "PP sends",
};

// The short name under a bar; names the table above does not know are shortened the same way.
const stepLabel = (name) => STEP_LABELS[name] || name.replace(/^after /, "").replaceAll("communication", "comm.");

export function drawMfuChart(steps) {
  const chart = $("mfu-chart");
  const shown = shownWidth(chart, () => drawMfuChart(steps));
  clearChart(chart);
  renderMfuTable(steps);
  $("mfu-chart-desc").textContent = steps.map((s) => `${s.name}: ${pct(s.mfu)}`).join("; ") + ".";
  if (steps.length === 0) return;
  const measure = measurer(chart);
  const labels = mfuLabels(measure, steps);
  const at = layOutMfu(measure, steps, labels, shown);
  frame(chart, at.width, at.height);

  const { box, column } = at;
  const y = (value) => box.bottom - (value / labels.scale.max) * (box.bottom - box.top);
  yAxis(chart, box, labels.ticks, y, labels.tick);
  const barWidth = Math.min(72, column * 0.7);
  const texts = [];
  labels.bars.forEach((bar, i) => {
    const middle = box.left + column * (i + 0.5);
    const { barTop, lossTop } = drawBar(chart, bar, i, middle - barWidth / 2, { y, box, barWidth, column });
    texts.push(...barTexts(bar, { barTop, lossTop, middle, barWidth }, box), ...nameTexts(at, labels.line, i, middle));
  });
  chart.append(...texts);
}

// The chart's labels, measured: the ticks, a line of a step name, and each bar's value and loss.
function mfuLabels(measure, steps) {
  const scale = niceScale(Math.max(...steps.map((s) => s.mfu)), 4);
  const bars = steps.map((step, i) => {
    const before = i === 0 ? step.mfu : steps[i - 1].mfu;
    const loss = before > step.mfu ? `−${((before - step.mfu) * 100).toFixed(1)}` : null;
    return {
      step, before, value: pct(step.mfu), valueM: measure("bar-label", pct(step.mfu)),
      loss, lossM: loss && measure("loss-label", loss),
    };
  });
  return { scale, ticks: tickValues(scale, 100, "%"), tick: measure("tick", "0%"), line: measure("axis-label", "x"), bars };
}

// Columns wide enough for any value printed over its bar and for step names turned 45°
// (whose spacing across their slant is a column's width times sin 45°).
function layOutMfu(measure, steps, { ticks, tick, line, bars }, shown) {
  const n = steps.length;
  const top = PAD + Math.max(tick.height / 2, bars[0].valueM.height + INSET);
  const box = { top, bottom: top + MFU_PLOT_HEIGHT, left: PAD + widest(ticks.map((t) => measure("tick", t.text))) + TICK_GAP };
  const least = Math.max(widest(bars.map((b) => b.valueM)) + GAP, (line.height + 2) / SIN45);
  const width = Math.max(shown, box.left + n * least + PAD);
  const names = nameSteps(measure, steps.map((s) => stepLabel(s.name)), box, width, least);
  box.right = names.width - PAD;
  const labelTop = box.bottom + tick.height / 2 + 2; // clear of the 0% tick
  const height = PAD + (names.lines
    ? labelTop + Math.max(...names.lines.map((l) => l.length)) * (line.height + LEADING)
    : labelTop + SIN45 * Math.max(...names.turned.map((t) => t.m.ascent + t.m.width + t.m.descent)));
  return { ...names, box, column: (names.width - PAD - box.left) / n, labelTop, height };
}

// Step names across their columns, wrapped; where a word is wider than its column, all turned
// 45° (ending under their bar) with the left margin widened so the first stays in the chart.
function nameSteps(measure, names, box, width, least) {
  const n = names.length;
  const lines = names.map((name) => wrap(name, (width - PAD - box.left) / n - 4, measure));
  if (!lines.some((l) => l === null)) return { lines, turned: null, width };
  const turned = names.map((name) => {
    const text = cut(name, MAX_TURNED, measure);
    return { text, m: measure("axis-label", text) };
  });
  turned.forEach((t, i) => {
    const f = (i + 0.5) / n;
    const reach = PAD + SIN45 * (t.m.width + t.m.ascent) - SIN45 * (t.m.ascent - t.m.descent) / 2;
    box.left = Math.max(box.left, (reach - (width - PAD) * f) / (1 - f));
  });
  return { lines: null, turned, width: Math.max(width, box.left + n * least + PAD) };
}

// A step's bar, its loss above it and the connector from the bar before; where its top and its loss start.
function drawBar(chart, bar, i, x, { y, box, barWidth, column }) {
  const barTop = y(bar.step.mfu);
  const lossTop = y(bar.before);
  chart.append(svg("rect", { x, width: barWidth, y: barTop, height: box.bottom - barTop, class: i === 0 ? "bar first" : "bar" }));
  if (bar.loss) chart.append(svg("rect", { x, width: barWidth, y: lossTop, height: barTop - lossTop, class: "loss" }));
  if (i > 0) {
    chart.append(svg("line", { x1: x - (column - barWidth), x2: x, y1: lossTop, y2: lossTop, class: "connector" }));
  }
  return { barTop, lossTop };
}

function barTexts(bar, { barTop, lossTop, middle, barWidth }, box) {
  // The value inside the top of its bar where it fits there, else over the bar (and its loss).
  const m = bar.valueM;
  const inside = m.width + 2 * INSET <= barWidth && m.height + 2 * INSET <= box.bottom - barTop;
  const texts = [svg("text", {
    x: middle, y: inside ? barTop + INSET + m.ascent : Math.min(barTop, lossTop) - INSET - m.descent,
    "text-anchor": "middle", class: inside ? "bar-label inside" : "bar-label halo",
  }, bar.value)];
  // The loss inside its red block where it fits (the table below always has it).
  if (bar.loss && bar.lossM.width + 2 <= barWidth && bar.lossM.height + 2 <= barTop - lossTop) {
    texts.push(svg("text", {
      x: middle, y: centredOn((barTop + lossTop) / 2, bar.lossM), "text-anchor": "middle", class: "loss-label",
    }, bar.loss));
  }
  return texts;
}

function nameTexts({ lines, turned, labelTop }, line, i, middle) {
  if (lines) {
    return lines[i].map((text, k) => svg("text", {
      x: middle, y: labelTop + line.ascent + k * (line.height + LEADING), "text-anchor": "middle", class: "axis-label",
    }, text));
  }
  const t = turned[i].m;
  const ax = middle + SIN45 * (t.ascent - t.descent) / 2;
  const ay = labelTop + SIN45 * t.ascent;
  return [svg("text", {
    x: ax, y: ay, "text-anchor": "end", class: "axis-label", transform: `rotate(-45 ${ax} ${ay})`,
  }, turned[i].text)];
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
