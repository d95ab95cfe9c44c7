// The controls: which element holds which field, the layout selects and the choices the
// server marks on them, and the model and GPU lists.
import { $ } from "./dom.js";

export const LAYOUT_CONTROLS = ["tp", "pp", "cp", "vpp", "micro_batch", "zero", "recompute", "schedule", "ep", "placement"];
export const CONTROL_IDS = {
  tp: "tp", pp: "pp", cp: "cp", vpp: "vpp", micro_batch: "micro-batch", zero: "zero",
  recompute: "recompute", schedule: "schedule", ep: "ep", placement: "placement", gpus: "gpus", gpu: "gpu", global_batch: "global-batch",
  seq_len: "seq-len", model: "model", profile: "profile", precision: "precision",
};
const OPTION_LABELS = {
  zero: { 0: "0 · none", 1: "1 · optimiser", 2: "2 · + grads", 3: "3 · + weights" },
};

export const sameLayout = (a, b) => LAYOUT_CONTROLS.every((c) => String(a[c]) === String(b[c]));

// The control a request's field names, to mark invalid.
export function controlForField(field) {
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
export function renderChoices(choices, currentIsValid) {
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

export function applyLayout(layout) {
  for (const control of LAYOUT_CONTROLS) {
    if (layout[control] !== undefined) setSelect(control, layout[control]);
  }
}

// The select lists ship with the catalogue's names; /v1/presets, where served, adds any others.
export function addPresets(answer) {
  if (!answer) return;
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
