// The HTTP calls, and the requests built from the controls: the job, and the layout.
import { CONTROL_IDS, LAYOUT_CONTROLS } from "./controls.js";
import { $ } from "./dom.js";

export class RequestError extends Error {
  constructor(message, field, status) {
    super(message);
    this.field = field;
    this.status = status;
  }
}

export async function postJson(path, body, signal) {
  let response;
  try {
    response = await fetch(path, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
      signal,
    });
  } catch (error) {
    if (error.name === "AbortError") throw new RequestError("Search stopped.", null, 0);
    throw new RequestError(`The server did not answer (${error.message}).`, null, 0);
  }
  const data = await response.json().catch(() => null);
  if (response.ok) return data;
  const detail = data && data.error;
  if (detail) throw new RequestError(detail.message, detail.field, response.status);
  if (response.status === 404) throw new RequestError(`${path} is not available on this server yet.`, null, 404);
  throw new RequestError(`${path} answered HTTP ${response.status}.`, null, response.status);
}

// The catalogue's names from /v1/presets, or null where it is not served or does not answer.
export async function fetchPresets() {
  try {
    const response = await fetch("/v1/presets");
    if (!response.ok) return null;
    return await response.json();
  } catch {
    return null;
  }
}

function readModel() {
  const choice = $("model").value;
  if (choice !== "custom") return choice;
  const text = $("hf-config").value.trim();
  if (!text) throw new RequestError("Paste a Hugging Face config.json, or choose a preset model.", "model");
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new RequestError(`config.json is not valid JSON: ${error.message}`, "model");
  }
}

function readInteger(id, name) {
  const raw = $(id).value.trim();
  if (!/^\d+$/.test(raw)) throw new RequestError(`${name} must be a whole number, got "${raw}".`, name);
  return Number(raw);
}

// The job without a layout: what /v1/optimize and /v1/pareto take.
export function readJob() {
  return {
    model: readModel(),
    cluster: { gpus: readInteger("gpus", "cluster.gpus"), gpu: $("gpu").value },
    training: {
      global_batch: readInteger("global-batch", "training.global_batch"),
      seq_len: readInteger("seq-len", "training.seq_len"),
      precision: $("precision").value,
    },
    profile: $("profile").value,
    // the engine chosen in the export panel: its rules bound Optimise, it prices the layout,
    // and it writes the export, so the layout found is one the engine runs
    engine: $("export-engine").value,
  };
}

export function readLayout() {
  const layout = {};
  for (const control of LAYOUT_CONTROLS) {
    const value = $(CONTROL_IDS[control]).value;
    if (control === "placement") layout[control] = value.split(",");
    else layout[control] = ["recompute", "schedule"].includes(control) ? value : Number(value);
  }
  return layout;
}
