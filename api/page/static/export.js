// The export panel: the current layout in a training engine's own input (Megatron-LM flags,
// torchtitan overrides, a DeepSpeed config, NeMo overrides), from POST /v1/export, with a copy
// button and a download link; or the engine's refusal, naming the rules the layout breaks.
// The server writes every artefact and checks every rule: this file only asks and shows.
import { $ } from "./dom.js";

const MEDIA_TYPES = { "deepspeed-json": "application/json", "layout-json": "application/json" };

let readRequest = () => ({});
let generation = 0; // answers to an older click (or for an older layout) are dropped
let downloadUrl = null;

const engineLabel = () => $("export-engine").selectedOptions[0].textContent.trim();

// `read()` returns the current request body (job and layout), or throws an Error whose
// message says what is wrong with the controls.
export function initExport(read) {
  readRequest = read;
  $("export-engine").addEventListener("change", () => {
    labelButton();
    clearExport();
  });
  $("export-button").addEventListener("click", exportLayout);
  $("export-copy").addEventListener("click", copyText);
  // Every change of the job or the layout marks the page pending (body[data-state]): an
  // artefact shown for the previous layout would mislead, so it goes.
  new MutationObserver(() => {
    if (document.body.dataset.state === "pending") clearExport();
  }).observe(document.body, { attributes: true, attributeFilter: ["data-state"] });
  labelButton();
}

function labelButton() {
  $("export-button").textContent = `Export for ${engineLabel()}`;
}

export function clearExport() {
  generation += 1;
  $("export-error").hidden = true;
  $("export-result").hidden = true;
  $("export-text").textContent = "";
  $("export-status").textContent = "";
  $("export-copied").textContent = "";
  setDownload(null);
  delete document.body.dataset.export;
}

async function exportLayout() {
  clearExport();
  const ticket = generation;
  let body;
  try {
    body = { ...readRequest(), engine: $("export-engine").value };
  } catch (error) {
    return showRefusal(error.message);
  }
  document.body.dataset.export = "loading";
  $("export-status").textContent = `Writing the input for ${engineLabel()}…`;
  let response;
  let data = null;
  try {
    response = await fetch("/v1/export", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    data = await response.json().catch(() => null);
  } catch (error) {
    if (ticket === generation) showRefusal(`The server did not answer (${error.message}).`);
    return;
  }
  if (ticket !== generation) return;
  if (response.ok && data) return showArtefact(data);
  const detail = data && data.error;
  showRefusal(detail ? detail.message : `/v1/export answered HTTP ${response.status}.`);
}

function showArtefact(artefact) {
  $("export-status").textContent = `${artefact.filename} (${artefact.format}) for ${engineLabel()}:`;
  $("export-text").textContent = artefact.text;
  $("export-result").hidden = false;
  setDownload(artefact);
  document.body.dataset.export = "ready";
}

function showRefusal(message) {
  $("export-status").textContent = "";
  $("export-error").textContent = message;
  $("export-error").hidden = false;
  document.body.dataset.export = "refused";
}

// The download link holds the artefact as a file of its own name; the previous one is freed.
function setDownload(artefact) {
  if (downloadUrl) URL.revokeObjectURL(downloadUrl);
  downloadUrl = null;
  const link = $("export-download");
  if (!artefact) return link.removeAttribute("href");
  const type = MEDIA_TYPES[artefact.format] || "text/plain";
  downloadUrl = URL.createObjectURL(new Blob([artefact.text], { type }));
  link.href = downloadUrl;
  link.download = artefact.filename;
  link.textContent = `Download ${artefact.filename}`;
}

async function copyText() {
  const text = $("export-text").textContent;
  try {
    await navigator.clipboard.writeText(text);
    $("export-copied").textContent = "Copied.";
  } catch {
    // No clipboard access (an insecure origin, a denied permission): select it for the user.
    const range = document.createRange();
    range.selectNodeContents($("export-text"));
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    $("export-copied").textContent = "Selected: press Ctrl+C (⌘C) to copy.";
  }
}
