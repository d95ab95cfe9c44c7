// The plate's scenarios: the plate's job and layout, and each scenario's one change from it.
import { applyLayout } from "./controls.js";
import { $ } from "./dom.js";

export const PLATE = {
  model: "llama3-405b", gpu: "h100-sxm", gpus: 16384, global_batch: 2048, seq_len: 8192,
  layout: {
    tp: 8, pp: 16, cp: 1, vpp: 4, micro_batch: 1, zero: 2, recompute: "none", schedule: "1f1b", ep: 1,
    placement: ["tp", "cp", "pp", "dp"],
  },
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

// Set every control to a scenario's job and layout, and mark its button pressed.
export function fillScenario(name) {
  const scenario = SCENARIOS[name];
  $("model").value = scenario.model;
  $("hf-config-box").hidden = true;
  $("gpu").value = scenario.gpu;
  $("gpus").value = scenario.gpus;
  $("global-batch").value = scenario.global_batch;
  $("seq-len").value = scenario.seq_len;
  $("profile").value = "workshop";
  $("precision").value = "bf16"; // the plate's, and the only one its formulas price
  applyLayout(scenario.layout);
  markScenario(name);
}

// Press the named scenario's button (none, for null) and release the others.
export function markScenario(name) {
  document.querySelectorAll("[data-scenario]").forEach((button) => {
    button.setAttribute("aria-pressed", String(button.dataset.scenario === name));
  });
}
