"""Measured GEMM throughput by shape (models/presets/gemm_throughput.json: XLA's default
matmul performance table, bf16 on H100 and B200), read at any shape.

The table holds b x m x n x k for b in {1, 2, 4} and m, n, k in {256, ..., 4096}, each axis
doubling; between its points throughput is interpolated linearly in the logarithms of the
four (multilinear on the table's own doubling grid: a few lines of numpy, so the base
install needs no scipy). Outside it:

- **more rows than 4,096** run as more GEMMs of 4,096 rows in one batched call (the same
  tiles over the same SMs), up to the table's batch of 4; beyond that the largest shape's
  throughput, which large GEMMs saturate near (805 TFLOP/s on H100 against the 794 of
  stas00/ml-engineering's maximum-achievable-matmul search, models/presets/gpus.json);
- **columns or depth beyond 4,096** are read at 4,096 (saturated as well);
- **a dimension below 256** takes as long as the table's 256: too little work to fill the
  GPU or hide a kernel's fixed cost, so its throughput falls in proportion.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from models.presets import gemm_throughput

Number = Any
AXES = ("batch", "m", "n", "k")


@dataclass(frozen=True)
class GemmPass:
    """One pass of one of a layer's GEMMs on one rank: `batch` independent GEMMs (an MoE
    rank's local experts, as one grouped call) of a `rows x cols` output reduced over
    `depth`, doing `share` of the layer's GEMM FLOPs: what the table is asked about."""

    batch: Number
    rows: Number
    cols: Number
    depth: Number
    share: Number


@cache
def _grid(table: str) -> tuple[np.ndarray, tuple[tuple[float, float], ...]]:
    """The table's FLOP/s and each axis's (first value, last value); every axis doubles."""
    data = gemm_throughput()
    ends = []
    for name in AXES:
        axis = np.asarray(data["axes"][name], dtype=float)
        assert np.all(axis[1:] == 2 * axis[:-1]), f"gemm_throughput axis {name} must double"
        ends.append((float(axis[0]), float(axis[-1])))
    return np.asarray(data["tables"][table], dtype=float) * 1e12, tuple(ends)


def measured_flop_s(table: str, passes: list[GemmPass]) -> list[Number]:
    """Each pass's FLOP/s at its shape, broadcasting over numpy arrays (one lookup for all)."""
    dims = np.broadcast_arrays(
        *(np.asarray(x, dtype=float) for p in passes for x in (p.batch, p.rows, p.cols, p.depth))
    )
    batch, rows, cols, depth = (np.stack(dims[i::4]) for i in range(4))
    return list(_flop_s(table, batch, rows, cols, depth))


def _flop_s(table: str, batch: Number, rows: Number, cols: Number, depth: Number) -> Number:
    flop_s, ends = _grid(table)
    (_, most_batched), (_, most_rows) = ends[0], ends[1]
    batched = np.minimum(batch * np.maximum(rows / most_rows, 1.0), most_batched)
    shape = (batched, rows, cols, depth)
    at = [np.log2(np.clip(x, low, high) / low) for x, (low, high) in zip(shape, ends, strict=True)]
    small = 1.0
    for x, (low, _) in zip(shape[1:], ends[1:], strict=True):
        small = small * np.minimum(x / low, 1.0)
    return _multilinear(flop_s, at) * small


def _multilinear(values: np.ndarray, at: list[Number]) -> Number:
    """`values` read at fractional grid indices `at` (one array per axis), linear along each:
    the 2 x ... x 2 block of grid points around each index, gathered at once and weighted."""
    ndim = len(at)
    indices, weight = [], 1.0
    for axis, index in enumerate(at):
        low = np.clip(np.floor(index), 0, values.shape[axis] - 2).astype(int)
        corner = (1,) * ndim
        fraction = (index - low).reshape(low.shape + corner)
        step = np.arange(2).reshape(corner[:axis] + (2,) + corner[axis + 1 :])
        indices.append(low.reshape(low.shape + corner) + step)
        weight = weight * np.where(step == 1, fraction, 1 - fraction)
    block = values[tuple(indices)]
    return (block * weight).sum(axis=tuple(range(-ndim, 0)))
