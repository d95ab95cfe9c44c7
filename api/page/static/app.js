// The workshop page: controls -> POST /v1/evaluate -> two hand-drawn SVG charts.
// No library, no build step (ES modules): the page works offline. Every figure comes from
// the server; this entry module wires the controls to the modules that ask and draw:
// requests.js (the HTTP calls), controls.js and scenarios.js (the controls), refresh.js and
// estimate.js (evaluate on every change), optimise.js and frontier.js (the optimum and frontier),
// export.js (the layout in an engine's own input).
import { CONTROL_IDS, LAYOUT_CONTROLS, addPresets } from "./controls.js";
import { $ } from "./dom.js";
import { initExport } from "./export.js";
import { forgetOptimum, optimise } from "./optimise.js";
import { scheduleRefresh } from "./refresh.js";
import { fetchPresets, readJob, readLayout } from "./requests.js";
import { fillScenario, markScenario } from "./scenarios.js";

function applyScenario(name) {
  fillScenario(name);
  forgetOptimum();
  scheduleRefresh();
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
  $("precision").addEventListener("change", onJobChanged);
  $("export-engine").addEventListener("change", onJobChanged);
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
  fetchPresets().then(addPresets);
  applyScenario("default");
});
