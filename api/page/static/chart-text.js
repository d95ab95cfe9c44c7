// Text in a chart: measured as the browser lays it out, wrapped or cut to a width, and labels
// spread so that none overlaps another.
import { svg } from "./chart-svg.js";

const MAX_LINES = 3; // a name wrapped across its column takes at most this many lines

// The box a text of a class takes, as the browser lays it out: its width, and how far it
// reaches above (ascent) and below (descent) its baseline. Estimated from the font size only
// when the chart is not rendered (nothing is then seen, so nothing can collide).
export function measurer(chart) {
  const known = new Map();
  return (cls, content) => {
    const key = `${cls}\n${content}`;
    if (!known.has(key)) {
      const probe = svg("text", { x: 0, y: 0, class: cls, visibility: "hidden" }, content);
      chart.append(probe);
      const box = probe.getBBox();
      const size = parseFloat(getComputedStyle(probe).fontSize) || 12;
      probe.remove();
      known.set(key, box.height > 0
        ? { width: box.width, ascent: -box.y, descent: box.y + box.height, height: box.height }
        : { width: 0.6 * size * content.length, ascent: 0.9 * size, descent: 0.25 * size, height: 1.15 * size });
    }
    return known.get(key);
  };
}

// The baseline that centres a measured text on y.
export const centredOn = (y, m) => y + (m.ascent - m.descent) / 2;

export const widest = (measures) => Math.max(0, ...measures.map((m) => m.width));

export const apart = (a, b) => a.right <= b.left || b.right <= a.left || a.bottom <= b.top || b.bottom <= a.top;

// Where items of one size go, each as near as it can be to the position it wants (its
// middle), none overlapping another and all within [lo, hi]: items that would collide move as
// one block, centred on the mean of what they want.
export function spread(wants, size, lo, hi) {
  const blocks = [];
  for (const item of wants.map((want, i) => ({ want, i })).sort((a, b) => a.want - b.want)) {
    blocks.push({ items: [item], top: 0 });
    for (;;) {
      const block = blocks[blocks.length - 1];
      const n = block.items.length;
      const ideal = block.items.reduce((sum, it, k) => sum + it.want - size * (k + 0.5), 0) / n;
      block.top = Math.max(lo, Math.min(ideal, hi - n * size));
      const previous = blocks[blocks.length - 2];
      if (!previous || previous.top + previous.items.length * size <= block.top + 1e-9) break;
      previous.items.push(...block.items);
      blocks.pop();
    }
  }
  const middles = [];
  for (const block of blocks) block.items.forEach((it, k) => { middles[it.i] = block.top + size * (k + 0.5); });
  return middles;
}

// An axis label in lines no wider than `room`, or null when a word alone is wider or it takes
// more than MAX_LINES lines.
export function wrap(text, room, measure) {
  const lines = [];
  for (const word of text.split(" ")) {
    const longer = lines.length ? `${lines[lines.length - 1]} ${word}` : word;
    if (lines.length && measure("axis-label", longer).width <= room) lines[lines.length - 1] = longer;
    else if (measure("axis-label", word).width <= room) lines.push(word);
    else return null;
  }
  return lines.length <= MAX_LINES ? lines : null;
}

// An axis label cut, with an ellipsis, to fit `room`.
export function cut(text, room, measure) {
  if (measure("axis-label", text).width <= room) return text;
  let [fits, fails] = [0, text.length];
  while (fails - fits > 1) {
    const mid = Math.floor((fits + fails) / 2);
    if (measure("axis-label", `${text.slice(0, mid).trimEnd()}…`).width <= room) fits = mid;
    else fails = mid;
  }
  return `${text.slice(0, fits).trimEnd()}…`;
}
