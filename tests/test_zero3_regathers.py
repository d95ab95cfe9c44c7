"""ZeRO-3 under full recompute as DeepSpeed runs it: each submodule's forward hook gathers its
parameters, so a checkpointed layer's replay gathers them again, and a parameter reused within
stage3_max_reuse_distance is kept rather than released. FSDP2 replays inside a unit that holds
its parameters: nothing more is gathered. Each share is worked by hand."""

from __future__ import annotations

import pytest

from models.errors import InvalidSpec
from models.layout import Layout, resolve_layout
from models.transformer import TransformerSpec
from optimizer import Request
from optimizer.costmodel import CostAssumptions, evaluate
from optimizer.costmodel import stage_plans as sp
from optimizer.costmodel.standard import data_parallel as dpl
from optimizer.costmodel.standard import memory as mem
from optimizer.costmodel.standard.degrees import Degrees
from optimizer.engines import engine_assumptions, get_engine
from optimizer.search import SearchSpace
from optimizer.searches import prepare_search
from optimizer.staging import search_stage_plans
from tests.helpers import plate_job

# SC21's GPT-3 175B: h = 12,288, 96 heads, 4h GeLU MLP
GPT3 = TransformerSpec(
    num_layers=96,
    hidden_size=12288,
    ffn_hidden_size=4 * 12288,
    num_attention_heads=96,
    num_kv_heads=96,
    vocab_size=51200,
    gated_mlp=False,
)
DEEPSPEED = engine_assumptions(get_engine("deepspeed"), CostAssumptions())
FSDP = engine_assumptions(get_engine("torchtitan"), CostAssumptions())


def gather_passes(engine: CostAssumptions, k: Degrees, stage_params: float) -> tuple[float, float]:
    """dpl.zero3_gather_passes with the engine's reuse distance and re-gathering."""
    reuse, regathers = engine.zero3_reuse_distance_params, engine.zero3_recompute_regathers
    return dpl.zero3_gather_passes(GPT3, k, stage_params, reuse, regathers)


def degrees(recompute: int, tp: int = 1) -> Degrees:
    one = 1
    return Degrees(tp, one, one, one, one, one, 3, recompute, 0, one, tp, one, one, one)


def test_a_replayed_175b_layer_releases_all_but_its_last_matrix() -> None:
    # forward order QKV 3h^2, output h^2, h->4h 4h^2, 4h->h 4h^2; the backward of each waits on
    # the forward and backward of those after it: 2 x (h^2 + 8h^2), 2 x 8h^2, 2 x 4h^2 = 1.2e9
    # and 0 parameters against 1e9: the first three are released, the last kept
    share, rounds = dpl.replayed_layer_released(GPT3, 1, 1e9)
    assert share == pytest.approx((3 + 1 + 4) / 12)
    assert rounds == pytest.approx(3 / 4)
    # at tp 8 each module's parameters are an eighth: all within 1e9, all kept
    assert dpl.replayed_layer_released(GPT3, 8, 1e9) == (0.0, 0.0)
    # no reuse distance (FSDP): every gather released
    assert dpl.replayed_layer_released(GPT3, 1, None) == (1.0, 1.0)


def test_gather_passes_per_micro_batch() -> None:
    stage = GPT3.total_params  # one rank holds the whole model at tp 1, pp 1
    after_forward = 1 - 1e9 / (2 * stage)  # the stage's last 0.5e9 parameters are kept
    none = gather_passes(DEEPSPEED, degrees(mem.RECOMPUTE_NONE), stage)
    assert none == pytest.approx((1 + after_forward, 1 + after_forward))
    full = gather_passes(DEEPSPEED, degrees(mem.RECOMPUTE_FULL), stage)
    # the forward, the replay (what the forward released), the backward (what the replay did)
    assert full == pytest.approx((1 + after_forward + 8 / 12, 1 + after_forward + 3 / 4))
    # FSDP2: forward and backward whatever the recompute
    fsdp = gather_passes(FSDP, degrees(mem.RECOMPUTE_FULL), stage)
    assert fsdp == (2.0, 2.0)
    # a model within the reuse distance is kept from forward to backward: one gather a step
    small = gather_passes(DEEPSPEED, degrees(mem.RECOMPUTE_NONE), 0.4e9)
    assert small == (1.0, 1.0)


def test_deepspeed_zero3_with_full_recompute_pays_the_replay() -> None:
    job = plate_job(1536, GPT3, global_batch=1536, seq_len=2048)
    layout = Layout(tp=1, pp=1, zero=3, recompute="full")
    full = evaluate(job, layout, "standard", DEEPSPEED)
    held = DEEPSPEED.model_copy(update={"zero3_recompute_regathers": False})
    without = evaluate(job, layout, "standard", held)
    regathered = full.times_s["zero3_per_micro_batch"] / without.times_s["zero3_per_micro_batch"]
    # bytes: 3 + 2/3 passes (with the reduce-scatter) against 3, less the few kept at the end
    assert 1.0 < regathered < (4 + 2 / 3) / 3
    assert full.step_time_s > without.step_time_s


def test_stage_plans_price_each_rank_at_its_mode_and_the_search_refuses() -> None:
    job = plate_job(64, GPT3, global_batch=64, seq_len=2048)
    layout = resolve_layout(Layout(tp=1, pp=4, zero=3, recompute="full"), job)
    price = sp.price_plan(job, DEEPSPEED, layout, sp.even_plan(job, layout))
    estimate = evaluate(job, layout, "standard", DEEPSPEED)
    assert price.step_time_s == pytest.approx(estimate.step_time_s, rel=1e-12)
    # a rank's ZeRO-3 seconds follow its own mode: a replaying rank gathers more
    terms = sp.plan_terms(job, DEEPSPEED, layout)
    full, none = (mem.RECOMPUTE_FULL, mem.RECOMPUTE_NONE)
    sync = sp.data_parallel_sync(job, DEEPSPEED)
    replaying = sp.rank_data_parallel_s(job, sync, terms, 1, 24, full)[2]
    assert replaying > sp.rank_data_parallel_s(job, sync, terms, 1, 24, none)[2]
    problem, costs = prepare_search(Request(job, space=SearchSpace(zero_stages=[3]), engine=None))
    costs = costs.model_copy(update={"zero3_recompute_regathers": True})
    with pytest.raises(InvalidSpec, match="zero3_recompute_regathers"):
        search_stage_plans(problem, costs)


@pytest.mark.parametrize("tp", [1, 2, 8])
def test_the_replay_never_gathers_less(tp: int) -> None:
    # the replay's gather takes the place of the backward's and adds what it then releases:
    # never fewer passes than without it, and as many once every module is within the distance
    stage = GPT3.total_params / tp
    full = gather_passes(DEEPSPEED, degrees(mem.RECOMPUTE_FULL, tp), stage)
    none = gather_passes(DEEPSPEED, degrees(mem.RECOMPUTE_NONE, tp), stage)
    released, _ = dpl.replayed_layer_released(GPT3, tp, 1e9)
    assert full[0] == pytest.approx(none[0] + released) and full[0] >= none[0]
