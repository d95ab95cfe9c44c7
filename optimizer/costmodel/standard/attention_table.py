"""Profile `standard`, fused attention's throughput by attended length (docs/cost-model.md,
"Attention by attended length").

A fused attention kernel loses throughput on short sequences and narrow windows: each block
of queries pays fixed costs (loading its tile, the diagonal block the causal mask half
wastes, the epilogue) over fewer keys. cuDNN's training SDPA benchmark measures forward and
backward times by sequence length, on Hopper and Blackwell, as Megatron-Core's and NeMo's
Transformer Engine layers run them (NVIDIA/cudnn-frontend@3929da2ef4c1dba1bb8acb68727b9134f26f40c0,
benchmark/sdpa_benchmark_training/results): bf16, causal (`top_left`), non-deterministic
backward. The runs below are copied from its CSVs, times in ms:

- `sm_90`: `h200_919_only_cudnn/llama3.1_20260227_034703.csv` (H200, cuDNN 9.19; Llama 3.1:
  64 query heads, 8 KV heads, head dim 128, one sequence) and `gpt_oss_20260227_034819.csv`
  (GPT-OSS: head dim 64, a 1,024-token window over 32,768 tokens, two sequences);
- `sm_100`: `llama3.1/gb200/llama3.1_20260424_100750.csv` (GB200, two sequences) and
  `gpt_oss/gb200/gpt_oss_20260424_100011.csv` (128 query heads, head dim 64, a 128-token window).

A run's rate is its scores (the causal band: `w s - w (w - 1) / 2`, `w = s` unwindowed) times
head dim, heads and sequences over its forward plus backward time; each length's rate is read
against the 16,384-token causal run's, where the GPU's `attention_efficiency` (FlashAttention's
long-sequence figure) is taken to hold. The window runs have head dim 64, the causal ones 128:
a model's own head dim is not priced apart. Lengths between runs interpolate in the log; below
the shortest, a query's time stays that of the shortest (the rate falls with the length); above
the longest, the longest's rate holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from optimizer.costmodel.standard import times as tim

Number = Any

REFERENCE_LENGTH = 16_384


@dataclass(frozen=True)
class SdpaRun:
    """One measured training SDPA: `batch` sequences of `seq_len` tokens, `heads` query
    heads of `head_dim`, each query attending its `window` previous keys (None: all of them)."""

    seq_len: int
    window: int | None
    batch: int
    heads: int
    head_dim: int
    forward_ms: float
    backward_ms: float

    @property
    def attended(self) -> int:
        """The keys a query attends at most: the window, else the sequence."""
        return min(self.window or self.seq_len, self.seq_len)

    @property
    def scores(self) -> float:
        """Query-key pairs the causal band holds, per head and sequence."""
        return tim.causal_band_scores(self.seq_len, self.attended)

    @property
    def score_rate(self) -> float:
        """Scores x head dim x heads x sequences a millisecond, forward and backward together."""
        work = self.scores * self.head_dim * self.heads * self.batch
        return work / (self.forward_ms + self.backward_ms)


def _llama(batch: int, timings: tuple[tuple[int, float, float], ...]) -> tuple[SdpaRun, ...]:
    return tuple(SdpaRun(s, None, batch, 64, 128, fwd, bwd) for s, fwd, bwd in timings)


MEASURED: dict[str, tuple[SdpaRun, ...]] = {
    "sm_90": _llama(
        1,
        (
            (2048, 0.142, 0.464),
            (4096, 0.465, 1.450),
            (8192, 1.708, 5.083),
            (16384, 6.531, 19.002),
            (32768, 25.566, 75.688),
        ),
    )
    + (SdpaRun(32768, 1024, 2, 64, 64, 3.021, 9.045),),
    "sm_100": _llama(
        2,
        (
            (2048, 0.125, 0.389),
            (4096, 0.391, 1.198),
            (8192, 1.397, 4.127),
            (16384, 5.150, 16.554),
            (32768, 21.692, 71.756),
        ),
    )
    + (SdpaRun(32768, 128, 2, 128, 64, 2.634, 3.692),),
}


@cache
def relative_rates(table: str) -> tuple[np.ndarray, np.ndarray]:
    """(attended lengths ascending, each one's rate over the 16,384-token causal run's); read
    once a table (callers must not write to the arrays)."""
    runs = MEASURED[table]
    reference = next(r for r in runs if r.window is None and r.seq_len == REFERENCE_LENGTH)
    ordered = sorted(runs, key=lambda r: r.attended)
    lengths = np.array([r.attended for r in ordered], dtype=float)
    rates = np.array([r.score_rate / reference.score_rate for r in ordered])
    return lengths, rates


def relative_rate(table: str, length: Number) -> Number:
    """Fused attention's throughput at `length` attended keys against the reference length's,
    on the architecture `table` names (module docstring)."""
    lengths, rates = relative_rates(table)
    length = np.maximum(np.asarray(length, dtype=float), 1.0)
    inside = np.interp(np.log(np.maximum(length, lengths[0])), np.log(lengths), rates)
    return np.where(length < lengths[0], rates[0] * length / lengths[0], inside)
