"""Profile standard's kernel and collective terms against figures worked by hand from their
sources (docs/cost-model.md, "Kernels" and "Collective latency")."""

from __future__ import annotations

import numpy as np
import pytest

from models.job import TrainingJob
from models.layout import Layout
from models.presets import gpu_preset
from models.transformer import TransformerSpec
from optimizer.costmodel import CostAssumptions, domains_spanned, evaluate
from optimizer.costmodel.standard import collectives as coll
from optimizer.costmodel.standard import kernels as kern
from optimizer.costmodel.standard.compute import kernel_efficiency
from optimizer.costmodel.standard.links import all_to_all_bytes_s, job_links, link_bytes_s
from optimizer.engines import engine_assumptions, get_engine
from tests.helpers import plate_job


def test_wave_efficiency_by_hand() -> None:
    # 8192 x 2048 output in 128 x 256 tiles: 64 x 8 = 512 tiles; on 132 SMs that is
    # ceil(512 / 132) = 4 waves of 132, 512 / 528 busy
    assert kern.wave_efficiency(8192, 2048, 132, 128, 256) == pytest.approx(512 / 528)
    # a whole number of waves loses nothing
    assert kern.wave_efficiency(128 * 12, 256 * 11, 132, 128, 256) == pytest.approx(1.0)


def test_wave_quantisation_is_a_what_if_that_only_slows_gemms() -> None:
    job, layout = plate_job(), Layout(tp=8, pp=16, vpp=4, zero=1)
    off = evaluate(job, layout, "standard")
    on = evaluate(job, layout, "standard", CostAssumptions(gemm_wave_quantization=True))
    assert not CostAssumptions().gemm_wave_quantization
    assert on.times_s["matmul"] > off.times_s["matmul"]
    assert on.times_s["tp_comm"] == off.times_s["tp_comm"]


def test_short_reductions_by_hand() -> None:
    # a tile's main loop over 2,048 elements against a fixed cost worth 275 of them
    assert kern.reduction_efficiency(2048, 275) == pytest.approx(2048 / 2323)
    # Llama 3 8B at tp 1 on 8,192 tokens: QKV (N 6,144, K 4,096), output (4,096, 4,096), gate
    # and up (28,672, 4,096), down (4,096, 14,336), each pass a third of its GEMM's FLOPs,
    # reducing over K, N and the 8,192 tokens in turn
    model = plate_job(8, "llama3-8b").model
    shapes = [(6144, 4096, 6144 * 4096), (4096, 4096, 4096**2), (28672, 4096, 28672 * 4096),
              (4096, 14336, 4096 * 14336)]  # fmt: skip
    total = sum(w for _, _, w in shapes)
    seconds = sum(w / total / 3 * sum((d + 275) / d for d in (k, n, 8192)) for n, k, w in shapes)
    got = kern.layer_reduction_efficiency(kern.gemm_passes(model, 8192, 1, 1), 275)
    assert got == pytest.approx(1 / seconds)


def test_short_reductions_leave_the_plate_as_it_is_and_slow_high_tp_small_models() -> None:
    # the kernel efficiency is the plate's, so its own shapes keep it: Llama 3 405B, tp 8
    # (a what-if, off by default: CostAssumptions' field says why)
    job, layout = plate_job(), Layout(tp=8, pp=16, cp=1, vpp=4, micro_batch=1, zero=2)
    on = CostAssumptions(gemm_reduction_overhead_elements=275)
    assert CostAssumptions().gemm_reduction_overhead_elements == 0
    plate_on, plate_off = evaluate(job, layout, "standard", on), evaluate(job, layout, "standard")
    assert plate_on.times_s["matmul"] == pytest.approx(plate_off.times_s["matmul"])
    # Llama 3 8B at tp 8: q / tp = 512 and f / tp = 1,792 deep output and down projections
    small, tp8 = plate_job(64, "llama3-8b"), Layout(tp=8, pp=1, cp=1, vpp=1, micro_batch=1, zero=1)
    slower = evaluate(small, tp8, "standard", on).times_s["matmul"]
    assert slower > evaluate(small, tp8, "standard").times_s["matmul"] * 1.05


def test_kernel_efficiency_follows_each_gpus_matmul_ceiling() -> None:
    # the plate's 0.6 on H100 (ceiling 0.803), A100's ceiling 0.869: 0.6 x 0.869 / 0.803
    h100 = plate_job()
    a100 = h100.model_copy(
        update={"cluster": h100.cluster.model_copy(update={"gpu": gpu_preset("a100-80gb")})}
    )
    assert kernel_efficiency(h100, CostAssumptions()) == pytest.approx(0.6)
    assert kernel_efficiency(a100, CostAssumptions()) == pytest.approx(0.6 * 0.869 / 0.803)
    assert kernel_efficiency(a100, CostAssumptions(kernel_efficiency=0.5)) == 0.5


def test_worst_placed_group_sets_the_domains_a_ring_crosses() -> None:
    # 8-GPU nodes: tp 8 packs (1); tp 6 puts ranks 6-11 on two; 16 ranks on two; cp 16 at one
    # rank a node, 16; on NVL72 racks a 32-GPU group starting at rank 64 reaches into the next
    ranks = np.array([8, 6, 16, 16])
    spans = np.array([8, 6, 16, 128])
    assert domains_spanned(ranks, spans, 8).tolist() == [1, 2, 2, 16]
    assert int(domains_spanned(32, 32, 72)) == 2
    # a strided group has no more domains than ranks
    assert int(domains_spanned(2, 64, 8)) == 2


def test_ring_and_pat_latency_by_hand() -> None:
    # ring over 16 ranks in 2 domains: 8.4 + 14 x 3.4 + 1 x 14.0 = 70.0 us
    ring = coll.ring_latency_s(16, 2, 1, 8.4e-6, 3.4e-6, 14.0e-6)
    assert ring == pytest.approx(70.0e-6)
    # 256 ranks one a node: ring 8.4 + 255 x 14.0 = 3578.4 us; PAT 8.0 + 8 x 4.0 + 256 x 2.8 =
    # 756.8 us
    args = (8.4e-6, 3.4e-6, 14.0e-6)
    assert coll.ring_latency_s(256, 256, 1, *args) == pytest.approx(3578.4e-6)
    assert coll.pat_latency_s(256, 1, 14.0e-6) == pytest.approx(756.8e-6)
    # two ranks on two nodes: PAT's 8.0 + 4.0 + 5.6 = 17.6 us against the ring's 8.4 + 14.0
    assert coll.pat_latency_s(2, 1, 14.0e-6) == pytest.approx(17.6e-6)
    assert coll.ring_latency_s(1, 1, 3, *args) == 0


def test_nccl_picks_the_quickest_algorithm_and_protocol_by_hand() -> None:
    simple = (8.4e-6, 3.4e-6, 14.0e-6)
    # a 2 ms bucket over 512 ranks, two a node (256 nodes): the ring with Simple waits 8.4 +
    # 256 x 3.4 + 255 x 14.0 = 4448.8 us; LL128, 14.0 + 256 x 1.9 + 255 x 4.0 = 1520.4 us
    # for 0.92 of the bandwidth: 2 / 0.92 + 1.5204 = 3.6943 ms, which NCCL takes
    assert coll.collective_s(2e-3, 512, 256, 1, simple) == pytest.approx(2e-3 / 0.92 + 1520.4e-6)
    assert coll.collective_s(2e-3, 512, 256, 1, simple, ll128=False) == pytest.approx(
        2e-3 + 4448.8e-6
    )
    # 8 large tp collectives inside a node keep Simple: 1 + 8 x 32.2 us against 1 / 0.92 + 8
    # x (14.0 + 7 x 1.9) us
    assert coll.collective_s(1e-3, 8, 1, 8, simple) == pytest.approx(1e-3 + 8 * 32.2e-6)
    # 0.1 ms over 256 nodes, one rank each: PAT, 0.1 / 0.75 + 756.8 us, beats LL128's 0.1 /
    # 0.92 + (14.0 + 255 x 8.5) us and the Simple ring's 0.1 + 3578.4 us
    assert coll.collective_s(1e-4, 256, 256, 1, simple) == pytest.approx(1e-4 / 0.75 + 756.8e-6)
    # a group of one sends nothing


def test_all_reduces_may_take_nccls_tree_and_never_pat_by_hand() -> None:
    simple = (8.4e-6, 3.4e-6, 14.0e-6)
    # one 3.15 ms all-reduce (two ring passes) over 64 nodes, one rank each. The tree with
    # Simple: 8.4 + 2 x (0 x 4.0 + log2(64) x 14) = 176.4 us at 0.92 of the bandwidth, 3.4239
    # + 0.1764 = 3.6003 ms; with LL128, 14.0 + 2 x 6 x 8.5 = 116 us at 0.8625, 3.6522 + 0.116
    # = 3.7682 ms; the ring with LL128, 3.4239 + 2 x (14.0 + 63 x 8.5) us = 4.5229 ms; Simple,
    # 3.15 + 2 x (8.4 + 63 x 14.0) us = 4.9308 ms
    tree_s = 3.15e-3 / 0.92 + 176.4e-6
    assert coll.collective_s(3.15e-3, 64, 64, 2, simple, all_reduce=True) == pytest.approx(tree_s)
    # as a reduce-scatter and an all-gather (ZeRO 1-2) no tree is on offer: the LL128 ring
    # beats PAT's 2 x (8.0 + 6 x 4.0 + 64 x 2.8) us at 0.75 of the bandwidth, 4.6224 ms
    ll128_ring_s = 3.15e-3 / 0.92 + 2 * (14.0 + 63 * 8.5) * 1e-6
    assert coll.collective_s(3.15e-3, 64, 64, 2, simple) == pytest.approx(ll128_ring_s)
    # a chain through a node's 8 ranks: 8.4 + 2 x 7 x 4.0 = 64.4 us a tree all-reduce, so inside
    # one node the ring (2 x (8.4 + 7 x 3.4) = 64.4 us at the full bandwidth) keeps it
    ring_s = 1e-3 + 2 * (8.4 + 7 * 3.4) * 1e-6
    assert coll.collective_s(1e-3, 8, 1, 2, simple, all_reduce=True) == pytest.approx(ring_s)
    # each level of nodes adds two network steps: 1,024 nodes cost the tree 4 more than 64
    many = coll.tree_all_reduce_s(0.0, 1024, 1024, 1, coll.TREE_SIMPLE)
    few = coll.tree_all_reduce_s(0.0, 64, 64, 1, coll.TREE_SIMPLE)
    assert many - few == pytest.approx(2 * 4 * 14.0e-6)
    assert coll.collective_s(0.0, 1, 1, 2, simple, all_reduce=True) == 0
    assert coll.collective_s(0.0, 1, 1, 3, simple) == 0


def test_message_size_share_reads_the_published_curves() -> None:
    mib = 2**20
    # nccl-tests on 8 x H200: 16 MiB all-reduce at 219.89 of 482.26 GB/s bus bandwidth
    assert coll.bus_share(16 * mib, False) == pytest.approx(219.89 / 482.26)
    # across 4 x 8 B200: 64 MiB at 15.17 of 36.95 GB/s per accelerator
    assert coll.bus_share(64 * mib, True) == pytest.approx(15.17 / 36.95)
    # between two sizes, interpolated in log size; beyond the largest, the full bandwidth
    between = coll.bus_share(np.sqrt(16.0 * 32.0) * mib, False)
    assert between == pytest.approx((219.89 + 275.84) / 2 / 482.26)
    assert coll.bus_share(2**40, True) == pytest.approx(1.0)


def test_message_size_what_if_slows_tensor_parallel_collectives_by_their_share() -> None:
    # tp 8 all-reduces of 8192 tokens x 16384 x 2 B = 256 MiB inside the node: 436.15 / 482.26
    # of the bandwidth, so the bandwidth part of tp_comm grows by 482.26 / 436.15
    job, layout = plate_job(), Layout(tp=8, pp=16, vpp=4, zero=1)
    off = evaluate(job, layout, "standard")
    on = evaluate(job, layout, "standard", CostAssumptions(collective_message_size=True))
    assert not CostAssumptions().collective_message_size
    latency_s = 8 * (8.4e-6 + 7 * 3.4e-6)  # 8 sequence-parallel collectives of 7 steps
    bandwidth_off = off.times_s["tp_comm"] - latency_s
    bandwidth_on = on.times_s["tp_comm"] - latency_s
    assert bandwidth_on == pytest.approx(bandwidth_off * 482.26 / 436.15)


def test_a_group_spread_over_whole_nodes_uses_every_nic() -> None:
    # 16 H100 on two nodes: a tp 1 data-parallel group of 16 has 8 ranks in each node, so
    # its ring's channels run over 8 NICs: 8 x 50 x 0.74 = 296 GB/s a rank, below NVLink's
    # 400; one rank a node (tp 8) keeps its one NIC's 37 GB/s; switched off, 37 for both
    job = plate_job(16, "llama3-8b", global_batch=16)
    on, off = CostAssumptions(), CostAssumptions(network_rails_per_domain=False)
    assert link_bytes_s(job_links(job, on), 16, ranks=16) == pytest.approx(8 * 37e9)
    assert link_bytes_s(job_links(job, on), 16, ranks=2) == pytest.approx(37e9)
    assert link_bytes_s(job_links(job, off), 16, ranks=16) == pytest.approx(37e9)
    # inside one node: NVLink whatever the rank count
    assert link_bytes_s(job_links(job, on), 8, ranks=8) == pytest.approx(400e9)
    # an all-to-all over those 16: the 8 local shares go over NVLink meanwhile, so the NIC
    # carries half the bytes: 37 / (8 / 16) = 74 GB/s
    assert all_to_all_bytes_s(job_links(job, on), 16, 16, 1e9) == pytest.approx(74e9)


def test_an_all_to_all_inside_nvlink_runs_at_the_measured_all_to_all_bandwidth() -> None:
    # H100: 450 GB/s line rate less NCCL's ~20% protocol overhead, 370, not the all-reduce's
    # 400 (NVLink SHARP); B200: HybridEP's 533.4 GB/s over 8 ranks, 7/8 of it leaving the rank
    job = plate_job(16, "llama3-8b", global_batch=16)
    a = CostAssumptions()
    assert all_to_all_bytes_s(job_links(job, a), 8, 8, 1e9) == pytest.approx(370e9)
    b200 = job.model_copy(
        update={"cluster": job.cluster.model_copy(update={"gpu": gpu_preset("b200")})}
    )
    assert all_to_all_bytes_s(job_links(b200, a), 8, 8, 1e9) == pytest.approx(
        (535.94 + 530.86) / 2 * 7 / 8 * 1e9, rel=1e-3
    )
    # a GPU that states none falls back to its all-reduce bandwidth
    custom = gpu_preset("h100-sxm").model_copy(update={"all_to_all_gb_s": None})
    plain = job.model_copy(update={"cluster": job.cluster.model_copy(update={"gpu": custom})})
    assert all_to_all_bytes_s(job_links(plain, a), 8, 8, 1e9) == pytest.approx(400e9)


def test_ring_attention_sends_at_one_nics_pace() -> None:
    # cp 16 at tp 1 over two nodes: an all-gather spreads over 8 NICs, ring attention's
    # point-to-point steps cross at one NIC's pace: 8 times the bandwidth part
    job = plate_job(16, "llama3-8b", global_batch=16, seq_len=32768)
    layout = Layout(tp=1, cp=16, zero=1)
    quiet = {"cp_overlap_fraction": 0.0, "collective_base_latency_s": 0.0}
    quiet |= {"nvlink_step_latency_s": 0.0, "network_step_latency_s": 0.0}
    gathered = evaluate(job, layout, "standard", CostAssumptions(**quiet))
    ring = evaluate(job, layout, "standard", CostAssumptions(cp_exchange="p2p", **quiet))
    assert ring.times_s["cp_comm"] == pytest.approx(8 * gathered.times_s["cp_comm"])


def test_the_loss_moves_its_logits_bytes_at_hbm_bandwidth() -> None:
    """The loss over the last rank's vocabulary shard: every token's V / tp logits at
    `loss_bytes_per_logit` bytes each, at the GPU's HBM bandwidth, in the head's time."""
    job, layout = plate_job(), Layout(tp=8, pp=16, vpp=4, zero=1)
    with_loss = evaluate(job, layout, "standard")
    without = evaluate(job, layout, "standard", CostAssumptions(loss_bytes_per_logit=0))
    # 8,192 tokens x 128,256 / 8 logits x 52 B over H100's 3,350 GB/s
    by_hand_s = 8192 * 128256 / 8 * 52 / 3350e9
    assert CostAssumptions().loss_bytes_per_logit == 52
    assert job.model.vocab_size == 128256 and job.training.seq_len == 8192
    assert with_loss.times_s["head"] - without.times_s["head"] == pytest.approx(by_hand_s)
    assert with_loss.times_s["matmul"] == without.times_s["matmul"]
    off = evaluate(job, layout, "standard", CostAssumptions(elementwise_traffic=False))
    no_traffic = CostAssumptions(elementwise_traffic=False, loss_bytes_per_logit=0)
    assert off.times_s["head"] == evaluate(job, layout, "standard", no_traffic).times_s["head"]


def test_gradient_accumulation_outside_the_gemms_by_hand() -> None:
    # BLOOM's layer (h 14336, a 4h GeLU MLP) at tp 4 on A100: its matrices, 12 h^2 / 4 =
    # 616,562,688 parameters a rank; DeepSpeed's BF16 optimiser moves 18 bytes of each a
    # micro-batch: 11.098 GB at 2,039 GB/s, 5.443 ms a layer
    bloom = TransformerSpec(
        name="bloom-176b",
        num_layers=70,
        hidden_size=14336,
        ffn_hidden_size=57344,
        num_attention_heads=112,
        num_kv_heads=112,
        vocab_size=250880,
        tied_embeddings=True,
        gated_mlp=False,
    )
    job = plate_job(384, bloom, global_batch=2048, seq_len=2048)
    job = job.model_copy(
        update={"cluster": job.cluster.model_copy(update={"gpu": gpu_preset("a100-80gb")})}
    )
    layout = Layout(tp=4, pp=12, micro_batch=2, zero=1, recompute="full")
    fused = evaluate(job, layout, "standard", CostAssumptions())
    separate = evaluate(
        job, layout, "standard", CostAssumptions(gradient_accumulation_bytes_per_param=18)
    )
    pass_s = 616_562_688 * 18 / 2039e9
    assert pass_s == pytest.approx(5.443e-3, rel=1e-3)
    assert separate.times_s["matmul"] - fused.times_s["matmul"] == pytest.approx(pass_s)
    assert separate.times_s["step"] > fused.times_s["step"]

    # today's DeepSpeed takes that optimiser by itself in bf16 with pp and ZeRO-0 only (ZeRO-1
    # runs its ZeRO optimiser; without pp, DDP_BFLOAT16): the same pass, from the engine
    deepspeed = engine_assumptions(get_engine("deepspeed"), CostAssumptions(), "bf16")
    assert deepspeed.pipelined_gradient_accumulation_bytes_per_param == [18, 0, 0]

    def matmul_s(costs: CostAssumptions, on: TrainingJob = job, **knobs: object) -> float:
        priced = evaluate(on, layout.model_copy(update=knobs), "standard", costs)
        return float(priced.times_s["matmul"])

    zero0, zero1 = matmul_s(deepspeed, zero=0), matmul_s(deepspeed, zero=1)
    assert zero0 - zero1 == pytest.approx(pass_s)
    assert zero1 == pytest.approx(fused.times_s["matmul"])
    # 256 GPUs at tp 4 and pp 1: dp 64 takes the batch whole
    flat = job.model_copy(update={"cluster": job.cluster.model_copy(update={"gpus": 256})})
    without_pp = {"pp": 1, "zero": 0}
    assert matmul_s(deepspeed, flat, **without_pp) == matmul_s(
        CostAssumptions(), flat, **without_pp
    )
    fp16 = engine_assumptions(get_engine("deepspeed"), CostAssumptions(), "fp16")
    assert matmul_s(fp16, zero=0) == pytest.approx(zero1)
