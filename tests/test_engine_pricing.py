"""Engines priced as they run: each engine's gradient sync as the cost model's assumptions,
checked by hand, and searches that obey each engine's rules."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from models.job import TrainingJob
from models.layout import Layout
from optimizer import Request, SolveSettings
from optimizer.costmodel import CostAssumptions, LayoutGrid, evaluate
from optimizer.costmodel.standard.compute import every_second_matmul_share
from optimizer.engines import ENGINES, engine_assumptions, export, get_engine, violations
from optimizer.engines.pricing import engine_traffic
from optimizer.searches import optimize
from tests.helpers import engine_or_none, plate_job

T, F = True, False


@pytest.mark.parametrize(
    ("engine", "per_step", "per_micro_batch", "with_pp", "all_reduce_once_a_step"),
    [
        # ZeRO 0: an all-reduce; 1: reduce-scatter + the parameters' all-gather; 2: sharded
        # gradients. Megatron-LM reduces in fp32 (2 volumes a pass), gathers bf16 parameters
        ("megatron", [4, 3, 1], [0, 0, 2], True, [T, F, F]),
        ("nemo", [4, 3, 1], [0, 0, 2], True, [T, F, F]),
        # DeepSpeed all-reduces in bf16 at ZeRO-1 and -2, then gathers the updated shards;
        # ZeRO-2 reduces every backward
        ("deepspeed", [2, 3, 1], [0, 0, 2], True, [T, T, F]),
        # torchtitan: DDP all-reduces fp32 every micro-batch; FSDP2 without resharding
        # gathers each forward and reduce-scatters fp32 each backward; with pp, once a step
        ("torchtitan", [0, 2, 0], [4, 0, 3], False, [F, F, F]),
        ("generic", [2, 2, 2], [0, 0, 0], True, [T, F, F]),
    ],
)
def test_each_engines_gradient_sync_in_volumes(
    engine: str,
    per_step: list[float],
    per_micro_batch: list[float],
    with_pp: bool,
    all_reduce_once_a_step: list[bool],
) -> None:
    traffic = engine_traffic(get_engine(engine))
    assert traffic["gradient_volumes_per_step"] == per_step
    assert traffic["gradient_volumes_per_micro_batch"] == per_micro_batch
    assert traffic["per_micro_batch_sync_with_pp"] is with_pp
    # which step syncs NCCL may run on its tree (an all-reduce), not PAT
    assert traffic["gradient_sync_all_reduce"] == all_reduce_once_a_step


def test_the_generic_engine_prices_as_the_cost_model_does() -> None:
    assert engine_assumptions(get_engine("generic"), CostAssumptions()) == CostAssumptions()


def test_a_requests_own_assumption_wins_over_the_engines() -> None:
    mine = CostAssumptions(gradient_volumes_per_step=[1.0, 1.0, 1.0])
    priced = engine_assumptions(get_engine("megatron"), mine)
    assert priced.gradient_volumes_per_step == [1.0, 1.0, 1.0]
    assert priced.gradient_volumes_per_micro_batch == [0.0, 0.0, 2.0]


# Llama 3 8B on two 8-GPU nodes: tp 8, dp 2 across the network, global batch 8 at
# micro-batch 1: m = 4 micro-batches. Nothing hides, so every byte shows in the step.
NOTHING_HIDES = {"zero3_overlap_fraction": 0.0, "dp_overlap_microbatches": 0.0}
ZERO_2 = Layout(tp=8, pp=1, cp=1, vpp=1, micro_batch=1, zero=2, recompute="none")
# Parameters a device holds (norms aside): (32 x 218,103,808 + 2 x 128,256 x 4,096) / 8
PARAMS_PER_DEVICE = 1_003_749_376
NETWORK_BYTES_S = 50e9 * 0.74
BUCKETS = 26  # ceil(1,003,749,376 / max(40M, 1M x dp 2))
# one rank a node: the ring with Simple, 8.4 + 14.0 = 22.4 us a collective; PAT's 8.0 +
# log2(2) x 14.0 / 3.5 + 2 x 2.8 = 17.6 us does not pay for its 0.75 of the bandwidth on
# buckets of 80-160 MB, nor LL128's (14.0 + 8.5) us for its 0.92
LATENCY_S = 22.4e-6


def test_sharded_gradients_pay_a_reduce_scatter_every_micro_batch() -> None:
    job = plate_job(16, "llama3-8b", global_batch=8, seq_len=8192)
    assert job.model.params_per_layer == 218_103_808  # attention 41,943,040 + MLP 176,160,768
    costs = CostAssumptions(**NOTHING_HIDES)
    generic = evaluate(job, ZERO_2, "standard", costs)
    megatron = evaluate(job, ZERO_2, "standard", engine_assumptions(get_engine("megatron"), costs))
    # g = 2: each pass sends (2-1)/2 of the parameters; fp32 gradients are 4 B, bf16 2 B
    reduce_scatter_s = 0.5 * 4 * PARAMS_PER_DEVICE / NETWORK_BYTES_S + BUCKETS * LATENCY_S
    gather_s = 0.5 * 2 * PARAMS_PER_DEVICE / NETWORK_BYTES_S + BUCKETS * 2 * LATENCY_S
    assert megatron.times_s["dp_comm_per_micro_batch"] == pytest.approx(reduce_scatter_s)
    assert megatron.times_s["dp_comm_exposed"] == pytest.approx(gather_s)
    # the engine-agnostic model syncs once a step: a reduce-scatter and an all-gather in bf16
    once_s = 2 * 0.5 * 2 * PARAMS_PER_DEVICE / NETWORK_BYTES_S + BUCKETS * 2 * LATENCY_S
    assert generic.times_s["dp_comm_per_micro_batch"] == 0
    assert generic.times_s["dp_comm_exposed"] == pytest.approx(once_s)
    # m = 4 reduce-scatters a step
    extra_s = 4 * reduce_scatter_s + gather_s - once_s
    assert megatron.times_s["step"] - generic.times_s["step"] == pytest.approx(extra_s)


def test_torchtitans_selective_checkpointing_replays_every_second_matmul() -> None:
    # op-level SAC saves every op but every second mm of a layer's forward: for Llama 3 8B
    # (h 4096; 8 KV heads of 128, so K and V 1024 wide each; f 14336) the order q, k, v, o,
    # gate, up, down replays k, o and up
    job = plate_job(16, "llama3-8b", global_batch=8, seq_len=8192)
    h, kv, f = 4096, 1024, 14336
    share = (h * kv + h * h + h * f) / (h * h + 2 * h * kv + h * h + 3 * h * f)
    assert every_second_matmul_share(job.model) == pytest.approx(share)  # 0.365
    layout = Layout(tp=8, pp=1, zero=1, recompute="selective")
    costs = CostAssumptions(eager_pointwise=False)  # fused kernels: the recompute policy alone
    megatron = evaluate(job, layout, "standard", engine_assumptions(get_engine("megatron"), costs))
    titan_costs = engine_assumptions(get_engine("torchtitan"), costs)
    titan = evaluate(job, layout, "standard", titan_costs)
    assert titan.times_s["matmul"] == megatron.times_s["matmul"]
    # Megatron's selective: 2% of the layer (Korthikanti et al.)
    layer_s = megatron.times_s["matmul"] + megatron.times_s["attention"]
    assert megatron.times_s["recompute"] == pytest.approx(0.02 * layer_s)
    # torchtitan's: those matmuls' forward (a third of their GEMM time) and the forward of
    # every elementwise kernel, which the policy does not save. Bytes a token, by hand: the
    # hidden state's two norms (4 bytes a value forward, 6 backward) and two residual adds
    # (6 and 6); rotary on Q and K (4 + 4 a value, q + k = 4096 + 1024 wide); SwiGLU (6 + 10)
    tokens, tp = 8192, 8
    bandwidth = job.cluster.gpu.memory_bandwidth_bytes_s
    hidden_tokens = tokens / tp if titan_costs.sequence_parallel else tokens
    forward = 2 * (4 + 6) * h * hidden_tokens + (4 * (h + kv) + 6 * f) * tokens / tp
    both = 2 * (10 + 12) * h * hidden_tokens + (8 * (h + kv) + 16 * f) * tokens / tp
    gemm_s = titan.times_s["matmul"] - both / bandwidth
    expected = share * gemm_s / 3 + forward / bandwidth
    assert titan.times_s["recompute"] == pytest.approx(expected)
    # and they count as hardware FLOPs: 2 per parameter per token, the share of the layers'
    # (hardware utilisation is hardware FLOPs over the step at the cluster's peak)
    tokens = job.training.tokens_per_step
    replayed = tokens * 2 * job.model.active_layer_params * share
    peak = job.cluster.gpus * job.cluster.gpu.peak_flop_s
    titan_flops, megatron_flops = (
        e.hardware_flops_utilization * peak * e.times_s["step"] for e in (titan, megatron)
    )
    assert titan_flops - megatron_flops == pytest.approx(replayed)
    # Korthikanti's selective (and no recompute at all) replays no matmul
    none = Layout(tp=8, pp=1, zero=1, recompute="none")
    assert evaluate(job, none, "standard", engine_assumptions(get_engine("torchtitan"), costs)
                    ).times_s["recompute"] == 0  # fmt: skip


def test_a_pipeline_that_defers_the_sync_pays_it_once_a_step() -> None:
    # torchtitan's DDP all-reduces every micro-batch, but torch's pipeline stage defers the
    # sync to once a schedule step: with pp 2 the per-micro-batch traffic moves to the step
    job = plate_job(16, "llama3-8b", global_batch=8, seq_len=8192)
    costs = engine_assumptions(get_engine("torchtitan"), CostAssumptions(**NOTHING_HIDES))
    alone = evaluate(job, Layout(tp=8, pp=1, zero=0), "standard", costs)
    piped = evaluate(job, Layout(tp=4, pp=2, zero=0), "standard", costs)
    assert alone.times_s["dp_comm_per_micro_batch"] > 0 and alone.times_s["dp_comm_exposed"] == 0
    assert piped.times_s["dp_comm_per_micro_batch"] == 0 and piped.times_s["dp_comm_exposed"] > 0


def has_config(engine: str, job: TrainingJob) -> bool:
    """Whether the engine has model code for every piece of the job's model."""
    rules = [rule for rule in get_engine(engine).rules if rule.name == "model_architecture"]
    grid = LayoutGrid.from_layouts([Layout(dp=1)])  # the rule reads the model alone
    return all(bool(np.all(rule.check(job, grid))) for rule in rules)


SEARCH_JOBS = {
    "plate": plate_job(),
    "llama3-70b on 1,024": plate_job(1024, "llama3-70b"),
    "mixtral-8x7b on 256": plate_job(256, "mixtral-8x7b", global_batch=1024, seq_len=4096),
}


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("job_name", sorted(SEARCH_JOBS))
def test_each_engines_optimum_keeps_its_rules_and_exports(engine: str, job_name: str) -> None:
    job = SEARCH_JOBS[job_name]
    result = optimize(
        Request(job, engine=engine_or_none(engine), explain=False),
        SolveSettings(time_limit_s=120),
    )
    if not has_config(engine, job):
        # e.g. torchtitan 0.3.0's llama3 model has no MoE layers for Mixtral: proved infeasible (the conflict is worked out when explanations are asked for)
        assert result.status == "infeasible" and result.best is None
        return
    assert result.status == "optimal" and result.best is not None
    layout = result.best.layout
    assert violations(get_engine(engine), job, layout) == []
    assert export(get_engine(engine), job, layout).text


def test_an_engine_that_cannot_run_the_model_says_why() -> None:
    job = SEARCH_JOBS["mixtral-8x7b on 256"]
    result = optimize(
        Request(job, engine=get_engine("torchtitan")),
        SolveSettings(time_limit_s=120),
    )
    assert result.status == "infeasible"
    (conflict,) = result.conflict
    assert conflict.name == "engine_model_architecture"
    assert conflict.description.startswith("torchtitan builds the model with its llama3 model")
    # and names the piece it lacks
    assert conflict.description.endswith("mixtral-8x7b has mixture-of-experts layers")


def test_relaxing_an_engine_rule_is_said_in_the_engines_words() -> None:
    # the plate under Megatron-LM: its schedules rule is weighed, in its own words (it no
    # longer binds: the interleaved schedule hides the data-parallel sync chunk by chunk)
    result = optimize(
        Request(plate_job(), engine=get_engine("megatron")),
        SolveSettings(time_limit_s=120),
    )
    words = {relaxation.name: relaxation.description for relaxation in result.relaxations}
    assert "Megatron-LM runs only the pipeline schedules" in words["engine_schedule"]


def _documented_traffic() -> dict[tuple[str, str], list[str]]:
    """docs/cost-model.md's engine table: (engine, precision) -> its cells."""
    text = (Path(__file__).parent.parent / "docs" / "cost-model.md").read_text()
    section = text.split("### Engines:", 1)[1].split("###", 1)[0]
    rows: dict[tuple[str, str], list[str]] = {}
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        first, *cells = [cell.strip() for cell in line.strip("|").split("|")]
        precision = "fp16" if "(fp16)" in first else "bf16"
        for name in re.findall(r"`(\w+)`", first):
            rows[(name, precision)] = cells
    return rows


def test_the_documented_engine_table_is_the_code() -> None:
    rows = _documented_traffic()
    assert {name for name, _ in rows} == set(ENGINES)
    for (name, precision), cells in rows.items():
        traffic = engine_traffic(get_engine(name), precision)
        per_step, per_micro_batch, with_pp, exchange, unit = cells
        assert [float(v) for v in per_step.split("/")] == traffic["gradient_volumes_per_step"]
        assert [float(v) for v in per_micro_batch.split("/")] == traffic[
            "gradient_volumes_per_micro_batch"
        ]
        assert (with_pp == "as without") == traffic["per_micro_batch_sync_with_pp"]
        assert exchange.startswith(str(traffic["cp_exchange"]).replace("_", "-"))
        assert ("hidden" in exchange) == (traffic.get("cp_overlap_fraction") == 1.0)
        assert unit == traffic["zero3_gather_unit"]


def test_torchtitan_chunks_the_loss_so_its_logits_hold_less() -> None:
    """torchtitan 0.3.0 computes the loss in 8 sequence chunks, each holding its bf16 logits
    (2 B) and the backward of cross_entropy(logits.float()) (12 B): 14 / 8 B per logit."""
    titan = engine_assumptions(get_engine("torchtitan"), CostAssumptions())
    assert titan.logits_bytes_per_value == pytest.approx(1.75)
    assert engine_assumptions(get_engine("megatron"), CostAssumptions()).logits_bytes_per_value == 4
    job = plate_job(8, "llama3-8b", global_batch=16)
    layout = Layout(tp=1, pp=1, dp=8, micro_batch=2, zero=3, recompute="selective")
    generic = evaluate(
        job, layout, "standard", engine_assumptions(get_engine("generic"), CostAssumptions())
    )
    chunked = evaluate(job, layout, "standard", titan)
    # the only rank holds the logits: 2 x 8192 tokens x 128,256 values x (4 - 1.75) B
    saved = 2 * 8192 * 128256 * (4 - 1.75)
    assert generic.memory.activations - chunked.memory.activations == pytest.approx(saved)


def test_torchtitan_runs_its_pointwise_ops_eager_unless_the_request_says_otherwise() -> None:
    # torchtitan 0.3.0 compiles nothing by default: its rotary and SwiGLU run as eager ops;
    # the Megatron-Core engines fuse them; a request's own value wins
    costs = CostAssumptions()
    assert engine_assumptions(get_engine("torchtitan"), costs).eager_pointwise
    assert not engine_assumptions(get_engine("megatron"), costs).eager_pointwise
    compiled = CostAssumptions(eager_pointwise=False)
    assert not engine_assumptions(get_engine("torchtitan"), compiled).eager_pointwise
    job = plate_job(16, "llama3-8b", global_batch=8, seq_len=8192)
    layout = Layout(tp=8, pp=1, zero=1)
    titan = evaluate(job, layout, "standard", engine_assumptions(get_engine("torchtitan"), costs))
    fused = evaluate(
        job, layout, "standard", engine_assumptions(get_engine("torchtitan"), compiled)
    )
    assert titan.times_s["matmul"] > fused.times_s["matmul"]
    assert titan.mfu < fused.mfu


def test_fsdp2_hides_its_gathers_under_the_whole_micro_batch() -> None:
    # torchtitan's FSDP2 prefetches the next block's all-gather under this one's compute:
    # the engine sets zero3_overlap_fraction 1, the profile's default elsewhere stays 0.5
    costs = CostAssumptions()
    assert engine_assumptions(get_engine("torchtitan"), costs).zero3_overlap_fraction == 1.0
    assert engine_assumptions(get_engine("megatron"), costs).zero3_overlap_fraction == 0.5
    mine = CostAssumptions(zero3_overlap_fraction=0.2)  # a request's own value wins
    assert engine_assumptions(get_engine("torchtitan"), mine).zero3_overlap_fraction == 0.2
    # priced: Llama 3 70B under ZeRO-3 on 64 H100 with tiny micro-batches, communication-bound
    job = plate_job(64, "llama3-70b", global_batch=64, seq_len=2048)
    layout = Layout(tp=1, pp=1, zero=3, recompute="full")
    titan = evaluate(job, layout, "standard", engine_assumptions(get_engine("torchtitan"), costs))
    half = evaluate(
        job,
        layout,
        "standard",
        engine_assumptions(get_engine("torchtitan"), CostAssumptions(zero3_overlap_fraction=0.5)),
    )
    assert titan.times_s["zero3_per_micro_batch"] < half.times_s["zero3_per_micro_batch"]


def test_each_engine_prices_its_own_loss_kernels() -> None:
    """Megatron-LM's unfused cross entropy (the default, 52 B a logit), torchtitan's
    cross_entropy(logits.float()) (36 B), Megatron-Bridge's Transformer Engine kernel on the
    bf16 logits in place (10 B): docs/cost-model.md, "The loss"."""
    by_engine = {
        name: engine_assumptions(get_engine(name), CostAssumptions()).loss_bytes_per_logit
        for name in ("megatron", "generic", "deepspeed", "torchtitan", "nemo")
    }
    assert by_engine == {
        "megatron": 52,
        "generic": 52,
        "deepspeed": 52,
        "torchtitan": 6 + 8 + 4 + 12 + 6,
        "nemo": 2 + 4 + 4,
    }
    # a request's own figure wins over the engine's
    mine = CostAssumptions(loss_bytes_per_logit=20)
    assert engine_assumptions(get_engine("nemo"), mine).loss_bytes_per_logit == 20


def test_megatron_cores_interleaved_schedule_hides_its_pipeline_sends() -> None:
    # overlap_p2p_comm (Megatron-LM's default since 2023-10, with interleaving only): the
    # megatron and nemo engines price the sends of a vpp > 1 layout hidden, less the
    # contention's share; without interleaving, and under generic, they stay exposed
    job = plate_job(64, "llama3-70b", global_batch=64)
    interleaved, plain = Layout(tp=8, pp=4, vpp=5, zero=1), Layout(tp=8, pp=4, vpp=1, zero=1)
    generic = CostAssumptions()
    megatron = engine_assumptions(get_engine("megatron"), generic)
    assert megatron.pp_p2p_interleaved_overlap_fraction == 1.0
    assert engine_assumptions(get_engine("nemo"), generic).pp_p2p_interleaved_overlap_fraction == 1
    assert generic.pp_p2p_interleaved_overlap_fraction == 0

    def sends(layout: Layout, a: CostAssumptions) -> float:
        return evaluate(job, layout, "standard", a).times_s["pp_p2p_per_micro_batch"]

    slowdown = generic.overlap_compute_slowdown
    assert sends(interleaved, megatron) == pytest.approx(sends(interleaved, generic) * slowdown)
    assert sends(plain, megatron) == pytest.approx(sends(plain, generic))
    assert sends(plain, generic) > 0
