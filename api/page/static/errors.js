// A request that failed: its message beside the controls and above the stale figures, and
// the control at fault marked invalid.
import { controlForField } from "./controls.js";
import { $ } from "./dom.js";

export function showRequestError(error) {
  const box = $("request-error");
  box.textContent = error.message;
  box.hidden = false;
  // The same message above the (dimmed) figures, for whoever is looking there; the alert
  // beside the controls is the one announced.
  $("results-error").textContent = `The figures below are stale: ${error.message}`;
  $("results-error").hidden = false;
  unmarkInvalid();
  const control = controlForField(error.field);
  if (control) {
    control.setAttribute("aria-invalid", "true");
    control.setAttribute("aria-errormessage", box.id);
  }
  $("results").classList.add("stale");
  $("dp").textContent = "–";
  document.body.dataset.state = "error";
}

export function clearRequestError() {
  $("request-error").hidden = true;
  $("results-error").hidden = true;
  $("results").classList.remove("stale");
  unmarkInvalid();
}

function unmarkInvalid() {
  document.querySelectorAll("[aria-invalid]").forEach((el) => {
    el.removeAttribute("aria-invalid");
    el.removeAttribute("aria-errormessage");
  });
}
