"""Profile standard end to end: hand-checked figures of the plate, monotonicity in every
knob it prices, and one-layout pricing agreeing with grid pricing."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from models.errors import InvalidSpec
from models.hardware import ClusterSpec
from models.job import TrainingJob
from models.layout import Layout, Recompute, Schedule, resolve_layout
from models.presets import gpu_preset, model_preset
from models.training import TrainingSpec
from optimizer.costmodel.assumptions import CostAssumptions
from optimizer.costmodel.grid import LayoutGrid
from optimizer.costmodel.profiles import evaluate, profile_named
from optimizer.costmodel.standard.memory import stage_layers as mem_stage_layers
from tests.helpers import plate_job

PLATE = Layout(tp=8, pp=16, vpp=4, zero=2)


def standard(job: TrainingJob, layout: Layout, **assumptions: float):
    return evaluate(job, layout, "standard", CostAssumptions(**assumptions))


def test_plate_weights_are_the_second_stages() -> None:
    # P_layer = 16384*(16384 + 2048) + 16384^2 + 3*16384*53248 = 3,187,671,040, / tp 8 =
    # 398,458,880 a layer. The first stage holds 7 layers (126 + 2 = 128 slots on 16 stages)
    # plus the input embedding 128256*16384/8 = 262,668,288: 3,051,880,448 params; the second
    # holds 8 layers, 3,187,671,040 params, and 19.25 micro-batches in flight against the
    # first's 19.75: 8 x 19.25 = 154 layer-activations against 7 x 19.75 = 138.25, so it is
    # the worst device. 2 B a weight = 6,375,342,080 B; ZeRO-2 over dp 128: fp32 gradients
    # 4 * 3,187,671,040 / 128 = 99,614,720 B.
    estimate = standard(plate_job(), PLATE)
    assert estimate.memory.weights == pytest.approx(6_375_342_080)
    assert estimate.memory.gradients == pytest.approx(99_614_720)
    # the bubble is the plate's: (15/4) / (16 + 15/4) = 0.18987
    assert estimate.bubble == pytest.approx(0.18987, abs=1e-5)


def test_workshop_figures_unchanged() -> None:
    estimate = evaluate(plate_job(), PLATE, "workshop")
    assert round(estimate.memory.total / 1e9, 2) == 78.56
    assert round(estimate.mfu, 4) == 0.4255


def test_mfu_counts_model_flops_and_hfu_adds_recompute() -> None:
    job = plate_job()
    none = standard(job, PLATE.model_copy(update={"recompute": Recompute.NONE}))
    full = standard(job, PLATE.model_copy(update={"recompute": Recompute.FULL}))
    assert none.hardware_flops_utilization == pytest.approx(none.mfu)
    assert full.mfu < none.mfu
    # per token: N = 126 * 3,187,671,040 = 401,646,551,040 active layer weights, head
    # V h = 2,101,346,304, attention L*q*s = 126*16384*8192 = 16,911,433,728
    # model 6*(N + V h) + 12*L*q*s = 2,625,424,591,872; full recompute adds the forward
    # 2*N + 4*L*q*s = 870,938,836,992
    ratio = 1 + 870_938_836_992 / 2_625_424_591_872
    assert full.hardware_flops_utilization == pytest.approx(full.mfu * ratio)
    steps = [step.mfu for step in none.mfu_steps]
    assert steps == sorted(steps, reverse=True)


def test_more_tensor_parallelism_less_memory() -> None:
    job = plate_job(gpus=1024, model="llama3-70b")
    totals = [standard(job, Layout(tp=tp, pp=8, zero=1)).memory.total for tp in (1, 2, 4, 8)]
    assert totals == sorted(totals, reverse=True)


def test_recompute_orders_memory() -> None:
    job = plate_job()
    memories = [
        standard(job, PLATE.model_copy(update={"recompute": r})).memory.activations
        for r in (Recompute.NONE, Recompute.SELECTIVE, Recompute.FULL)
    ]
    assert memories == sorted(memories, reverse=True)


def long_job(seq_len: int = 131072) -> TrainingJob:
    return plate_job(global_batch=128, seq_len=seq_len)


def test_llama3_long_context_all_gather_by_hand() -> None:
    # Llama 3 405B at 131,072 tokens, tp 8 x cp 16 (span 128 GPUs: the network). Per layer per
    # micro-batch each rank gathers 15/16 of the sequence's K and V for its one KV head
    # (2 * 8 * 128 / 8 = 256 values a token, bf16) three times (gather forward, gather and
    # reduce-scatter backward): 3 * 15/16 * 131072 * 256 * 2 B = 188,743,680 B at 37 GB/s
    # (50 GB/s NIC x 0.74) = 5.101180 ms, plus the latency of the algorithm NCCL's tuner
    # picks. One rank a node: the ring with Simple, 3 * (8.4 + 15 * 14.0) us = 655.2 us, in
    # all 5.756380 ms; PAT's lower latency, 3 * (8.0 + log2(16) * 14.0 / 3.5 + 16 * 2.8) us =
    # 206.4 us, comes at 0.75 of the bandwidth: 7.008 ms; LL128 at 0.92 of it and 3 * (14.0 +
    # 15 * 8.5) us: 5.969 ms. Llama 3 states the all-gather is exposed, so nothing hides.
    layout = Layout(tp=8, pp=16, cp=16, vpp=4, zero=2, recompute=Recompute.SELECTIVE)
    estimate = standard(long_job(), layout)
    assert CostAssumptions().cp_overlap_fraction == 0
    assert estimate.times_s["cp_comm"] == pytest.approx(188_743_680 / 37e9 + 655.2e-6)


def test_context_parallelism_shards_activations_and_costs_an_exchange() -> None:
    job = long_job()
    by_cp = [standard(job, Layout(tp=8, pp=16, cp=cp, zero=1)) for cp in (2, 4, 8, 16)]
    activations = [e.memory.activations for e in by_cp]
    assert activations == sorted(activations, reverse=True)
    # with nothing hidden, the exchange per layer grows with cp (more of the sequence to fetch
    # per token of its own... and the group leaves the node)
    exposed = [
        standard(job, Layout(tp=8, pp=16, cp=cp, zero=1), cp_overlap_fraction=0).times_s["cp_comm"]
        for cp in (2, 4, 8, 16)
    ]
    assert all(x > 0 for x in exposed)


def gb200_job(gpus: int, domain: int, model: str, **training: int) -> TrainingJob:
    """A job on GB200 trays of 4 GPUs sharing NVLink domains of `domain` GPUs."""
    cluster = ClusterSpec(gpus=gpus, gpu=gpu_preset("gb200"), gpus_per_node=4, nvlink_domain=domain)
    return TrainingJob(
        model=model_preset(model), cluster=cluster, training=TrainingSpec(**training)
    )


def test_cp_exchange_on_nvlink_when_the_domain_holds_it() -> None:
    # GB200: tp 4 x cp 8 = 32 GPUs fit a 64-GPU NVLink domain (16 trays of a rack), not a
    # 4-GPU tray; 72-GPU domains leave ranks 64-95 straddling two racks, so the network
    def job(domain: int) -> TrainingJob:
        return gb200_job(576, domain, "llama3-70b", global_batch=36, seq_len=131072)

    layout = Layout(tp=4, pp=2, cp=8, zero=1)
    tray = standard(job(4), layout, cp_overlap_fraction=0)
    racks = standard(job(64), layout, cp_overlap_fraction=0)
    straddling = standard(job(72), layout, cp_overlap_fraction=0)
    assert racks.times_s["cp_comm"] < tray.times_s["cp_comm"] / 5
    assert racks.mfu > tray.mfu
    # twice the network bandwidth: the worst-placed straddling group (span 32 from offset 64 of
    # a 72-GPU rack, stride 4) holds 8 / 4 = 2 ranks in its first rack, so the ring's channels
    # leave that rack through 2 NICs where the tray's leave through one; and the latency
    # differs: the straddling groups' rings cross between racks once, 8.4 + 6 * 3.4 + 14.0 =
    # 42.8 us a pass, the tray's, one rank a tray, seven times, 8.4 + 7 * 14.0 = 106.4 us (a
    # pass moves 117 MB: PAT's and LL128's lower latencies do not pay for their lower
    # bandwidth); 3 passes
    tray_transfer_s = tray.times_s["cp_comm"] - 3 * 106.4e-6
    assert straddling.times_s["cp_comm"] == pytest.approx(tray_transfer_s / 2 + 3 * 42.8e-6)


def test_zero3_gets_slower_as_gpus_double() -> None:
    # fixed global batch, micro-batch 1: doubling dp halves each GPU's tokens while its
    # per-micro-batch gather traffic, 3 * 2 B * P/t * (g-1)/g, stays put
    def mfu(gpus: int) -> float:
        job = plate_job(gpus=gpus, model="llama3-70b", global_batch=gpus // 8)
        return standard(job, Layout(tp=8, zero=3)).mfu

    assert mfu(256) > mfu(512) > mfu(1024)


def test_zero3_charges_traffic_that_zero1_does_not() -> None:
    job = plate_job(gpus=1024, model="llama3-70b")
    zero1 = standard(job, Layout(tp=8, pp=4, zero=1))
    zero3 = standard(job, Layout(tp=8, pp=4, zero=3), zero3_overlap_fraction=0)
    assert zero3.memory.weights < zero1.memory.weights
    assert zero3.times_s["zero3_per_micro_batch"] > 0
    assert zero3.mfu < zero1.mfu


def test_zero3_list_copies_cost_one_copy_a_rank_a_collective() -> None:
    # the plate's model on one stage, tp 8: a ZeRO-3 group of 16384 / 8 = 2,048 ranks.
    # Module by module, a Llama layer has 6 + 3 (gated MLP) = 9 collectives a pass, three
    # passes a micro-batch (gather forward, gather backward, reduce-scatter): 126 x 9 x 3 =
    # 3,402 collectives, each copying 2,048 tensors at 1 us: 6.967296 s more per micro-batch
    job, layout = plate_job(), Layout(tp=8, pp=1, zero=3)
    settings = {"zero3_overlap_fraction": 0, "zero3_gather_unit": "module"}
    flat = standard(job, layout, **settings)
    lists = standard(job, layout, zero3_copy_per_rank_s=1e-6, **settings)
    extra_s = lists.times_s["zero3_per_micro_batch"] - flat.times_s["zero3_per_micro_batch"]
    assert extra_s == pytest.approx(126 * 9 * 3 * 2048 * 1e-6)
    assert lists.mfu < flat.mfu


# 2021 DeepSpeed's ZeRO-3 on a Megatron GPT layer, nothing hidden (the SC21 rows' counts)
DEEPSPEED_2021_COUNTS = {
    "zero3_overlap_fraction": 0,
    "zero3_gathers_per_layer": 4,
    "zero3_reduce_scatters_per_layer": 12,
}


def test_zero3_counts_from_the_code_set_the_collectives_a_layer() -> None:
    # 2021 DeepSpeed on a Megatron GPT layer: 4 gathers a pass (weights over the persistence
    # threshold), 12 reduce-scatters (every parameter): 2 x 4 + 12 = 20 collectives a layer
    # and micro-batch, each copying 2,048 tensors at 1 us, on the plate's 126 layers
    job, layout, settings = plate_job(), Layout(tp=8, pp=1, zero=3), DEEPSPEED_2021_COUNTS
    flat = standard(job, layout, **settings)
    lists = standard(job, layout, zero3_copy_per_rank_s=1e-6, **settings)
    extra_s = lists.times_s["zero3_per_micro_batch"] - flat.times_s["zero3_per_micro_batch"]
    assert extra_s == pytest.approx(126 * 20 * 2048 * 1e-6)
    # JSON's integral numbers are counts too (a schema-valid 12.0), fractions are not
    counts = {"zero3_gathers_per_layer": 4.0, "zero3_reduce_scatters_per_layer": 12.0}
    assert CostAssumptions.model_validate(counts).zero3_reduce_scatters_per_layer == 12
    with pytest.raises(ValidationError):
        CostAssumptions.model_validate({"zero3_gathers_per_layer": 2.5})
    # the bytes do not depend on the count; the latency grows with the collectives
    module = standard(job, layout, zero3_overlap_fraction=0, zero3_gather_unit="module")
    assert module.times_s["zero3_per_micro_batch"] > flat.times_s["zero3_per_micro_batch"]


def test_zero3_list_views_cost_a_gather_and_a_scatter_apiece_a_rank() -> None:
    # 2021 DeepSpeed's counts on the plate's 126 layers, 2,048 ranks: 2 x 4 all-gathers and
    # 12 reduce-scatters a layer and micro-batch; each builds one view a rank, at 3 us a
    # gather's and 5 us a reduce-scatter's: 126 x 2,048 x (8 x 3 + 12 x 5) us more
    job, layout, settings = plate_job(), Layout(tp=8, pp=1, zero=3), DEEPSPEED_2021_COUNTS
    flat = standard(job, layout, **settings)
    views = standard(
        job,
        layout,
        zero3_gather_views_per_rank_s=3e-6,
        zero3_scatter_views_per_rank_s=5e-6,
        **settings,
    )
    extra_s = views.times_s["zero3_per_micro_batch"] - flat.times_s["zero3_per_micro_batch"]
    assert extra_s == pytest.approx(126 * 2048 * (8 * 3e-6 + 12 * 5e-6))
    # an engine gathering into one flat tensor builds none: nothing without ZeRO-3 either
    zero1 = Layout(tp=8, pp=1, zero=1)
    assert standard(job, zero1, zero3_scatter_views_per_rank_s=5e-6).mfu == pytest.approx(
        standard(job, zero1).mfu
    )


def test_zero3_buffer_bytes_cost_each_gathered_pass_and_the_scatter_at_hbm_bandwidth() -> None:
    # Llama 3 405B at tp 8: a layer's matrices split 8 ways, Q 128 x 128 wide, K and V 8 x
    # 128, the gated MLP 53,248 wide (norms, 32,768 parameters, left out: 1e-4 of it). No
    # recompute: the forward and the backward gather each layer once, so a micro-batch moves
    # (2 x 6 + 8) bytes a parameter over H100's 3,350 GB/s, on each of the 126 layers
    job, layout = plate_job(), Layout(tp=8, pp=1, zero=3)
    h, q, kv, f = 16384, 128 * 128, 8 * 128, 53248
    layer_params = (h * (q + 2 * kv) + q * h + 3 * h * f) / 8
    flat = standard(job, layout, **DEEPSPEED_2021_COUNTS)
    buffers = standard(
        job,
        layout,
        zero3_gather_buffer_bytes_per_param=6,
        zero3_scatter_buffer_bytes_per_param=8,
        **DEEPSPEED_2021_COUNTS,
    )
    extra_s = buffers.times_s["zero3_per_micro_batch"] - flat.times_s["zero3_per_micro_batch"]
    assert extra_s == pytest.approx(126 * layer_params * (2 * 6 + 8) / 3350e9, rel=1e-4)


def test_interleaving_trades_bubble_for_memory_and_sends() -> None:
    job = plate_job()
    plain = standard(job, Layout(tp=8, pp=16, vpp=1, zero=2))
    interleaved = standard(job, Layout(tp=8, pp=16, vpp=4, zero=2))
    assert interleaved.bubble < plain.bubble
    assert interleaved.memory.activations > plain.memory.activations
    assert interleaved.times_s["pp_p2p_per_micro_batch"] == pytest.approx(
        4 * plain.times_s["pp_p2p_per_micro_batch"]
    )


def test_schedules() -> None:
    job = plate_job()
    one_f_one_b = standard(job, Layout(tp=8, pp=16, zero=2))
    zb = standard(job, Layout(tp=8, pp=16, zero=2, schedule=Schedule.ZERO_BUBBLE))
    dualpipe = standard(job, Layout(tp=8, pp=16, zero=2, schedule=Schedule.DUALPIPE))
    assert zb.bubble < one_f_one_b.bubble and dualpipe.bubble < one_f_one_b.bubble
    assert zb.memory.activations == pytest.approx(one_f_one_b.memory.activations)
    assert dualpipe.memory.weights == pytest.approx(2 * one_f_one_b.memory.weights)
    with pytest.raises(InvalidSpec, match="pp\\(15\\) must be even"):
        resolve_layout(Layout(tp=8, pp=15, zero=2, schedule=Schedule.DUALPIPE), plate_job(15 * 8))


def test_uneven_layers_set_the_pace() -> None:
    # 126 layers on pp 5: neither 126/5 nor 128/5 whole, so the busiest devices hold
    # ceil(126/5) = 26 layers, and the pipeline runs at their pace: 26/25.2 slower than even
    job = plate_job(gpus=5 * 8 * 64)
    estimate = evaluate(job, Layout(tp=8, pp=5), "standard")
    assert any("busiest devices hold 26 layers" in w for w in estimate.warnings)
    steps = {step.name: step.mfu for step in estimate.mfu_steps}
    ratio = steps["kernel efficiency"] / steps["after uneven stages"]
    # balanced time: 126 layers + the head over 5; busiest: 26 layers + the head (last stage)
    layer, head = (
        estimate.times_s["matmul"] + estimate.times_s["attention"],
        estimate.times_s["head"],
    )
    assert ratio == pytest.approx((26 * layer + head) / ((126 * layer + head) / 5))


LAYOUTS = [
    PLATE,
    Layout(tp=8, pp=16, vpp=2, zero=1, recompute=Recompute.SELECTIVE),
    Layout(tp=8, pp=16, cp=2, zero=3, recompute=Recompute.FULL, placement=("tp", "pp", "cp", "dp")),
    Layout(tp=4, pp=16, cp=4, zero=2, schedule=Schedule.ZERO_BUBBLE),
    Layout(tp=8, pp=16, zero=0, schedule=Schedule.DUALPIPE),
    Layout(tp=8, pp=2, cp=8, zero=3, placement=("cp", "tp", "pp", "dp")),
]


def test_grid_prices_equal_one_layout_prices() -> None:
    job = plate_job()
    resolved = [resolve_layout(layout, job) for layout in LAYOUTS]
    profile = profile_named("standard")
    grid = profile.price_grid(job, LayoutGrid.from_layouts(resolved), CostAssumptions())
    one_by_one = [profile.price(job, layout, CostAssumptions()) for layout in resolved]
    assert grid.memory_bytes == pytest.approx([e.memory.total for e in one_by_one])
    assert grid.mfu == pytest.approx([e.mfu for e in one_by_one])
    assert grid.bubble == pytest.approx([e.bubble for e in one_by_one])


def test_stage_layers_uneven_ceiling() -> None:
    layers = mem_stage_layers(126, 5, 1)
    assert (layers.first, layers.middle, layers.last) == (26, 26, 26)
    # 126 layers on 4 stages x 4 chunks: ceil(126/16) = 8 a chunk, 32 a device
    assert mem_stage_layers(126, 4, 4).middle == 32
    # 128 chunks for 126 layers: the embedding and the loss a chunk each, 1 + 2 x 62 + 1
    account_for = mem_stage_layers(126, 64, 2)
    assert (account_for.first, account_for.middle, account_for.last) == (1, 2, 1)
    assert bool(account_for.valid)
    assert not bool(mem_stage_layers(126, 64, 3).valid)  # 192 chunks: some hold nothing


def test_tensor_parallelism_across_an_nvl72_domain_is_nvlink() -> None:
    # tp 16 over 4-GPU trays: beyond a node, inside a 64-GPU NVLink domain. Standard prices it
    # on NVLink and does not warn; cut the domain back to the tray and the network is charged.
    def job(domain: int) -> TrainingJob:
        return gb200_job(128, domain, "llama3-405b", global_batch=64, seq_len=8192)

    layout = Layout(tp=16, pp=8, zero=1)
    nvlink, tray = standard(job(64), layout), standard(job(4), layout)
    assert not any("beyond a node" in w for w in nvlink.warnings)
    assert any("beyond a node" in w for w in tray.warnings)
    # 4 collectives * 2*15/16 * 8192 * 16384 * 2 B at 800 GB/s against the network's: 4 of the
    # group's ranks on each tray, so its ring spreads over their 4 NICs, 4 x 50 x 0.74 GB/s;
    # plus the ring latency of 8 sequence-parallel collectives of 15 steps each: NVLink
    # 8 * (8.4 + 15 * 3.4) us = 475.2 us; over 4 trays 3 steps cross the network,
    # 8 * (8.4 + 12 * 3.4 + 3 * 14.0) us = 729.6 us
    payload = 4 * 2 * 15 / 16 * 8192 * 16384 * 2
    assert nvlink.times_s["tp_comm"] == pytest.approx(payload / 800e9 + 475.2e-6)
    assert tray.times_s["tp_comm"] == pytest.approx(payload / (4 * 37e9) + 729.6e-6)
    # 128 GPUs on 72-GPU racks run as two segments of 64 (domain_segment_gpus): NVLink again
    assert standard(job(72), layout).times_s["tp_comm"] == nvlink.times_s["tp_comm"]
    # Two whole racks (144 GPUs) hold 16-GPU groups only up to rank 63: the straddling ones
    # set the pace, ranks 64-79 with 8 in each rack, so the ring leaves a rack through 8 NICs
    # (gcd(16, 72) = 8 GPUs at the edge), with one step of 15 between the two racks:
    # 8 * (8.4 + 14 * 3.4 + 14.0) us = 560 us
    racks = gb200_job(144, 72, "llama3-405b", global_batch=64, seq_len=8192)
    straddling = standard(racks, Layout(tp=16, pp=9, zero=1))
    assert straddling.times_s["tp_comm"] == pytest.approx(payload / (8 * 37e9) + 560e-6)
    # groups 0-15 ... 48-63 sit in the first rack; 64-79 is the first to cross into the next
    assert any("ranks 64-79 straddle two domains" in w for w in straddling.warnings)


def test_fixed_buckets_pay_the_ring_latency_on_every_bucket() -> None:
    # The plate (tp 8, pp 16, dp 128, one GPU of each node in a data-parallel group): the
    # busiest rank is a middle one, 8 layers of 398,458,880 parameters = 3,187,671,040, whose
    # reduce-scatter and all-gather move 2 x 127/128 x 2 B of each over one NIC at 37 GB/s:
    # 341.95 ms either way. Grown buckets hold max(40M, 1M x 128) = 128M: 25 of them, 50
    # collectives; fixed 40M buckets (Apex's DistributedFusedAdam): 80, 160 collectives. Each
    # collective over 128 nodes, one rank each, takes what NCCL's tuner finds quickest: the
    # ring with Simple (8.4 + 127 x 14 = 1786.4 us), LL128 (0.92 of the bandwidth; 14.0 + 127 x
    # 8.5 = 1093.5 us) or PAT (0.75 of it; 8 + log2(128) x 14 / 3.5 + 128 x 2.8 = 394.4 us).
    transfer_s = 2 * 127 / 128 * 2 * 3_187_671_040 / 37e9

    def nccl_s(collectives: int) -> float:
        return min(
            transfer_s + collectives * 1786.4e-6,
            transfer_s / 0.92 + collectives * 1093.5e-6,
            transfer_s / 0.75 + collectives * 394.4e-6,
        )

    # 50 collectives take LL128 (426.4 ms), 160 PAT (519.0 ms)
    assert nccl_s(50) == pytest.approx(transfer_s / 0.92 + 50 * 1093.5e-6)
    assert nccl_s(160) == pytest.approx(transfer_s / 0.75 + 160 * 394.4e-6)
    settings = {"dp_overlap_microbatches": 0}
    grown = standard(plate_job(), PLATE, **settings)
    fixed = standard(plate_job(), PLATE, dp_bucket_grows_with_dp=False, **settings)
    extra_s = fixed.times_s["dp_comm_exposed"] - grown.times_s["dp_comm_exposed"]
    assert extra_s == pytest.approx(nccl_s(160) - nccl_s(50))
    assert fixed.mfu < grown.mfu


def test_a_cluster_of_partial_nodes_is_priced_and_says_so() -> None:
    # 16,384 GPUs in nodes of 3 is 5,461.33 nodes: a typo more often than a cluster
    job = plate_job()
    odd = job.model_copy(update={"cluster": job.cluster.model_copy(update={"gpus_per_node": 3})})
    layout = Layout(tp=2, pp=16, zero=1)
    warned = [w for w in standard(odd, layout).warnings if "not whole nodes" in w]
    assert warned == [
        "16,384 GPUs are not whole nodes of 3 (5,461.33 nodes): groups are placed and their "
        "links priced as if every node were full; check gpus_per_node"
    ]
    assert not [w for w in standard(job, layout).warnings if "not whole nodes" in w]
    # an NVLink domain larger than a node is not a node: 256 GB200 in trays of 4 on NVL72
    # racks are whole nodes, though not whole racks
    rack = job.model_copy(
        update={
            "cluster": ClusterSpec(
                gpus=256, gpu=gpu_preset("gb200"), gpus_per_node=4, nvlink_domain=72
            ),
            "training": job.training.model_copy(update={"global_batch": 256}),
        }
    )
    assert not [w for w in standard(rack, Layout(tp=4, pp=4)).warnings if "whole nodes" in w]
