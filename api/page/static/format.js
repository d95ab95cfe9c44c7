// How figures and layouts are written out, in the charts, the summary and the optimum panel alike.

// Halves round up, as Python prints the unrounded figure (0.4255 -> 42.6%, not 42.5%).
export const pct = (fraction, digits = 1) => `${(fraction * 100 + 1e-9).toFixed(digits)}%`;

export const gb = (value, digits = 2) => `${value.toFixed(digits)} GB`;

export const describeLayout = (l) =>
  `tp ${l.tp} · pp ${l.pp} · cp ${l.cp} · dp ${l.dp} · vpp ${l.vpp} · micro-batch ${l.micro_batch} · ZeRO-${l.zero} · recompute ${l.recompute}`
  + (l.placement ? ` · placement ${l.placement.join(" › ")}` : "");
