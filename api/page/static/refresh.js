// Evaluate on every change: the controls -> POST /v1/evaluate (and /page/choices for the
// selects) -> the estimate drawn.
import { applyLayout, renderChoices } from "./controls.js";
import { clearRequestError, showRequestError } from "./errors.js";
import { renderEstimate } from "./estimate.js";
import { drawFrontier, showCurrent } from "./frontier.js";
import { postJson, readJob, readLayout } from "./requests.js";
import { PLATE, markScenario } from "./scenarios.js";

const DEBOUNCE_MS = 180;
const BUSY_RETRY_MS = 1500;
const state = { generation: 0, timer: null };

export function scheduleRefresh() {
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
  showCurrent(estimate.value);
  renderEstimate(estimate.value);
  drawFrontier(loadLayout);
  document.body.dataset.state = "ready";
}

// A layout from an answer, evaluated; knobs it does not name are at their defaults.
export function loadLayout(layout) {
  applyLayout({ schedule: PLATE.layout.schedule, ep: PLATE.layout.ep, ...layout });
  markScenario(null);
  scheduleRefresh();
}
