// Optimise: POST /v1/optimize for the best layout and what holds it back, then /v1/pareto for
// the frontier; or stop the search under way.
import { $ } from "./dom.js";
import { showRequestError } from "./errors.js";
import { drawFrontier, forgetFrontier, setFrontier, setOptimum } from "./frontier.js";
import { clearOptimum, renderOptimum } from "./optimum.js";
import { loadLayout } from "./refresh.js";
import { postJson, readJob } from "./requests.js";

let running = null; // the AbortController of the search under way

export function forgetOptimum() {
  if (running) running.abort(); // its answer would be for another job
  forgetFrontier();
  clearOptimum();
  $("optimise-status").textContent = "";
  drawFrontier(loadLayout);
}

// Optimise, or stop the search under way: a large mixture-of-experts search can take a while.
export async function optimise() {
  if (running) return running.abort();
  let job;
  try {
    job = readJob();
  } catch (error) {
    return showRequestError(error);
  }
  const search = (running = new AbortController());
  const button = $("optimise");
  button.textContent = "Stop";
  document.body.dataset.optimise = "running";
  try {
    await step("Searching", "optimise", async () => {
      const answer = await postJson("/v1/optimize", job, search.signal);
      setOptimum(answer.best || null);
      renderOptimum(answer, loadLayout);
      if (answer.best) loadLayout(answer.best.layout);
    });
    await step("Drawing the frontier", "frontier", () => loadFrontier(job, search.signal));
  } catch {
    // step() has already said what went wrong beside the button
  } finally {
    running = null;
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
  setFrontier(answer.frontier || []);
  drawFrontier(loadLayout);
}
