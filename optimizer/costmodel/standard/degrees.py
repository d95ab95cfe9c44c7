"""The degrees and knobs of one layout or of a whole grid, as equally shaped arrays, with the
spans of their groups: what every standard-profile formula reads."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

Number = Any


@dataclass(frozen=True)
class Degrees:
    """The knobs of one layout or of a grid (equally shaped arrays), spans included."""

    tp: Number
    pp: Number
    cp: Number
    dp: Number
    vpp: Number
    micro_batch: Number
    zero: Number
    recompute: Number  # grid.RECOMPUTE_CODES index
    schedule: Number  # grid.SCHEDULE_CODES index
    ep: Number
    tp_span: Number
    cp_span: Number
    pp_span: Number
    dp_span: Number

    @property
    def ep_span(self) -> Number:
        """ep ranks are carved from cp first, then dp (Megatron-LM's expert groups)."""
        inside_cp = self.cp_span / self.cp
        inside_dp = self.dp_span / self.dp
        wide = np.maximum(self.ep / self.cp * inside_dp, self.cp_span)
        return np.where(self.ep <= self.cp, self.ep * inside_cp, wide)

    @property
    def data_group_span(self) -> Number:
        """Gradients reduce over dp * cp: the group spans the wider of the two."""
        return np.maximum(self.dp_span, self.cp_span)


def per_synced_stage(values: Sequence[Any], k: Degrees) -> Number:
    """A per-ZeRO-stage assumption (stages 0, 1, 2) read at each layout's stage; ZeRO-3 reads
    stage 2's, which its callers zero or ignore (its traffic is priced apart)."""
    return np.asarray(values)[np.clip(np.asarray(k.zero, dtype=np.int64), 0, 2)]
