// The workshop page: controls -> POST /v1/evaluate -> two hand-drawn SVG charts.
// No library, no build step (ES modules): the page works offline. Every figure comes from
// the server; this file reads the controls, asks, and hands the answers to the drawing.
import { drawMemoryChart, drawMfuChart, drawPareto, gb, pct } from "./charts.js";
import { clearOptimum, renderOptimum } from "./optimum.js";
import { initExport } from "./export.js";

const DEBOUNCE_MS = 180;
const BUSY_RETRY_MS = 1500;
const LAYOUT_CONTROLS = ["tp", "pp", "cp", "vpp", "micro_batch", "zero", "recompute", "schedule", "ep", "placement"];
const CONTROL_IDS = {
  tp: "tp", pp: "pp", cp: "cp", vpp: "vpp", micro_batch: "micro-batch", zero: "zero",
  recompute: "recompute", schedule: "schedule", ep: "ep", placement: "placement", gpus: "gpus", gpu: "gpu", global_batch: "global-batch",
  seq_len: "seq-len", model: "model", profile: "profile",
};
const OPTION_LABELS = {
  zero: { 0: "0 · none", 1: "1 · optimiser", 2: "2 · + grads", 3: "3 · + weights" },
};
const PLATE = {
  model: "llama3-405b", gpu: "h100-sxm", gpus: 16384, global_batch: 2048, seq_len: 8192,
  layout: {
    tp: 8, pp: 16, cp: 1, vpp: 4, micro_batch: 1, zero: 2, recompute: "none", schedule: "1f1b", ep: 1,
    placement: ["tp", "cp", "pp", "dp"],
  },
};
// The plate's scenarios: each changes one thing from its default.
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
const state = {
  generation: 0, timer: null, estimate: null, frontier: null, optimum: null, visited: [], search: null,
};
const $ = (id) => document.getElementById(id);

// ---------- requests ----------

class RequestError extends Error {
  constructor(message, field, status) {
    super(message);
    this.field = field;
    this.status = status;
  }
}

async function postJson(path, body, signal) {
  let response;
  try {
    response = await fetch(path, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
      signal,
    });
  } catch (error) {
    if (error.name === "AbortError") throw new RequestError("Search stopped.", null, 0);
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
    engine: "generic", // the plate's engine-agnostic model; the export panel names an engine
  };
}

function readLayout() {
  const layout = {};
  for (const control of LAYOUT_CONTROLS) {
    const value = $(CONTROL_IDS[control]).value;
    if (control === "placement") layout[control] = value.split(",");
    else layout[control] = ["recompute", "schedule"].includes(control) ? value : Number(value);
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
  $("results-error").textContent = `The figures below are stale: ${error.message}`;
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

// ---------- optimise, binding constraints, Pareto frontier ----------

function forgetOptimum() {
  if (state.search) state.search.abort(); // its answer would be for another job
  state.frontier = null;
  state.visited = [];
  state.optimum = null;
  clearOptimum();
  $("optimise-status").textContent = "";
  renderPareto();
}

// A layout from an answer; knobs it does not name are at their defaults.
function loadLayout(layout) {
  applyLayout({ schedule: PLATE.layout.schedule, ep: PLATE.layout.ep, ...layout });
  markScenario(null);
  scheduleRefresh();
}

// Optimise, or stop the search under way: a large mixture-of-experts search can take a while.
async function optimise() {
  if (state.search) return state.search.abort();
  let job;
  try {
    job = readJob();
  } catch (error) {
    return showRequestError(error);
  }
  const search = (state.search = new AbortController());
  const button = $("optimise");
  button.textContent = "Stop";
  document.body.dataset.optimise = "running";
  try {
    await step("Searching", "optimise", async () => {
      const answer = await postJson("/v1/optimize", job, search.signal);
      state.optimum = answer.best || null;
      renderOptimum(answer, loadLayout);
      if (answer.best) loadLayout(answer.best.layout);
    });
    await step("Drawing the frontier", "frontier", () => loadFrontier(job, search.signal));
  } catch {
    // step() has already said what went wrong beside the button
  } finally {
    state.search = null;
    button.textContent = "Optimise";
  }
}

// One stage of Optimise: a status line with the seconds so far, then body[data-<name>] set
// to done or error.
async function step(status, name, work) {
  const started = Date.now();
  const say = () => {
    $("optimise-status").textContent = `${status}… ${Math.round((Date.now() - started) / 1000)} s`;
  };
  say();
  const ticker = setInterval(say, 1000);
  try {
    await work();
  } catch (error) {
    $("optimise-status").textContent = error.message;
    document.body.dataset[name] = "error";
    throw error;
  } finally {
    clearInterval(ticker);
  }
  $("optimise-status").textContent = "";
  document.body.dataset[name] = "done";
}

async function loadFrontier(job, signal) {
  const answer = await postJson("/v1/pareto", job, signal);
  state.frontier = answer.frontier || [];
  renderPareto();
}

function remember(estimate) {
  if (state.visited.some((e) => sameLayout(e.layout, estimate.layout))) return;
  state.visited.push(estimate);
  if (state.visited.length > MAX_TRIED) state.visited.shift();
}

const sameLayout = (a, b) => LAYOUT_CONTROLS.every((c) => String(a[c]) === String(b[c]));

function renderPareto() {
  drawPareto({
    frontier: state.frontier,
    visited: state.visited,
    current: state.estimate,
    isOptimum: (layout) => Boolean(state.optimum) && sameLayout(state.optimum.layout, layout),
    onPick: loadLayout,
  });
}

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
  initExport(() => ({ ...readJob(), layout: readLayout() }));
}

document.addEventListener("DOMContentLoaded", () => {
  wire();
  loadPresets();
  applyScenario("default");
});
