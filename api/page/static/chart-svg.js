// The SVG a chart is drawn in: its elements, its spacing, its size, and drawing it again when
// the width it is shown at changes.

const SVG_NS = "http://www.w3.org/2000/svg";

export const PAD = 4; // between any label and the chart's edge
export const GAP = 6; // between a label and the mark it names
export const TICK_GAP = 6; // between a tick label and its axis

export function svg(tag, attrs = {}, text) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs)) el.setAttribute(name, value);
  if (text !== undefined) el.textContent = text;
  return el;
}

export function clearChart(chart) {
  for (const child of [...chart.children]) {
    if (child.tagName !== "title" && child.tagName !== "desc") child.remove();
  }
}

// Redraw a chart when the width it is shown at changes (the window, or the page's columns).
const drawn = new Map();
const resizes = typeof ResizeObserver === "function"
  ? new ResizeObserver((entries) => {
    for (const { target, contentRect } of entries) {
      const last = drawn.get(target);
      if (last && Math.abs(contentRect.width - last.width) >= 0.5) {
        last.width = contentRect.width;
        requestAnimationFrame(() => drawn.get(target).draw());
      }
    }
  })
  : null;

// The width to lay the chart out at, and how to draw it again at another.
export function shownWidth(chart, draw) {
  if (!drawn.has(chart) && resizes) resizes.observe(chart);
  const width = chart.getBoundingClientRect().width || chart.viewBox.baseVal.width;
  drawn.set(chart, { width, draw });
  return width;
}

export const frame = (chart, width, height) => chart.setAttribute("viewBox", `0 0 ${width} ${height}`);
