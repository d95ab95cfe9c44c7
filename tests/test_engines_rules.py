"""Each engine rule against a hand-worked layout that breaks it and one that satisfies it
(the arithmetic in the comments), on a grid of both rows (the layer-split arithmetic is in
test_engine_layer_splits.py)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from models.errors import InvalidSpec
from models.job import TrainingJob
from models.layout import Layout, Recompute, Schedule, resolve_layout
from models.presets import model_preset
from models.transformer import TransformerSpec
from optimizer.costmodel import LayoutGrid
from optimizer.engines import ENGINES, get_engine, violations
from tests.helpers import plate_job


@dataclass(frozen=True)
class RuleCase:
    engine: str
    rule: str
    job: TrainingJob
    bad: Layout  # dp given: grid rows are resolved layouts
    good: Layout
    good_job: TrainingJob | None = None  # when the rule is about the job itself


L70 = plate_job(1024, "llama3-70b", global_batch=1024)  # 80 layers, 64 heads, 8 KV heads
L70_960 = plate_job(1024, "llama3-70b", global_batch=960)
MIXTRAL = plate_job(256, "mixtral-8x7b", global_batch=1024)  # 32 layers, 8 experts
# DeepSeek-V3's multi-head latent attention at a vocabulary of its own: no recipe trains it
CUSTOM_MLA = L70.model_copy(
    update={"model": model_preset("deepseek-v3").model_copy(update={"vocab_size": 100_352})}
)


def toy(gpus: int, **fields: object) -> TrainingJob:
    """A small GPT-shaped job on `gpus` GPUs, its spec's fields overridden by `fields`."""
    spec = {
        "num_layers": 8,
        "hidden_size": 3072,
        "ffn_hidden_size": 8192,
        "num_attention_heads": 48,
        "num_kv_heads": 48,
        "vocab_size": 32000,
    }
    return plate_job(gpus, TransformerSpec.model_validate(spec | fields))


# 48 heads and 6 KV heads: tp 4 divides the heads, but 6 % 4 = 2 and 4 % 6 = 4.
GQA6 = toy(48, num_kv_heads=6)
FFN8196 = toy(48, ffn_hidden_size=8196)
TIED = toy(64, num_attention_heads=32, num_kv_heads=8, tied_embeddings=True)
SEQ6144 = plate_job(1152, "llama3-8b", seq_len=6144)  # 6144 = 2^11 * 3
SEQ6000 = plate_job(1152, "llama3-8b", seq_len=6000)  # 6000 = 2^4 * 375
FP8_SEQ6000 = plate_job(1152, "llama3-8b", seq_len=6000, precision="fp8")


def lay(**knobs: object) -> Layout:
    return Layout.model_validate(knobs)


def core_cases(engine: str) -> list[RuleCase]:
    """Megatron-Core's rules, the same for Megatron-LM and Megatron-Bridge."""
    return [
        # 64 heads: 64 % 48 = 16; 64 % 8 = 0.
        RuleCase(engine, "heads_divisible_by_tp", L70, lay(tp=48, dp=1), lay(tp=8, dp=128)),
        # MLP width 8196: 8196 % 8 = 4; 8196 % 4 = 0 (48 heads take either).
        RuleCase(engine, "mlp_divisible_by_tp", FFN8196, lay(tp=8, dp=6), lay(tp=4, dp=12)),
        # 6 query groups: tp 4 neither multiple nor divisor; tp 3 divides 6.
        RuleCase(engine, "query_groups_vs_tp", GQA6, lay(tp=4, dp=12), lay(tp=3, dp=16)),
        # 8 experts: 8 % 3 = 2; 8 % 4 = 0.
        RuleCase(engine, "experts_divisible_by_ep", MIXTRAL, lay(ep=3, dp=256), lay(ep=4, dp=256)),
        # 256 GPUs: tp 8 * ep 16 * pp 4 = 512 does not divide 256; 1 * 8 * 4 = 32 does.
        RuleCase(
            engine, "expert_grid", MIXTRAL, lay(tp=8, pp=4, ep=16, dp=8), lay(pp=4, ep=8, dp=64)
        ),
        # 1024 sequences, dp 32: micro 3 -> 96 does not divide 1024; micro 2 -> 64 does.
        RuleCase(
            engine,
            "batch_identity",
            L70,
            lay(tp=8, pp=4, dp=32, micro_batch=3),
            lay(tp=8, pp=4, dp=32, micro_batch=2),
        ),
        RuleCase(
            engine,
            "interleaving_needs_pp",
            L70,
            lay(tp=8, vpp=2, dp=128),
            lay(tp=8, pp=2, vpp=2, dp=64),
        ),
        # 1024 sequences over dp 16 in micro-batches of 16: 4 a step, short of one group of
        # pp 8; of 8: 8, one group.
        RuleCase(
            engine,
            "interleaving_micro_batch_groups",
            L70,
            lay(tp=8, pp=8, vpp=2, dp=16, micro_batch=16),
            lay(tp=8, pp=8, vpp=2, dp=16, micro_batch=8),
        ),
        # 6000 tokens: 6000 % 32 = 16; 6000 % 16 = 0 (8 KV heads: tp 32 and 16 are multiples).
        RuleCase(engine, "sequence_parallel_split", SEQ6000, lay(tp=32, dp=36), lay(tp=16, dp=72)),
        # FP8 on 6000 tokens: tp 16 leaves 375 a rank (375 % 8 = 7); tp 2, 3000 (% 8 = 0).
        RuleCase(engine, "fp8_dims", FP8_SEQ6000, lay(tp=16, dp=72), lay(tp=2, dp=576)),
        # 32 layers on pp 8 x vpp 8 = 64 chunks: no split; pp 4 x vpp 3 = 12 takes a layout string.
        RuleCase(engine, "layer_split", MIXTRAL, lay(pp=8, vpp=8, dp=32), lay(pp=4, vpp=3, dp=64)),
        RuleCase(
            engine,
            "megatron_fsdp_without_pp",
            L70,
            lay(tp=8, pp=2, zero=2, dp=64),
            lay(tp=8, zero=2, dp=128),
        ),
        # 6144 % (2 * 9) = 6; 6144 % (2 * 3) = 0.
        RuleCase(
            engine,
            "seq_len_divisible_by_2cp",
            SEQ6144,
            lay(tp=8, cp=9, dp=16),
            lay(tp=8, cp=3, dp=48),
        ),
        RuleCase(
            engine,
            "schedule",
            L70,
            lay(tp=8, pp=4, dp=32, schedule="zero-bubble"),
            lay(tp=8, pp=4, dp=32),
        ),
    ]


CASES = [
    *core_cases("megatron"),
    *core_cases("nemo"),
    RuleCase(
        "nemo", "model_architecture", CUSTOM_MLA, lay(tp=8, dp=128), lay(tp=8, dp=128), good_job=L70
    ),
    RuleCase(
        "torchtitan",
        "schedule",
        L70,
        lay(tp=8, pp=4, dp=32, schedule="dualpipe"),
        lay(tp=8, pp=4, dp=32),
    ),
    RuleCase("torchtitan", "zero", L70, lay(tp=8, dp=128, zero=1), lay(tp=8, dp=128, zero=3)),
    RuleCase(
        "torchtitan",
        "batch_identity",
        L70,
        lay(tp=8, pp=4, dp=32, micro_batch=3),
        lay(tp=8, pp=4, dp=32),
    ),
    # 80 + 2 = 82: pp 4 x vpp 5 = 20 stages need lps 5, which builds 17; pp 2 x vpp 4 = 8
    # stages take lps ceil(82 / 8) = 11, and ceil(82 / 11) = 8.
    RuleCase(
        "torchtitan",
        "stages_from_layers_per_stage",
        L70,
        lay(tp=8, pp=4, vpp=5, dp=32),
        lay(tp=8, pp=2, vpp=4, dp=64),
    ),
    # 64 heads: 64 % 48 = 16; 64 % 8 = 0.
    RuleCase("torchtitan", "heads_divisible_by_tp", L70, lay(tp=48, dp=1), lay(tp=8, dp=128)),
    # 8 KV heads: tp 16 divides the 64 heads but not them; tp 8 divides both.
    RuleCase("torchtitan", "kv_heads_divisible_by_tp", L70, lay(tp=16, dp=64), lay(tp=8, dp=128)),
    # 6144 tokens: cp 9 needs 18 to divide them (6144 % 18 = 6); cp 3, 6 (6144 % 6 = 0).
    RuleCase(
        "torchtitan",
        "seq_len_divisible_by_tp_and_2cp",
        SEQ6144,
        lay(cp=9, dp=128, zero=3),
        lay(cp=3, dp=384, zero=3),
    ),
    RuleCase("torchtitan", "no_tied_embeddings_with_pp", TIED, lay(pp=2, dp=32), lay(dp=64)),
    # 960 sequences over dp 64: micro-batches of 1 make 15, in 15 // 2 = 7 rounds (15 % 7 = 1);
    # of 5 make 3, one round.
    RuleCase(
        "torchtitan",
        "interleaved_rounds",
        L70_960,
        lay(tp=8, pp=2, vpp=4, dp=64, micro_batch=1),
        lay(tp=8, pp=2, vpp=4, dp=64, micro_batch=5),
    ),
    RuleCase(
        "torchtitan", "fsdp_over_cp", L70, lay(tp=8, cp=2, dp=64), lay(tp=8, cp=2, dp=64, zero=3)
    ),
    # dp 4: with DDP dp_shard = 1 and 1 * cp 1 * tp 1 = 1 is not a multiple of ep 2; FSDP: 4.
    RuleCase(
        "torchtitan", "ep_divides_dp_shard_cp_tp", MIXTRAL, lay(dp=4, ep=2), lay(dp=4, ep=2, zero=3)
    ),
    RuleCase(
        "torchtitan",
        "experts_without_tp",
        MIXTRAL,
        lay(tp=2, dp=128, ep=2, zero=3),
        lay(dp=256, ep=2, zero=3),
    ),
    RuleCase(
        "torchtitan",
        "model_architecture",
        MIXTRAL,
        lay(dp=256, zero=3),
        lay(dp=1024, zero=3),
        good_job=L70,
    ),
    RuleCase("deepspeed", "schedule", L70, lay(tp=8, pp=4, vpp=2, dp=32), lay(tp=8, pp=4, dp=32)),
    RuleCase(
        "deepspeed",
        "recompute",
        L70,
        lay(tp=8, dp=128, recompute=Recompute.SELECTIVE),
        lay(tp=8, dp=128, recompute=Recompute.FULL),
    ),
    RuleCase("deepspeed", "cp", L70, lay(tp=8, cp=2, dp=64), lay(tp=8, dp=128)),
    RuleCase(
        "deepspeed",
        "pipeline_zero_below_2",
        L70,
        lay(tp=8, pp=2, dp=64, zero=2),
        lay(tp=8, pp=2, dp=64, zero=1),
    ),
    RuleCase(
        "deepspeed",
        "batch_identity",
        L70,
        lay(tp=8, pp=4, dp=32, micro_batch=3),
        lay(tp=8, pp=4, dp=32),
    ),
    RuleCase("deepspeed", "experts_divisible_by_ep", MIXTRAL, lay(ep=3, dp=256), lay(ep=8, dp=256)),
    # dp 4 % ep 8 = 4; dp 8 % 8 = 0.
    RuleCase(
        "deepspeed",
        "ep_divides_dp",
        MIXTRAL,
        lay(tp=8, pp=8, dp=4, ep=8),
        lay(tp=8, pp=4, dp=8, ep=8),
    ),
]


# Rules about a named choice rather than numbers ("schedule zero-bubble is not one of them").
WORDS_ONLY = {"schedule", "recompute", "model_architecture"}


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.engine}-{c.rule}")
def test_rule_refuses_the_bad_row_and_keeps_the_good_one(case: RuleCase) -> None:
    rule = get_engine(case.engine).rule(case.rule)
    if case.good_job is None:  # one grid of both rows: the check is vectorised
        mask = np.broadcast_to(
            rule.check(case.job, LayoutGrid.from_layouts([case.bad, case.good])), (2,)
        )
        assert mask.tolist() == [False, True]
    else:
        assert not np.broadcast_to(rule.check(case.job, LayoutGrid.from_layouts([case.bad])), (1,))[
            0
        ]
        assert np.broadcast_to(
            rule.check(case.good_job, LayoutGrid.from_layouts([case.good])), (1,)
        )[0]
    detail = rule.detail(case.job, case.bad)
    assert detail and (case.rule in WORDS_ONLY or any(ch.isdigit() for ch in detail))
    try:  # where the project itself accepts the bad layout, violations() names the rule
        resolve_layout(case.bad, case.job)
    except InvalidSpec:
        return
    assert any(
        v.startswith(rule.description)
        for v in violations(get_engine(case.engine), case.job, case.bad)
    )


def test_every_rule_has_a_case() -> None:
    covered = {(c.engine, c.rule) for c in CASES}
    every = {(name, rule.name) for name, engine in ENGINES.items() for rule in engine.rules}
    assert every == covered


def test_refused_knobs_have_rules() -> None:
    """What an engine does not offer is refused by a rule of the same name."""
    for engine in ENGINES.values():
        names = {r.name for r in engine.rules}
        offers = engine.offers
        if not all(f.offered for f in offers.zero.values()):
            assert "zero" in names
        if not all(f.offered for f in offers.recompute.values()):
            assert "recompute" in names
        if not offers.context_parallel.offered:
            assert "cp" in names
        if not (offers.interleaving.offered and all(f.offered for f in offers.schedules.values())):
            assert "schedule" in names


def test_megatron_offers_no_zero_bubble_or_dualpipe() -> None:
    offers = get_engine("megatron").offers.schedules
    assert offers[Schedule.ONE_F_ONE_B].offered
    assert not offers[Schedule.ZERO_BUBBLE].offered and not offers[Schedule.DUALPIPE].offered
