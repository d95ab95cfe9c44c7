"""The structural rules of a layout as CP-SAT constraint families, over prime exponents.

Each degree (tp, pp, cp, dp) and the micro-batch size get one exponent variable per prime
(`tp_exp_2`, `dp_exp_3`, ...), linked linearly to the one-hot choice of degree tuple and of
micro-batch size, each with exactly the values the candidates reach (cpsat-notes.md). The
product of degrees and the divisibility rules are then linear per prime. The candidate tuple
list is pre-filtered by the same rules for speed; these families make the rules hold for any
list, and `tests/test_optimizer_structure.py` proves each one does work.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

import numpy as np
from ortools.sat.python import cp_model

from models.job import TrainingJob

DEGREES = ("tp", "pp", "cp", "dp")
# Every family, in the order the model adds them; a test may leave one out to show it works.
STRUCTURE_FAMILIES = (
    "degree_product",
    "tp_divides_heads",
    "cp_divides_sequence",
    "batch_divisibility",
    "pipeline_layers",
    "chunk_layers",
)


class HasChoices(Protocol):
    """The part of the layout model the structure reads: its one-hot choices."""

    model: cp_model.CpModel
    degree_is: list[cp_model.IntVar]
    knob_is: dict[str, list[cp_model.IntVar]]


def prime_factors(n: int) -> dict[int, int]:
    """{prime: exponent} of n >= 1."""
    factors: dict[int, int] = {}
    q = 2
    while q * q <= n:
        while n % q == 0:
            factors[q] = factors.get(q, 0) + 1
            n //= q
        q += 1
    if n > 1:
        factors[n] = factors.get(n, 0) + 1
    return factors


def valuation(n: int, prime: int) -> int:
    """The exponent of `prime` in n (n >= 1)."""
    exponent = 0
    while n % prime == 0:
        n //= prime
        exponent += 1
    return exponent


def _primes_of(values: Iterable[int]) -> list[int]:
    return sorted({q for value in set(values) for q in prime_factors(int(value))})


class DegreeStructure:
    """Exponent variables of one layout model and the structural families over them."""

    def __init__(
        self,
        layout_model: HasChoices,
        degrees: np.ndarray,
        micro_batches: Sequence[int],
        vpps: Sequence[int],
    ) -> None:
        self.choices, self.model = layout_model, layout_model.model
        self.degrees, self.micro_batches, self.vpps = degrees, micro_batches, vpps
        # every prime that any candidate degree or micro-batch size has: a candidate with
        # a prime outside the targets' factorisations must see that prime's rule too
        self.primes = _primes_of([*degrees.ravel().tolist(), *micro_batches])
        self.exponents = {
            name: self._exponents(name, degrees[:, column], layout_model.degree_is)
            for column, name in enumerate(DEGREES)
        }
        self.exponents["micro_batch"] = self._exponents(
            "micro_batch", np.asarray(micro_batches), layout_model.knob_is["micro_batch"]
        )
        pp_values = [int(v) for v in degrees[:, 1]]
        self.pp_value = self.model.new_int_var_from_domain(
            cp_model.Domain.from_values(sorted(set(pp_values))), "pp_value"
        )
        self.model.add(self.pp_value == _weighted(layout_model.degree_is, pp_values))

    def _exponents(
        self, name: str, values: np.ndarray, literals: list[cp_model.IntVar]
    ) -> dict[int, cp_model.IntVar]:
        """`<name>_exp_<q>` = the exponent of q in the chosen value, one per prime."""
        exponents = {}
        for q in self.primes:
            per_choice = [valuation(int(v), q) for v in values]
            var = self.model.new_int_var_from_domain(
                cp_model.Domain.from_values(sorted(set(per_choice))), f"{name}_exp_{q}"
            )
            self.model.add(var == _weighted(literals, per_choice))
            exponents[q] = var
        return exponents

    def add(self, job: TrainingJob, without: frozenset[str] = frozenset()) -> None:
        """Every family but those in `without` (which only tests leave out)."""
        model, training = job.model, job.training
        families = {
            "degree_product": lambda: self.add_degree_product(job.cluster.gpus),
            "tp_divides_heads": lambda: self.add_tp_divides_heads(model.num_attention_heads),
            "cp_divides_sequence": lambda: self.add_cp_divides_sequence(training.seq_len),
            "batch_divisibility": lambda: self.add_batch_divisibility(training.global_batch),
            "pipeline_layers": lambda: self.add_pipeline_layers(model.num_layers),
            "chunk_layers": lambda: self.add_chunk_layers(model.num_layers),
        }
        for name in STRUCTURE_FAMILIES:
            if name not in without:
                families[name]()

    def add_degree_product(self, gpus: int) -> None:
        """tp * pp * cp * dp = gpus: per prime, the degrees' exponents sum to the GPU count's."""
        for q in self.primes + [q for q in prime_factors(gpus) if q not in self.primes]:
            terms = [self.exponents[name][q] for name in DEGREES if q in self.exponents[name]]
            self.model.add(sum(terms) == valuation(gpus, q))

    def add_tp_divides_heads(self, heads: int) -> None:
        """tp divides the attention heads: no prime more often in tp than in the heads."""
        for q, exponent in self.exponents["tp"].items():
            self.model.add(exponent <= valuation(heads, q))

    def add_cp_divides_sequence(self, seq_len: int) -> None:
        """cp divides the sequence length: no prime more often in cp than in seq_len."""
        for q, exponent in self.exponents["cp"].items():
            self.model.add(exponent <= valuation(seq_len, q))

    def add_batch_divisibility(self, batch: int) -> None:
        """dp * micro_batch divides the global batch: per prime, their exponents fit its."""
        for q in self.primes:
            dp_q, micro_q = self.exponents["dp"][q], self.exponents["micro_batch"][q]
            self.model.add(dp_q + micro_q <= valuation(batch, q))

    def add_pipeline_layers(self, layers: int) -> None:
        """pp <= layers: every stage holds at least one layer."""
        self.model.add(self.pp_value <= layers)

    def add_chunk_layers(self, layers: int) -> None:
        """vpp > 1 only with pp > 1 and pp * vpp <= layers: each chunk at least one layer."""
        for vpp, literal in zip(self.vpps, self.choices.knob_is["vpp"], strict=True):
            if vpp > 1:
                self.model.add(self.pp_value * int(vpp) <= layers).only_enforce_if(literal)
                self.model.add(self.pp_value >= 2).only_enforce_if(literal)


def _weighted(literals: Sequence[cp_model.IntVar], weights: Sequence[int]) -> cp_model.LinearExpr:
    return cp_model.LinearExpr.weighted_sum(literals, [int(w) for w in weights])
