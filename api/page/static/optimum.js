// The optimum panel: the best layout as chips, and each binding rule with what relaxing it buys.
import { $ } from "./dom.js";
import { describeLayout, gb, pct } from "./format.js";

const INVITATION = "Press Optimise to search every valid layout of this job for the highest MFU that fits in memory.";

export function clearOptimum() {
  $("optimum-summary").textContent = INVITATION;
  $("optimum-layout").replaceChildren();
  $("binding-intro").textContent = "";
  $("binding").replaceChildren();
}

export function renderOptimum(answer, onLoad) {
  const solver = answer.solver || {};
  const time = solver.wall_s !== undefined ? ` in ${Number(solver.wall_s).toFixed(2)} s` : "";
  const proof = solver.proved_optimal ? " (proved optimal)" : "";
  // Claim only what was shown: no layout without a proof rules nothing out, and an empty
  // binding list means "nothing holds it back" only when every explanation was worked out.
  $("optimum-summary").textContent = answer.best
    ? `${pct(answer.best.mfu)} MFU at ${gb(answer.best.memory_gb.total, 1)} per GPU, found${time}${proof}:`
    : solver.proved_optimal
      ? `No layout of this job fits${time}.`
      : `No layout found within the time limit${time}, and none ruled out.`;
  $("binding-intro").textContent = answer.best
    ? (answer.binding.length
      ? "What holds it back, and what relaxing each rule would buy:"
      : noBindingText(answer))
    : solver.proved_optimal ? "These rules cannot all hold:" : "";
  $("optimum-layout").replaceChildren(...(answer.best ? layoutChips(answer.best.layout) : []));
  const items = answer.best
    ? answer.binding.map((b) => bindingItem(b, answer.best.mfu, onLoad))
    : (answer.conflict || []).map((c) => textItem(c.name, c.description));
  $("binding").replaceChildren(...items, ...(answer.warnings || []).map((w) => textItem("note", w)));
  const choices = answer.best ? answer.choices || [] : [];
  $("choices-intro").hidden = choices.length === 0;
  $("choices").replaceChildren(...choices.map((choice) => choiceItem(choice, onLoad)));
}

// Why the binding list is empty, as far as it was shown: nothing binds only when every
// explanation was worked out; the size guard (explanations_skipped) is not the time limit.
function noBindingText(answer) {
  if (answer.explanations_complete) return "No rule holds it back.";
  if (answer.explained === false) return "What holds it back was not asked for (explain: false).";
  return (answer.explanations_skipped || []).length > 0
    ? "No rule found among those worked out: some spaces are too large to search (the notes below)."
    : "No binding rule found before the time limit.";
}

// One of the optimum's less common choices, what it buys, and a button to load the layout without it.
function choiceItem(choice, onLoad) {
  const item = textItem(choice.name.replaceAll("_", " "), choice.description);
  if (choice.without) {
    const button = Object.assign(document.createElement("button"), {
      type: "button", className: "link", textContent: "load the layout without it",
    });
    button.setAttribute("aria-label", `Load the best layout without ${choice.name.replaceAll("_", " ")}: ${describeLayout(choice.without.layout)}`);
    button.addEventListener("click", () => onLoad(choice.without.layout));
    item.append(" ", button);
  }
  return item;
}

function layoutChips(layout) {
  const chips = [["tp", layout.tp], ["pp", layout.pp], ["cp", layout.cp], ["dp", layout.dp], ["vpp", layout.vpp],
    ["micro-batch", layout.micro_batch], ["ZeRO", layout.zero], ["recompute", layout.recompute]];
  if (layout.schedule) chips.push(["schedule", layout.schedule]);
  if (layout.ep) chips.push(["ep", layout.ep]);
  if (layout.placement) chips.push(["placement", layout.placement.join(" › ")]);
  return chips.map(([name, value]) => {
    const chip = Object.assign(document.createElement("li"), { className: "chip" });
    chip.append(Object.assign(document.createElement("span"), { textContent: name }), ` ${value}`);
    return chip;
  });
}

function textItem(name, text) {
  const item = document.createElement("li");
  item.append(Object.assign(document.createElement("strong"), { textContent: name }), ` — ${text}`);
  return item;
}

// One binding rule: what it says, what relaxing it would buy, and a button to try that layout.
function bindingItem(binding, bestMfu, onLoad) {
  const item = textItem(binding.name.replaceAll("_", " "), binding.description);
  const gain = document.createElement("span");
  gain.className = "gain";
  if (binding.relaxed_mfu === null || binding.relaxed_mfu === undefined) {
    gain.textContent = "relaxing it alone leaves no layout that fits";
    gain.classList.add("none");
  } else {
    const points = ((binding.relaxed_mfu - bestMfu) * 100).toFixed(1);
    gain.textContent = `relaxed: ${pct(binding.relaxed_mfu)} MFU (+${points} pts) `;
  }
  item.append(gain);
  if (binding.relaxed) {
    const button = Object.assign(document.createElement("button"), {
      type: "button", className: "link", textContent: "load that layout",
    });
    button.setAttribute("aria-label", `Load the layout with ${binding.name.replaceAll("_", " ")} relaxed: ${describeLayout(binding.relaxed.layout)}`);
    button.addEventListener("click", () => onLoad(binding.relaxed.layout));
    gain.append(button);
  }
  if (binding.step_up) {
    // The memory limit's smallest raise that buys anything: the next frontier point up.
    const step = binding.step_up;
    const stepGain = document.createElement("span");
    stepGain.className = "gain";
    stepGain.textContent = `smallest step: ${pct(step.mfu)} MFU at ${step.memory_gb.total.toFixed(1)} GB `;
    const button = Object.assign(document.createElement("button"), {
      type: "button", className: "link", textContent: "load the step",
    });
    button.setAttribute("aria-label", `Load the least-memory layout that beats the optimum: ${describeLayout(step.layout)}`);
    button.addEventListener("click", () => onLoad(step.layout));
    stepGain.append(button);
    item.append(stepGain);
  }
  return item;
}
