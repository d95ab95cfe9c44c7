// The workshop page: controls -> POST /v1/evaluate -> two hand-drawn SVG charts.
// No library, no build step: the page works offline. Every figure comes from the server;
// this file only reads controls, asks, and draws.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const DEBOUNCE_MS = 180;
const BUSY_RETRY_MS = 1500;
const LAYOUT_CONTROLS = ["tp", "pp", "cp", "vpp", "micro_batch", "zero", "recompute", "placement"];
const CONTROL_IDS = {
  tp: "tp", pp: "pp", cp: "cp", vpp: "vpp", micro_batch: "micro-batch", zero: "zero",
  recompute: "recompute", placement: "placement", gpus: "gpus", gpu: "gpu", global_batch: "global-batch",
  seq_len: "seq-len", model: "model", profile: "profile",
};
const OPTION_LABELS = {
  zero: { 0: "0 · none", 1: "1 · optimiser", 2: "2 · + grads", 3: "3 · + weights" },
};
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

// The plate's scenarios: each changes one thing from its default.
const PLATE = {
  model: "llama3-405b", gpu: "h100-sxm", gpus: 16384, global_batch: 2048, seq_len: 8192,
  layout: { tp: 8, pp: 16, cp: 1, vpp: 4, micro_batch: 1, zero: 2, recompute: "none", placement: ["tp", "cp", "pp", "dp"] },
};
const plateWith = (layout, job = {}) => ({ ...PLATE, ...job, layout: { ...PLATE.layout, ...layout } });
const SCENARIOS = {
  "default": PLATE,
  "no-interleaving": plateWith({ vpp: 1 }),
  "tp16": plateWith({ tp: 16 }),
  "no-pipeline": plateWith({ pp: 1, vpp: 1 }),
  "no-sharding": plateWith({ zero: 0 }),
  "full-recompute": plateWith({ recompute: "full" }),
  "70b": plateWith({ pp: 4 }, { model: "llama3-70b", gpus: 2048 }),
};

const MAX_TRIED = 60;
const state = { generation: 0, timer: null, estimate: null, frontier: null, optimum: null, visited: [] };
const $ = (id) => document.getElementById(id);

// ---------- requests ----------

class RequestError extends Error {
  constructor(message, field, status) {
    super(message);
    this.field = field;
    this.status = status;
  }
}

async function postJson(path, body) {
  let response;
  try {
    response = await fetch(path, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
  } catch (error) {
    throw new RequestError(`The server did not answer (${error.message}).`, null, 0);
  }
  const data = await response.json().catch(() => null);
  if (response.ok) return data;
  const detail = data && data.error;
  if (detail) throw new RequestError(detail.message, detail.field, response.status);
  if (response.status === 404) throw new RequestError(`${path} is not available on this server yet.`, null, 404);
  throw new RequestError(`${path} answered HTTP ${response.status}.`, null, response.status);
}

function readModel() {
  const choice = $("model").value;
  if (choice !== "custom") return choice;
  const text = $("hf-config").value.trim();
  if (!text) throw new RequestError("Paste a Hugging Face config.json, or choose a preset model.", "model");
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new RequestError(`config.json is not valid JSON: ${error.message}`, "model");
  }
}

function readInteger(id, name) {
  const raw = $(id).value.trim();
  if (!/^\d+$/.test(raw)) throw new RequestError(`${name} must be a whole number, got "${raw}".`, name);
  return Number(raw);
}

// The job without a layout: what /v1/optimize and /v1/pareto take.
function readJob() {
  return {
    model: readModel(),
    cluster: { gpus: readInteger("gpus", "cluster.gpus"), gpu: $("gpu").value },
    training: {
      global_batch: readInteger("global-batch", "training.global_batch"),
      seq_len: readInteger("seq-len", "training.seq_len"),
    },
    profile: $("profile").value,
  };
}

function readLayout() {
  const layout = {};
  for (const control of LAYOUT_CONTROLS) {
    const value = $(CONTROL_IDS[control]).value;
    if (control === "placement") layout[control] = value.split(",");
    else layout[control] = control === "recompute" ? value : Number(value);
  }
  return layout;
}

// ---------- evaluate on every change ----------

function scheduleRefresh() {
  clearTimeout(state.timer);
  document.body.dataset.state = "pending";
  state.timer = setTimeout(refresh, DEBOUNCE_MS);
}

async function refresh() {
  const generation = ++state.generation;
  document.body.dataset.state = "loading";
  let body;
  try {
    body = { ...readJob(), layout: readLayout() };
  } catch (error) {
    return showRequestError(error);
  }
  const [estimate, choices] = await Promise.allSettled([
    postJson("/v1/evaluate", body),
    postJson("/page/choices", body),
  ]);
  if (generation !== state.generation) return; // a newer request is on its way
  const valid = estimate.status === "fulfilled";
  if (choices.status === "fulfilled") renderChoices(choices.value, valid);
  if (!valid) {
    // Saturated (503): say so and ask again shortly, unless a newer change asks first.
    if (estimate.reason.status === 503) state.timer = setTimeout(refresh, BUSY_RETRY_MS);
    return showRequestError(estimate.reason);
  }
  clearRequestError();
  state.estimate = estimate.value;
  remember(estimate.value);
  renderEstimate(estimate.value);
  renderPareto();
  document.body.dataset.state = "ready";
}

function showRequestError(error) {
  const box = $("request-error");
  box.textContent = error.message;
  box.hidden = false;
  // The same message above the (dimmed) figures, for whoever is looking there; the alert
  // beside the controls is the one announced.
  $("results-error").textContent = `Not a valid layout, figures below are stale: ${error.message}`;
  $("results-error").hidden = false;
  unmarkInvalid();
  const control = controlForField(error.field);
  if (control) {
    control.setAttribute("aria-invalid", "true");
    control.setAttribute("aria-errormessage", box.id);
  }
  $("results").classList.add("stale");
  $("dp").textContent = "–";
  document.body.dataset.state = "error";
}

function clearRequestError() {
  $("request-error").hidden = true;
  $("results-error").hidden = true;
  $("results").classList.remove("stale");
  unmarkInvalid();
}

function unmarkInvalid() {
  document.querySelectorAll("[aria-invalid]").forEach((el) => {
    el.removeAttribute("aria-invalid");
    el.removeAttribute("aria-errormessage");
  });
}

function controlForField(field) {
  if (!field) return null;
  const name = field.split(".").pop();
  if (field.startsWith("model")) return $("model").value === "custom" ? $("hf-config") : $("model");
  if (field === "layout") return $("tp");
  return CONTROL_IDS[name] ? $(CONTROL_IDS[name]) : null;
}

// Options the server says cannot form a valid layout are marked with the reason; they are
// disabled while the current layout is valid, so one move never lands on an invalid one,
// and left selectable while it is not, so the user can always move out. The selected value
// keeps its plain label: when it is at fault, the error box beside the controls says why.
function renderChoices(choices, currentIsValid) {
  for (const control of LAYOUT_CONTROLS) {
    const select = $(CONTROL_IDS[control]);
    const current = select.value;
    const options = choices[control] || [];
    if (!options.some((c) => String(c.value) === current)) {
      options.push({ value: current, valid: currentIsValid });
    }
    options.sort((a, b) => (typeof a.value === "number" ? a.value - b.value : 0));
    select.replaceChildren(...options.map((choice) =>
      choiceOption(control, String(choice.value) === current ? { value: choice.value, valid: true } : choice, currentIsValid)));
    select.value = current;
  }
}

function optionLabel(control, value) {
  if (control === "placement") return String(value).split(",").join(" › ");
  return (OPTION_LABELS[control] || {})[value] || String(value);
}

function choiceOption(control, choice, disableInvalid) {
  const option = document.createElement("option");
  const label = optionLabel(control, choice.value);
  option.value = String(choice.value);
  option.textContent = choice.valid ? label : `${label} ✕ ${choice.reason || "not a valid layout"}`;
  option.disabled = !choice.valid && disableInvalid;
  if (!choice.valid) option.title = choice.reason || "";
  return option;
}

function setSelect(control, value) {
  const select = $(CONTROL_IDS[control]);
  const text = String(value);
  if (![...select.options].some((o) => o.value === text)) {
    select.append(new Option(optionLabel(control, text), text));
  }
  for (const option of select.options) if (option.value === text) option.disabled = false;
  select.value = text;
}

function applyLayout(layout) {
  for (const control of LAYOUT_CONTROLS) {
    if (layout[control] !== undefined) setSelect(control, layout[control]);
  }
}

function applyScenario(name) {
  const scenario = SCENARIOS[name];
  $("model").value = scenario.model;
  $("hf-config-box").hidden = true;
  $("gpu").value = scenario.gpu;
  $("gpus").value = scenario.gpus;
  $("global-batch").value = scenario.global_batch;
  $("seq-len").value = scenario.seq_len;
  $("profile").value = "workshop";
  applyLayout(scenario.layout);
  markScenario(name);
  forgetOptimum();
  scheduleRefresh();
}

function markScenario(name) {
  document.querySelectorAll("[data-scenario]").forEach((button) => {
    button.setAttribute("aria-pressed", String(button.dataset.scenario === name));
  });
}

// ---------- summary and warnings ----------

// Halves round up, as Python prints the unrounded figure (0.4255 -> 42.6%, not 42.5%).
const pct = (fraction, digits = 1) => `${(fraction * 100 + 1e-9).toFixed(digits)}%`;
const gb = (value, digits = 2) => `${value.toFixed(digits)} GB`;

function renderEstimate(estimate) {
  const memory = estimate.memory_gb;
  const layout = estimate.layout;
  $("total-memory").textContent = gb(memory.total, 1);
  $("memory-note").textContent = estimate.fits
    ? `of ${memory.capacity} GB · fits`
    : `exceeds ${memory.capacity} GB by ${gb(memory.total - memory.capacity, 1)}`;
  $("stat-memory").classList.toggle("bad", !estimate.fits);
  $("mfu").textContent = `${Math.round(estimate.mfu * 100)}%`;
  $("mfu-note").textContent = `${pct(estimate.mfu, 2)} unrounded`;
  $("bubble").textContent = pct(estimate.bubble);
  $("bubble-note").textContent = `${layout.micro_batches} micro-batches per step`;
  $("step-time").textContent = `${estimate.step_time_s.toFixed(2)} s`;
  $("throughput").textContent = `${Math.round(estimate.tokens_per_s_per_gpu).toLocaleString("en")} tokens/s per GPU`;
  $("dp").textContent = String(layout.dp);
  renderWarnings(estimate.warnings);
  drawMemoryChart(memory, estimate.fits);
  drawMfuChart(estimate.mfu_steps);
}

function renderWarnings(warnings) {
  const list = $("warnings");
  list.replaceChildren(...warnings.map((text) => Object.assign(document.createElement("li"), { textContent: text })));
  list.hidden = warnings.length === 0;
}

// ---------- SVG helpers ----------

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

// ---------- left chart: memory per GPU ----------

function drawMemoryChart(memory, fits) {
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

// ---------- right chart: the MFU waterfall ----------

function drawMfuChart(steps) {
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

// ---------- optimise, binding constraints, Pareto frontier ----------

function forgetOptimum() {
  state.frontier = null;
  state.visited = [];
  state.optimum = null;
  $("optimum-summary").textContent = "Press Optimise to search every valid layout of this job for the highest MFU that fits in memory.";
  $("binding").replaceChildren();
  $("optimum-layout").replaceChildren();
  $("binding-intro").textContent = "";
  $("optimise-status").textContent = "";
  renderPareto();
}

const describeLayout = (l) =>
  `tp ${l.tp} · pp ${l.pp} · cp ${l.cp} · dp ${l.dp} · vpp ${l.vpp} · micro-batch ${l.micro_batch} · ZeRO-${l.zero} · recompute ${l.recompute}`
  + (l.placement ? ` · placement ${l.placement.join(" › ")}` : "");

function loadLayout(layout) {
  applyLayout(layout);
  markScenario(null);
  scheduleRefresh();
}

async function optimise() {
  let job;
  try {
    job = readJob();
  } catch (error) {
    return showRequestError(error);
  }
  $("optimise").disabled = true;
  document.body.dataset.optimise = "running";
  try {
    await step("Searching…", "optimise", async () => {
      const answer = await postJson("/v1/optimize", job);
      renderOptimum(answer);
      if (answer.best) loadLayout(answer.best.layout);
    });
    await step("Drawing the frontier…", "frontier", () => loadFrontier(job));
  } catch {
    // step() has already said what went wrong beside the button
  } finally {
    $("optimise").disabled = false;
  }
}

// One stage of Optimise: a status line while it runs, and body[data-<name>] done or error.
async function step(status, name, work) {
  $("optimise-status").textContent = status;
  try {
    await work();
  } catch (error) {
    $("optimise-status").textContent = error.message;
    document.body.dataset[name] = "error";
    throw error;
  }
  $("optimise-status").textContent = "";
  document.body.dataset[name] = "done";
}

function renderOptimum(answer) {
  state.optimum = answer.best || null;
  const solver = answer.solver || {};
  const time = solver.wall_s !== undefined ? ` in ${Number(solver.wall_s).toFixed(2)} s` : "";
  const proof = solver.proved_optimal ? " (proved optimal)" : "";
  $("optimum-summary").textContent = answer.best
    ? `${pct(answer.best.mfu)} MFU at ${gb(answer.best.memory_gb.total, 1)} per GPU, found${time}${proof}:`
    : `No layout of this job fits${time}.`;
  $("binding-intro").textContent = answer.best
    ? (answer.binding.length ? "What holds it back, and what relaxing each rule would buy:" : "No rule holds it back.")
    : "These rules cannot all hold:";
  $("optimum-layout").replaceChildren(...(answer.best ? layoutChips(answer.best.layout) : []));
  const items = answer.best
    ? answer.binding.map((b) => bindingItem(b, answer.best.mfu))
    : (answer.conflict || []).map((c) => textItem(c.name, c.description));
  $("binding").replaceChildren(...items, ...(answer.warnings || []).map((w) => textItem("note", w)));
}

function layoutChips(layout) {
  const chips = [["tp", layout.tp], ["pp", layout.pp], ["cp", layout.cp], ["dp", layout.dp], ["vpp", layout.vpp],
    ["micro-batch", layout.micro_batch], ["ZeRO", layout.zero], ["recompute", layout.recompute]];
  if (layout.placement) chips.push(["placement", layout.placement.join(" › ")]);
  return chips.map(([name, value]) => {
    const chip = Object.assign(document.createElement("li"), { className: "chip" });
    chip.append(Object.assign(document.createElement("span"), { textContent: name }), ` ${value}`);
    return chip;
  });
}

function textItem(name, text) {
  const item = document.createElement("li");
  item.append(Object.assign(document.createElement("strong"), { textContent: name }), ` — ${text}`);
  return item;
}

// One binding rule: what it says, what relaxing it would buy, and a button to try that layout.
function bindingItem(binding, bestMfu) {
  const item = textItem(binding.name.replaceAll("_", " "), binding.description);
  const gain = document.createElement("span");
  gain.className = "gain";
  if (binding.relaxed_mfu === null || binding.relaxed_mfu === undefined) {
    gain.textContent = "relaxing it alone leaves no layout that fits";
    gain.classList.add("none");
  } else {
    const points = ((binding.relaxed_mfu - bestMfu) * 100).toFixed(1);
    gain.textContent = `relaxed: ${pct(binding.relaxed_mfu)} MFU (+${points} pts) `;
  }
  item.append(gain);
  if (binding.relaxed) {
    const button = Object.assign(document.createElement("button"), {
      type: "button", className: "link", textContent: "load that layout",
    });
    button.setAttribute("aria-label", `Load the layout with ${binding.name.replaceAll("_", " ")} relaxed: ${describeLayout(binding.relaxed.layout)}`);
    button.addEventListener("click", () => loadLayout(binding.relaxed.layout));
    gain.append(button);
  }
  return item;
}

async function loadFrontier(job) {
  const answer = await postJson("/v1/pareto", job);
  state.frontier = answer.frontier || [];
  renderPareto();
}

function renderPareto() {
  const chart = $("pareto-chart");
  clearChart(chart);
  const points = state.frontier;
  if (!points || points.length === 0) {
    chart.append(svg("text", { x: 260, y: 140, "text-anchor": "middle", class: "placeholder" },
      points ? "No layout of this job fits." : "Press Optimise to draw the frontier."));
    return;
  }
  const everything = points.concat(state.visited);
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
  for (const tried of state.visited) {
    chart.append(svg("circle", { cx: x(tried.memory_gb.total), cy: y(tried.mfu), r: 4, class: "tried", "aria-hidden": "true" }));
  }
  const sorted = [...points].sort((a, b) => a.memory_gb.total - b.memory_gb.total);
  chart.append(svg("polyline", { points: stepLine(sorted, x, y), class: "frontier" }));
  sorted.forEach((point) => chart.append(paretoPoint(point, x, y)));
  const current = state.estimate;
  if (current) {
    chart.append(svg("circle", { cx: x(current.memory_gb.total), cy: y(current.mfu), r: 9, class: "current" }));
  }
  $("pareto-chart-desc").textContent = `${points.length} layouts on the frontier, from `
    + `${gb(sorted[0].memory_gb.total, 1)} at ${pct(sorted[0].mfu)} MFU to `
    + `${gb(sorted[sorted.length - 1].memory_gb.total, 1)} at ${pct(sorted[sorted.length - 1].mfu)}; `
    + `grey dots are the ${state.visited.length} layouts tried here, the ring the current one.`;
}

// Layouts evaluated since the job last changed: grey dots against the frontier.
function remember(estimate) {
  if (state.visited.some((e) => sameLayout(e.layout, estimate.layout))) return;
  state.visited.push(estimate);
  if (state.visited.length > MAX_TRIED) state.visited.shift();
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

function paretoPoint(point, x, y) {
  const label = `${describeLayout(point.layout)}: ${gb(point.memory_gb.total, 1)}, ${pct(point.mfu)} MFU. Load this layout.`;
  const group = svg("g", { class: "point", tabindex: "0", role: "button", "aria-label": label });
  group.append(svg("title", {}, label));
  const optimum = state.optimum && sameLayout(state.optimum.layout, point.layout);
  group.append(svg("circle", { cx: x(point.memory_gb.total), cy: y(point.mfu), r: optimum ? 7 : 5.5, class: optimum ? "optimum" : "" }));
  const load = () => loadLayout(point.layout);
  group.addEventListener("click", load);
  group.addEventListener("keydown", (event) => {
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      load();
    }
  });
  return group;
}

const sameLayout = (a, b) => LAYOUT_CONTROLS.every((c) => String(a[c]) === String(b[c]));

// ---------- presets and wiring ----------

// The select lists ship with the catalogue's names; /v1/presets, where served, adds any others.
async function loadPresets() {
  let answer;
  try {
    const response = await fetch("/v1/presets");
    if (!response.ok) return;
    answer = await response.json();
  } catch {
    return;
  }
  addPresetOptions($("model"), presetNames(answer.models), true);
  addPresetOptions($("gpu"), presetNames(answer.gpus), false);
}

function presetNames(section) {
  if (!section) return [];
  if (Array.isArray(section)) return section.map((item) => (typeof item === "string" ? item : item.name));
  return Object.keys(section).filter((name) => !name.startsWith("_"));
}

function addPresetOptions(select, names, beforeLast) {
  const known = new Set([...select.options].map((o) => o.value));
  for (const name of names) {
    if (!name || known.has(name)) continue;
    const option = new Option(name, name);
    select.insertBefore(option, beforeLast ? select.lastElementChild : null);
  }
}

function onJobChanged() {
  markScenario(null);
  forgetOptimum();
  scheduleRefresh();
}

function wire() {
  document.querySelectorAll("[data-scenario]").forEach((button) => {
    button.addEventListener("click", () => applyScenario(button.dataset.scenario));
  });
  $("model").addEventListener("change", () => {
    $("hf-config-box").hidden = $("model").value !== "custom";
    onJobChanged();
  });
  for (const id of ["hf-config", "gpus", "global-batch", "seq-len"]) $(id).addEventListener("input", onJobChanged);
  $("gpu").addEventListener("change", onJobChanged);
  $("profile").addEventListener("change", onJobChanged);
  for (const control of LAYOUT_CONTROLS) {
    $(CONTROL_IDS[control]).addEventListener("change", () => {
      markScenario(null);
      scheduleRefresh();
    });
  }
  $("controls").addEventListener("submit", (event) => event.preventDefault());
  $("optimise").addEventListener("click", optimise);
}

document.addEventListener("DOMContentLoaded", () => {
  wire();
  loadPresets();
  applyScenario("default");
});
