// Charts drawn by hand as SVG, each with a text alternative (<desc>) and a table of its numbers.
// Pure drawing: every figure comes from the server's estimates passed in.
//
// Layout: every label is measured by the browser (getBBox) before anything is placed, and the
// margins, columns and label positions are worked out from those measures, so that no two
// labels overlap and none leaves its chart. A chart is laid out in CSS pixels at the width it
// is shown (its viewBox is that width), so its text keeps the page's size at any window width
// and it is drawn again when its width changes; only where its labels need more room than it
// has is it laid out wider and scaled down to fit.
//
// This module is the charts' front door; each chart is drawn in its own module.
export { drawMemoryChart } from "./memory-chart.js";
export { drawMfuChart } from "./mfu-chart.js";
export { drawPareto } from "./pareto-chart.js";
export { describeLayout, gb, pct } from "./format.js";
