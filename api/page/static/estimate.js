// An estimate shown: the summary figures, its warnings, and its memory and MFU charts.
import { drawMemoryChart, drawMfuChart } from "./charts.js";
import { $ } from "./dom.js";
import { gb, pct } from "./format.js";

export function renderEstimate(estimate) {
  const memory = estimate.memory_gb;
  const layout = estimate.layout;
  $("total-memory").textContent = gb(memory.total, 1);
  $("memory-note").textContent = memoryNote(estimate);
  $("stat-memory").classList.toggle("bad", !estimate.fits);
  $("mfu").textContent = `${Math.round(estimate.mfu * 100)}%`;
  $("mfu-note").textContent = `${pct(estimate.mfu, 2)} unrounded`;
  $("bubble").textContent = pct(estimate.bubble);
  $("bubble-note").textContent = `${layout.micro_batches} micro-batches per step`;
  $("step-time").textContent = `${estimate.step_time_s.toFixed(2)} s`;
  $("throughput").textContent = `${Math.round(estimate.tokens_per_s_per_gpu).toLocaleString("en")} tokens/s per GPU`;
  $("dp").textContent = String(layout.dp);
  renderBand(estimate.interval);
  renderWarnings(estimate.warnings);
  drawMemoryChart(memory, estimate.fits);
  drawMfuChart(estimate.mfu_steps);
}

// The fit verdict: the estimate's, and where it fits only at the estimate, how far like runs
// went (the searches by default ask that the memory interval's upper end fit too).
function memoryNote(estimate) {
  const memory = estimate.memory_gb;
  if (!estimate.fits) return `exceeds ${memory.capacity} GB by ${gb(memory.total - memory.capacity, 1)}`;
  if (estimate.fits_interval !== false) return `of ${memory.capacity} GB · fits`;
  return `of ${memory.capacity} GB · fits at the estimate; like runs up to ${gb(estimate.interval.memory_gb[1], 1)}`;
}

// Where the measured figures are expected (profile standard): the validation residuals of
// runs like this one. The workshop profile reproduces a plate and has none.
function renderBand(interval) {
  const band = $("band");
  band.hidden = !interval;
  band.textContent = "";
  band.title = "";
  if (!interval) return;
  const [low, high] = interval.step_time_s;
  const [mfuLow, mfuHigh] = interval.mfu;
  band.textContent = `${Math.round(interval.coverage * 100)}% band: ${low.toFixed(2)}–${high.toFixed(2)} s, MFU ${pct(mfuLow)}–${pct(mfuHigh)}`;
  band.title = `from ${interval.basis}`;
}

function renderWarnings(warnings) {
  const list = $("warnings");
  list.replaceChildren(...warnings.map((text) => Object.assign(document.createElement("li"), { textContent: text })));
  list.hidden = warnings.length === 0;
}
