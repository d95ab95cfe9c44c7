// What the memory-against-MFU chart shows: the frontier and the optimum found, the layouts
// tried here, and the current one.
import { drawPareto } from "./charts.js";
import { sameLayout } from "./controls.js";

const MAX_TRIED = 60;
const shown = { frontier: null, optimum: null, visited: [], current: null };

// The estimate now on the page, remembered among the layouts tried.
export function showCurrent(estimate) {
  shown.current = estimate;
  if (shown.visited.some((e) => sameLayout(e.layout, estimate.layout))) return;
  shown.visited.push(estimate);
  if (shown.visited.length > MAX_TRIED) shown.visited.shift();
}

export function setOptimum(best) {
  shown.optimum = best;
}

export function setFrontier(frontier) {
  shown.frontier = frontier;
}

// Forget what was found and tried for a job no longer on the page.
export function forgetFrontier() {
  shown.frontier = null;
  shown.visited = [];
  shown.optimum = null;
}

// Draw the chart; `onPick(layout)` loads a point's layout.
export function drawFrontier(onPick) {
  drawPareto({
    frontier: shown.frontier,
    visited: shown.visited,
    current: shown.current,
    isOptimum: (layout) => Boolean(shown.optimum) && sameLayout(shown.optimum.layout, layout),
    onPick,
  });
}
