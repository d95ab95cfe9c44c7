"""Hand-worked toy cases for profile standard's communication formulas (tensor, context,
data and expert parallel traffic, pipeline sends, collective latency, links by NVLink domain),
arithmetic in the comments, and the monotonicity each one must have. The other formulas'
cases are in test_standard_formulas.py."""

from __future__ import annotations

import numpy as np
import pytest

from models.hardware import ClusterSpec, fits_one_domain
from models.layout import Layout
from models.presets import gpu_preset
from optimizer.costmodel.assumptions import CostAssumptions
from optimizer.costmodel.profiles import evaluate
from optimizer.costmodel.standard import collectives as coll
from optimizer.costmodel.standard import memory as mem
from optimizer.costmodel.standard import times as tim
from tests.helpers import plate_job

NONE, SELECTIVE, FULL = mem.RECOMPUTE_NONE, mem.RECOMPUTE_SELECTIVE, mem.RECOMPUTE_FULL


def test_tp_transfer() -> None:
    # tokens 100, h 10 -> payload 2000 B; ring 2*3/4*2000 = 3000 B; 4 collectives = 12000 B
    # at 1000 B/s = 12 s; full recompute replays the 2 forward ones: 18 s
    assert tim.tp_transfer_s(4, 100, 10, 1000, NONE) == pytest.approx(12)
    assert tim.tp_transfer_s(4, 100, 10, 1000, FULL) == pytest.approx(18)
    assert tim.tp_transfer_s(1, 100, 10, 1000, NONE) == 0


def test_hidden_tp_collectives_slow_the_gemm_only_where_they_run_on_sms() -> None:
    # userbuffers hide 3/4 of the layer's tp time T; of that, the share on SMs costs the
    # GEMM overlap_compute_slowdown s of itself: T (1/4 + s x share x 3/4), s = 0.189
    job, layout = plate_job(), Layout(tp=8, pp=16, vpp=4)

    def tp_comm(**assumptions: float) -> float:
        priced = evaluate(job, layout, "standard", CostAssumptions(**assumptions))
        return float(priced.times_s["tp_comm"])

    exposed = tp_comm()
    assert tp_comm(tp_overlap_fraction=0.75, tp_overlap_sm_share=0.0) == pytest.approx(exposed / 4)
    assert tp_comm(tp_overlap_fraction=0.75, tp_overlap_sm_share=0.5) == pytest.approx(
        exposed * (0.25 + 0.189 * 0.5 * 0.75)
    )
    assert tp_comm(tp_overlap_fraction=1.0, tp_overlap_sm_share=1.0) == pytest.approx(
        exposed * 0.189
    )


def test_cp_exchange_bytes() -> None:
    # K+V width 8, one KV head so tp 2 cannot shard it further: 8 values per token per rank
    # 3 passes * (4-1)/4 * 1024 tokens * 8 * 2 B = 36864 B; full recompute adds a 4th pass
    assert tim.cp_exchange_bytes(4, 1024, 8, 1, 2, NONE) == pytest.approx(36864)
    assert tim.cp_exchange_bytes(4, 1024, 8, 1, 2, FULL) == pytest.approx(36864 * 4 / 3)
    # 8 KV heads over tp 8: one head each, 1/8 of the width
    assert tim.cp_exchange_bytes(4, 1024, 64, 8, 8, NONE) == pytest.approx(36864)
    assert tim.cp_exchange_bytes(1, 1024, 8, 1, 2, NONE) == 0


def test_cp_bytes_grow_with_degree_and_exposure_hides() -> None:
    degrees = np.array([2, 4, 8, 16])
    assert np.all(np.diff(tim.cp_exchange_bytes(degrees, 1024, 8, 1, 1, NONE)) > 0)
    # 10 s of exchange under 8 s of attention with half of it usable: 10 - 4 = 6 s left
    assert tim.exposed_s(10.0, 8.0, 0.5) == pytest.approx(6)
    assert tim.exposed_s(3.0, 8.0, 0.5) == 0


def test_cp_passes_and_tp_collectives() -> None:
    # all-gather K,V forward; again backward plus the reduce-scatter of dK,dV: 3 collectives,
    # 4 when full recompute replays the forward gather
    assert tim.cp_passes(np.array([NONE, SELECTIVE, FULL])).tolist() == [3, 3, 4]
    # sequence-parallel TP: 4 all-reduce volumes = 4 all-gathers + 4 reduce-scatters = 8
    # collectives, plus 2 x 2 for full recompute's replayed forward = 12
    assert tim.tp_collectives(np.array([NONE, SELECTIVE, FULL])).tolist() == [8, 8, 12]


def test_collective_latency_alpha_term() -> None:
    # NCCL ring/Simple: 8.4 us base + 9.6 us a network step; cp 8 over 8 nodes takes 7 steps:
    # 3 collectives * (8.4 + 7 * 9.6) us = 3 * 75.6 us = 226.8 us
    assert coll.ring_latency_s(8, 8, 3, 8.4e-6, 3.4e-6, 9.6e-6) == pytest.approx(226.8e-6)
    # NVLink steps of 3.4 us, tp 8 in one node, 8 collectives: 8 * (8.4 + 7 * 3.4) = 257.6 us
    assert coll.ring_latency_s(8, 1, 8, 8.4e-6, 3.4e-6, 9.6e-6) == pytest.approx(257.6e-6)
    # a group of one sends nothing, and pays no latency
    assert coll.ring_latency_s(1, 1, 3, 8.4e-6, 3.4e-6, 9.6e-6) == 0


def test_latency_grows_with_the_group() -> None:
    groups = np.array([2, 4, 8, 16, 32])
    assert np.all(np.diff(coll.ring_latency_s(groups, groups, 3, 8.4e-6, 3.4e-6, 9.6e-6)) > 0)


def test_pipeline_sends_by_hand() -> None:
    # 1000 tokens x h 10 x 2 B / tp 2 = 10,000 B a send; two a chunk: 20,000 B at 1000 B/s =
    # 20 s without interleaving, 40 s over 2 chunks; an interleaved overlap hides the latter
    # but for the slowdown's share (0.2): 8 s; pp 1 sends nothing
    assert tim.pp_p2p_s(4, 1, 1000, 10, 2, 1000, 0.0, 1.0, 0.2) == pytest.approx(20)
    assert tim.pp_p2p_s(4, 2, 1000, 10, 2, 1000, 0.0) == pytest.approx(40)
    assert tim.pp_p2p_s(4, 2, 1000, 10, 2, 1000, 0.0, 1.0, 0.2) == pytest.approx(8)
    assert tim.pp_p2p_s(1, 2, 1000, 10, 2, 1000, 0.0) == 0


def test_data_parallel_traffic() -> None:
    # once a step: 2 passes * (4-1)/4 * 2 B * 1000 = 3000 B
    assert tim.ring_pass_bytes(tim.GRAD_SYNC_PASSES, 1000, 4) == pytest.approx(3000)
    # ZeRO-3, every micro-batch: 3 passes * 3/4 * 2 B * 1000 = 4500 B
    assert tim.ring_pass_bytes(3, 1000, 4) == 4500
    # experts reduce over their own (smaller) group: 3 * 1/2 * 2 * 400 = 1200 B more
    both = tim.ring_pass_bytes(3, 1000, 4) + tim.ring_pass_bytes(3, 400, 2)
    assert both == pytest.approx(5700)
    # a group of one sends nothing
    assert tim.ring_pass_bytes(3, 1000, 1) + tim.ring_pass_bytes(3, 400, 1) == 0


def test_moe_all_to_all() -> None:
    # 64 tokens / tp 2 = 32 per rank, top-2, h 8, bf16: 32*2*8*2 = 1024 B, 3/4 leave the
    # rank: 768 B; 4 all-to-alls a layer: 3072 B at 1 B/s
    assert tim.moe_all_to_all_s(4, 64, 2, 2, 8, 1.0, 1.0, 0.0) == pytest.approx(3072)
    # half the layers are MoE and half of it hides: 768
    assert tim.moe_all_to_all_s(4, 64, 2, 2, 8, 1.0, 0.5, 0.5) == pytest.approx(768)
    assert tim.moe_all_to_all_s(1, 64, 2, 2, 8, 1.0, 1.0, 0.0) == 0


def test_pipeline_sends() -> None:
    # 2 sends per chunk, 2 chunks, 10 tokens * 4 h * 2 B / tp 2 = 40 B each: 160 B at 1 B/s
    assert tim.pp_p2p_s(2, 2, 10, 4, 2, 1.0, 0.0) == pytest.approx(160)
    assert tim.pp_p2p_s(1, 1, 10, 4, 2, 1.0, 0.0) == 0


def test_links_by_domain() -> None:
    # 72-GPU domains hold groups of 4, 8, 24 and 72 consecutive ranks whole; groups of 16
    # straddle (ranks 64-79 cross into the next rack), as do groups beyond the domain
    spans = np.array([4, 8, 16, 24, 72, 144])
    assert tim.link_bytes_s(spans, 72, 900.0, 50.0).tolist() == [900, 900, 50, 900, 900, 50]


def test_groups_that_straddle_nodes_run_at_the_networks_pace() -> None:
    # 8-GPU nodes: tp 6 puts ranks 6-11 on two nodes, tp 3 ranks 6-8; tp 2, 4, 8 pack whole
    spans = np.array([1, 2, 3, 4, 6, 8])
    assert tim.link_bytes_s(spans, 8, 400.0, 40.0).tolist() == [400, 400, 40, 400, 40, 400]
    # a job smaller than a node is one domain: 6 GPUs hold tp 3 and tp 6 whole
    small = ClusterSpec(gpus=6, gpu=gpu_preset("h100-sxm"), gpus_per_node=8)
    assert small.job_nvlink_domain == 6
    assert fits_one_domain(np.array([3, 6]), small.job_nvlink_domain).tolist() == [True, True]


def test_a_straddling_cp_group_is_priced_on_the_network_and_said() -> None:
    # Llama 3 8B, 6,144 tokens, tp 2 x cp 3: cp groups span 6 GPUs. K/V per layer: 3
    # collectives x 2/3 x 6144 tokens x (2*8*128 / tp 2 = 1024) values x 2 B = 25,165,824 B.
    # 8-GPU nodes: ranks 6-11 straddle two, so the network: 25.17 MB / (50 GB/s x 0.74) =
    # 680.2 us, plus NCCL's ring latency, 2 steps of which 1 crosses between the two nodes:
    # 3 x (8.4 + 3.4 + 14.0) us = 77.4 us. 6-GPU nodes hold each group whole:
    # 25.17 MB / 400 GB/s = 62.9 us + 3 x (8.4 + 2 x 3.4) us = 108.5 us.
    cp_s = {}
    for node in (8, 6):
        job = plate_job(48, "llama3-8b", global_batch=16, seq_len=6144)
        cluster = job.cluster.model_copy(update={"gpus_per_node": node})
        estimate = evaluate(
            job.model_copy(update={"cluster": cluster}), Layout(tp=2, cp=3), "standard"
        )
        cp_s[node] = (estimate.times_s["cp_comm"], estimate.warnings)
    assert cp_s[8][0] == pytest.approx(25_165_824 / 37e9 + 77.4e-6, rel=1e-6)
    assert cp_s[6][0] == pytest.approx(62.91456e-6 + 45.6e-6, rel=1e-6)
    assert any("cp groups span 6 GPUs" in w and "straddle" in w for w in cp_s[8][1])
    assert not any("straddle" in w for w in cp_s[6][1])


def test_interleaved_sync_hides_chunk_by_chunk() -> None:
    # dp_sync_per_chunk, pp 4, vpp 4: the chunks' transfers hide under (4 - 1)/4 x 4 = 3
    # micro-batch slots; the last chunk's reduce-scatter and the first's gather, 1/4, under
    # nothing. Without interleaving, dp_overlap_microbatches (1) slots, nothing unhidden.
    from optimizer.costmodel.standard.data_parallel import step_sync_overlap

    overlap, unhidden = step_sync_overlap(np.array([4, 4]), np.array([4, 1]), True, 1.0)
    assert overlap.tolist() == pytest.approx([3.0, 1.0])
    assert unhidden.tolist() == pytest.approx([0.25, 0.0])
    default = CostAssumptions()
    overlap, unhidden = step_sync_overlap(
        4, 4, default.dp_sync_per_chunk, default.dp_overlap_microbatches
    )
    assert (float(overlap), float(unhidden)) == (1.0, 0.0)
    # a sync of 1 s, slots of 0.1 s, no contention: v = 4 transfers of 0.25 s, queued; the
    # later three hide under 3 x 0.1 = 0.3 s: 1 - 0.3 = 0.7 s exposed, at least the 0.25 s
    # sent with no compute beside it
    assert tim.exposed_s(1.0, 0.1, 3.0, 0.0, 0.25) == pytest.approx(0.7)
    # slots of 1 s hide all but the last 0.25 s: max(1 - 3, 0.25) = 0.25
    assert tim.exposed_s(1.0, 1.0, 3.0, 0.0, 0.25) == pytest.approx(0.25)
    # with a slowdown of 0.2 the hidden 0.75 s still costs 0.15: 0.25 + 0.15 = 0.4
    # = max(1 - 0.8 x 3, (0.2 + 0.8 x 0.25) x 1)
    assert tim.exposed_s(1.0, 1.0, 3.0, 0.2, 0.25) == pytest.approx(0.4)


def test_ring_across_domains_uses_the_fewest_nics_of_a_domain() -> None:
    from optimizer.costmodel.standard.links import rails_per_rank

    # aligned: 256 ranks over 512 GPUs in 64-GPU domains, 32 a domain
    assert float(rails_per_rank(256, 512, 64)) == 32
    # 256 ranks at stride 2 over 512 GPUs in 72-GPU domains: a whole domain holds 72 / 2 =
    # 36, the worst-placed edge gcd(512, 72) = 8 GPUs, 8 / 2 = 4: the ring runs at 4 NICs'
    # pace (each leaves the domain with 1/4 of the data), not one
    assert float(rails_per_rank(256, 512, 72)) == 4
    # tp 6 on 8-GPU nodes: ranks 6-11 hold gcd(6, 8) = 2 in the first node
    assert float(rails_per_rank(6, 6, 8)) == 2
    # a group with one rank a domain has one NIC
    assert float(rails_per_rank(4, 64, 8)) == 1


def test_a_gather_run_in_the_optimizer_step_hides_under_nothing() -> None:
    # --overlap-param-gather off: the all-gather, g of the sync, is paid whole; the reduce
    # hides as before, its last chunk's 1/v under nothing: g + (1 - g) / v
    from optimizer.costmodel.standard.data_parallel import step_sync_overlap

    overlap, unhidden = step_sync_overlap(np.array([4, 4]), np.array([4, 1]), True, 1.0, 1 / 3)
    assert overlap.tolist() == pytest.approx([3.0, 1.0])
    assert unhidden.tolist() == pytest.approx([1 / 3 + 2 / 3 / 4, 1 / 3])
    # a 1.5 s sync under ample compute, no contention: the gather's 0.5 s, plus the
    # reduce's last chunk, 1 s / 4: 0.75 s
    assert tim.exposed_s(1.5, 10.0, 3.0, 0.0, 0.5) == pytest.approx(0.75)


def test_fp8_parameters_gather_in_their_own_bytes() -> None:
    # ZeRO-1 reducing in fp32: 2 volumes of reduce, 1 of gather a step (pricing.stage_volumes)
    from optimizer.costmodel.standard.data_parallel import data_parallel_sync, gather_bytes_ratio

    assert gather_bytes_ratio("fp8", True) == 0.5  # 1 byte against bf16's 2
    assert gather_bytes_ratio("mxfp8", True) == pytest.approx(1.03125 / 2)  # its 1/32 scales
    assert gather_bytes_ratio("nvfp4", True) == 1.0  # kept in bf16 (engines/pricing.py)
    assert gather_bytes_ratio("fp8", False) == gather_bytes_ratio("bf16", True) == 1.0
    job = plate_job().model_copy(
        update={"training": plate_job().training.model_copy(update={"precision": "fp8"})}
    )
    a = CostAssumptions(gradient_volumes_per_step=[2.0, 3.0, 3.0], fp8_params=True)
    sync = data_parallel_sync(job, a)
    total, gather = sync.step_volumes(np.array([0, 1, 2]))
    # 3 - 1 x (1 - 0.5) = 2.5, of it 0.5 the gather; ZeRO-0 gathers nothing
    assert total.tolist() == pytest.approx([2.0, 2.5, 2.5])
    assert gather.tolist() == pytest.approx([0.0, 0.5, 0.5])
    assert sync.gather_share(np.array([0, 1, 3])).tolist() == pytest.approx([0.0, 0.2, 0.0])
    # only where the engine does not overlap it does that share go unhidden
    assert sync.overlap(4, 1, 1) == (1.0, 0.0)
    hidden_off = data_parallel_sync(job, a.model_copy(update={"dp_param_gather_hidden": False}))
    assert float(hidden_off.overlap(4, 1, 1)[1]) == pytest.approx(0.2)


def test_the_step_pays_a_gather_run_after_the_optimizer() -> None:
    # the plate's layout at ZeRO-1 under Megatron-LM: the same sync, its gather exposed whole
    from optimizer.engines import engine_assumptions, get_engine

    job, layout = plate_job(), Layout(tp=8, pp=16, vpp=4, zero=1)

    def exposed(overlap_param_gather: bool) -> float:
        engine = get_engine("megatron", {"overlap_param_gather": overlap_param_gather})
        priced = evaluate(job, layout, "standard", engine_assumptions(engine, CostAssumptions()))
        return float(priced.times_s["dp_comm_exposed"])

    assert exposed(False) > exposed(True) > 0
