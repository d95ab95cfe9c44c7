"""Hand-worked toy cases for profile standard's formulas (arithmetic in the comments), and
the monotonicity each one must have."""

from __future__ import annotations

import numpy as np
import pytest

from models.hf_config import from_hf_config
from models.layout import Layout
from models.transformer import TransformerSpec
from optimizer.costmodel.assumptions import CostAssumptions
from optimizer.costmodel.profiles import evaluate
from optimizer.costmodel.standard import collectives as coll
from optimizer.costmodel.standard import memory as mem
from optimizer.costmodel.standard import times as tim
from tests.helpers import plate_job

# L=4, h=8, f=16, a=2, k=1, V=32: hd = 4, q width = 8, K+V width = 2*1*4 = 8
TOY = TransformerSpec(
    num_layers=4,
    hidden_size=8,
    ffn_hidden_size=16,
    num_attention_heads=2,
    num_kv_heads=1,
    vocab_size=32,
)
NONE, SELECTIVE, FULL = mem.RECOMPUTE_NONE, mem.RECOMPUTE_SELECTIVE, mem.RECOMPUTE_FULL


# --- stages -----------------------------------------------------------------------------


def test_llama3_uneven_stages() -> None:
    # 126 layers on 16 stages: (126 + 2) / 16 = 8 per device, first and last give one slot
    # to the embedding and the head: 7, 8, ..., 8, 7 (Llama 3 paper, section 3.3.2)
    layers = mem.stage_layers(126, 16, 1)
    assert (layers.first, layers.middle, layers.last, bool(layers.valid)) == (7, 8, 7, True)


def test_whole_chunks_and_refusals() -> None:
    # 128 layers on 16 stages x 4 chunks: 2 layers a chunk, 8 a device
    even = mem.stage_layers(128, 16, 4)
    assert (even.first, even.middle, even.last, bool(even.valid)) == (8, 8, 8, True)
    # 127 layers: neither 127 nor 129 splits over 16 stages; the busiest hold ceil = 8
    odd = mem.stage_layers(127, 16, 1)
    assert (odd.first, odd.middle, odd.last, bool(odd.valid)) == (8, 8, 8, True)
    # a single stage cannot give slots away: 126 on pp 1 is simply 126
    assert bool(mem.stage_layers(126, 1, 1).valid)


# --- activations ------------------------------------------------------------------------


def test_activation_bytes_per_token_by_recompute() -> None:
    # none: norms 8h = 64, Q,K,V 2*(8 + 8) = 32, attention output 2*8 = 16, SwiGLU 6f = 96
    #       -> 208 bytes per token
    # selective: minus the norm outputs 4h = 32 and the activation output 2f = 32 -> 144
    # full: the layer input, 2h = 16
    values = mem.layer_activation_bytes_per_token(TOY, np.array([NONE, SELECTIVE, FULL]))
    assert values.tolist() == [208, 144, 16]


def test_gelu_mlp_keeps_two_tensors() -> None:
    # GeLU MLP: 4f = 64 instead of 6f = 96 -> 208 - 32 = 176
    gelu = TOY.model_copy(update={"gated_mlp": False})
    assert mem.layer_activation_bytes_per_token(gelu, NONE) == 176


def test_unfused_attention_scores() -> None:
    # 5 bytes per score (Korthikanti eq. 2): 5 * a * s = 5 * 2 * 8 = 80 per token
    assert mem.attention_score_bytes_per_token(2, 8, NONE, fused=False) == 80
    assert mem.attention_score_bytes_per_token(2, 8, SELECTIVE, fused=False) == 0
    assert mem.attention_score_bytes_per_token(2, 8, NONE, fused=True) == 0


def test_without_sequence_parallelism_tp_ranks_keep_the_norms_whole() -> None:
    # Korthikanti et al. 2022 eq. 1 without dropout: norm inputs 4h and outputs 4h are whole
    # on every tp rank; selective recompute drops the outputs; full keeps the input, 2h
    values = mem.tp_replicated_activation_bytes_per_token(8, np.array([NONE, SELECTIVE, FULL]))
    assert values.tolist() == [64, 32, 16]
    # full recompute, 16 tokens on tp 4 (4 a rank): 16 B/token sharded -> 16 * 4 = 64 B;
    # replicated -> the input of all 16 tokens, 16 * 16 = 256 B (section 4.3: 2sbh, not 2sbh/t)
    assert mem.tp_rank_activation_bytes(16, 0, 4, 4) == 64
    assert mem.tp_rank_activation_bytes(16, 16, 4, 4) == 256
    assert mem.tp_rank_activation_bytes(16, 16, 4, 1) == 64  # tp 1 has nothing to replicate


def test_sequence_parallelism_only_moves_activation_memory() -> None:
    # Llama 3 405B, tp 8, pp 1, micro-batch 1, full recompute: 126 stored layer inputs plus one
    # layer rebuilt whole, on 8192 / 8 = 1024 tokens a rank. Without SP each rank also keeps the
    # other 7 shares of 2h per stored layer and of 8h in the rebuilt one:
    # (126 * 2 * 16384 + 8 * 16384) * 7 * 1024 = 30,534,533,120 bytes
    job = plate_job()
    layout = Layout(tp=8, pp=1, cp=1, vpp=1, micro_batch=1, zero=1, recompute="full")
    with_sp = evaluate(job, layout, "standard", CostAssumptions())
    without = evaluate(job, layout, "standard", CostAssumptions(sequence_parallel=False))
    extra = without.memory.activations - with_sp.memory.activations
    assert extra == pytest.approx(30_534_533_120)
    assert without.memory.weights == with_sp.memory.weights
    assert without.times_s["tp_comm"] == with_sp.times_s["tp_comm"]  # the same tp traffic
    # but each rank now runs the hidden state's elementwise kernels (44h bytes a token: 2 norms
    # and 2 residual adds, forward and backward) on all 8192 tokens, not its 1024, at 3.35 TB/s:
    # 44 * 16384 * 7168 / 3.35e12 = 1.5425 ms more a layer, a third of it again in recompute
    extra_s = 44 * 16384 * 7168 / 3.35e12
    assert without.times_s["matmul"] - with_sp.times_s["matmul"] == pytest.approx(extra_s)
    assert without.times_s["recompute"] - with_sp.times_s["recompute"] == pytest.approx(extra_s / 3)


def test_in_flight_micro_batches() -> None:
    # m = 32 on p = 16: the first device holds 16, the last one
    assert mem.in_flight_micro_batches(32, 16, 1, mem.SCHEDULE_1F1B) == (16, 1)
    first, last = mem.in_flight_micro_batches(32, 16, 4, mem.SCHEDULE_1F1B)
    # interleaved, rank r runs 2(p - r - 1) + (v - 1)p warm-up chunk forwards and one more:
    # rank 0 2*15 + 3*16 + 1 = 79 chunks = 19.75 micro-batches (Korthikanti's 16 x (1 + 15/64)),
    # rank 15 0 + 48 + 1 = 49 chunks = 12.25, rank 1 79 - 2 = 77 chunks = 19.25
    assert (first, last) == (pytest.approx(19.75), pytest.approx(12.25))
    assert mem.in_flight_on_rank(32, 16, 4, mem.SCHEDULE_1F1B, 1) == pytest.approx(19.25)
    # 1F1B: rank r holds p - r
    assert mem.in_flight_on_rank(32, 16, 1, mem.SCHEDULE_1F1B, 5) == 11
    # fewer micro-batches than stages: only m = 4 are ever in flight
    assert mem.in_flight_micro_batches(4, 16, 1, mem.SCHEDULE_1F1B)[0] == 4
    # DualPipe: p + 1 = 17 everywhere; ZB-H1 keeps 1F1B's peak
    assert mem.in_flight_micro_batches(32, 16, 1, mem.SCHEDULE_DUALPIPE) == (17, 17)
    assert mem.in_flight_micro_batches(32, 16, 1, mem.SCHEDULE_ZERO_BUBBLE) == (16, 1)


def test_interleaved_in_flight_never_exceeds_the_step() -> None:
    # m = p = 16, v = 4 (Llama 3 405B at 16,384 GPUs): the step has 64 chunk forwards; rank r
    # warms up with 2(15 - r) + 48 of them, so ranks 0..7 run all 64 before a backward
    # (Megatron-Core's all-warm-up case) and hold 16 micro-batches, not 16 x 1.234
    assert mem.in_flight_on_rank(16, 16, 4, mem.SCHEDULE_1F1B, 0) == 16
    assert mem.in_flight_on_rank(16, 16, 4, mem.SCHEDULE_1F1B, 7) == 16
    # rank 8: 2*7 + 48 + 1 = 63 chunk forwards = 15.75 micro-batches
    assert mem.in_flight_on_rank(16, 16, 4, mem.SCHEDULE_1F1B, 8) == pytest.approx(15.75)
    ms = np.array([16, 17, 32, 64])
    assert np.all(mem.in_flight_on_rank(ms, 16, 4, mem.SCHEDULE_1F1B, 0) <= ms)


def test_in_flight_falls_with_chunks() -> None:
    held = mem.in_flight_on_rank(32, 16, np.array([2, 4, 8, 16]), mem.SCHEDULE_1F1B, 0)
    assert np.all(np.diff(held) < 0) and np.all(held > 16)


# --- parameters -------------------------------------------------------------------------


def test_embedding_on_first_and_last_stage() -> None:
    # V h / t = 32 * 8 / 2 = 128 on each end stage; both (256) on a single stage
    assert mem.embedding_params_per_device(TOY, 2, 4) == 128
    assert mem.embedding_params_per_device(TOY, 2, 1) == 256


def test_zero_stages_shard_state() -> None:
    # 1000 dense params, 400 expert params, group 4, expert group 2, grads 4 B, Adam 12 B
    # ZeRO-0: weights 2*1400 = 2800, grads 4*1400 = 5600, optimiser 12*1400 = 16800
    # ZeRO-3: weights 2*(1000/4 + 400/2) = 900, grads 4*450 = 1800, optimiser 12*450 = 5400
    zero0 = mem.state_bytes(1000, 400, 0, 4, 2, 1, 4, 12)
    zero3 = mem.state_bytes(1000, 400, 3, 4, 2, 1, 4, 12)
    assert zero0 == (2800, 5600, 16800)
    assert zero3 == (900, 1800, 5400)
    # ZeRO-1 shards only the optimiser: 2800, 5600, 5400
    assert mem.state_bytes(1000, 400, 1, 4, 2, 1, 4, 12) == (2800, 5600, 5400)
    # DualPipe keeps two copies of weights and gradients, not of the optimiser
    assert mem.state_bytes(1000, 400, 0, 4, 2, 2, 4, 12) == (5600, 11200, 16800)


def test_state_bytes_fp32_shards() -> None:
    # FSDP2 keeps the ZeRO-3 shard in fp32 and steps it: 4 B a parameter in the weights and
    # the fp32 master's 4 out of the optimiser's 12 (450 sharded parameters as above):
    # weights 4*450 = 1800, grads 4*450 = 1800, optimiser (12-4)*450 = 3600
    assert mem.state_bytes(1000, 400, 3, 4, 2, 1, 4, 12, fp32_shards=True) == (1800, 1800, 3600)
    # 2 B a parameter fewer than a bf16 shard beside an fp32 master (900 + 1800 + 5400)
    assert 900 + 1800 + 5400 - (1800 + 1800 + 3600) == 2 * 450
    # below ZeRO-3 nothing is sharded as parameters, so the flag changes nothing
    for zero in (0, 1, 2):
        assert mem.state_bytes(1000, 400, zero, 4, 2, 1, 4, 12, fp32_shards=True) == (
            mem.state_bytes(1000, 400, zero, 4, 2, 1, 4, 12)
        )


# --- FLOPs and schedules ----------------------------------------------------------------


def test_model_and_hardware_flops() -> None:
    # 6 * (100 active + 10 head) + 2 layers * 12 * q 4 * s 8 = 660 + 768 = 1428 per token
    assert tim.model_flops_per_token(100, 10, 2, 4, 8) == 1428
    # full recompute replays the forward: 2 * 100 + 2 layers * 4 * 4 * 8 = 456 more
    assert tim.recompute_flops_per_token(100, 2, 4, 8, FULL) == 456
    assert tim.recompute_flops_per_token(100, 2, 4, 8, SELECTIVE) == 0


def test_recompute_time() -> None:
    # full replays the forward: a third of forward plus backward; selective a stated share
    assert tim.recompute_s(9.0, FULL, 0.02) == pytest.approx(3)
    assert tim.recompute_s(9.0, SELECTIVE, 0.02) == pytest.approx(0.18)
    assert tim.recompute_s(9.0, NONE, 0.02) == 0
    # a forward priced apart (FlashAttention's backward recomputes, so attention's forward is
    # less than a third): full replays it, selective still takes its share of the layer
    assert tim.recompute_s(9.0, FULL, 0.02, forward_s=2.5) == pytest.approx(2.5)
    assert tim.recompute_s(9.0, SELECTIVE, 0.02, forward_s=2.5) == pytest.approx(0.18)


def test_schedule_bubbles() -> None:
    # 1F1B interleaved: (16-1)/4 = 3.75 slots; ZB-H1 at w = 1/3: 15 * 1/3 = 5;
    # DualPipe: (8 - 1) * (3 - 5/3) / 2 = 7 * 2/3 = 4.667
    codes = np.array([mem.SCHEDULE_1F1B, mem.SCHEDULE_ZERO_BUBBLE, mem.SCHEDULE_DUALPIPE])
    slots = tim.warmup_micro_batches(16, np.array([4, 1, 1]), codes, 1 / 3)
    assert slots == pytest.approx([3.75, 5, 14 / 3])
    # without interleaving both newer schedules beat 1F1B's 15 slots
    plain = tim.warmup_micro_batches(16, 1, mem.SCHEDULE_1F1B, 1 / 3)
    assert plain == 15 and all(slots[1:] < plain)


def test_bubble_grows_with_stages() -> None:
    pp = np.array([2, 4, 8, 16, 32])
    for code in (mem.SCHEDULE_1F1B, mem.SCHEDULE_ZERO_BUBBLE):
        assert np.all(np.diff(tim.warmup_micro_batches(pp, 1, code, 1 / 3)) > 0)


def test_eager_kernels_move_the_bytes_their_ops_read_and_write() -> None:
    # Llama 3 8B (h 4096, q 4096, K and V 1024 wide each, SwiGLU f 14336) on 8 H100, tp 2,
    # 8,192 tokens a micro-batch, sequence parallel: per token and layer the eager fp32
    # RMSNorms move 2 x (128 - 10) x 4096 bytes beyond the fused ones, on the rank's half of
    # the tokens; rotary (40 - 8) x (4096 + 1024), SwiGLU (28 - 16) x 14336, the attention
    # output's copy 8 x 4096 and repeat_kv's copies 2 x 2 x (2048 + 2 x 4096) bytes, split
    # over tp
    job = plate_job(8, "llama3-8b", global_batch=8, seq_len=8192)
    layout = Layout(tp=2, pp=1, zero=1)
    fused = evaluate(job, layout, "standard", CostAssumptions())
    eager = evaluate(
        job,
        layout,
        "standard",
        CostAssumptions(eager_norms=True, eager_pointwise=True, gqa_kv_copies=True),
    )
    hidden = 2 * 118 * 4096
    projections = 32 * (4096 + 1024) + 12 * 14336 + 8 * 4096 + 4 * (2048 + 8192)
    extra_s = (hidden + projections) * 8192 / 2 / 3.35e12
    assert eager.times_s["matmul"] - fused.times_s["matmul"] == pytest.approx(extra_s)
    # each flag charges only its own part
    norms_only = evaluate(job, layout, "standard", CostAssumptions(eager_norms=True))
    assert norms_only.times_s["matmul"] - fused.times_s["matmul"] == pytest.approx(
        hidden * 8192 / 2 / 3.35e12
    )
    # a model with as many KV heads as query heads has nothing for repeat_kv to copy
    mha = job.model_copy(update={"model": job.model.model_copy(update={"num_kv_heads": 32})})
    copies = evaluate(mha, layout, "standard", CostAssumptions(gqa_kv_copies=True))
    assert copies.times_s["matmul"] == evaluate(mha, layout, "standard").times_s["matmul"]


def test_a_deduplicated_dispatch_crosses_the_network_once_a_remote_domain() -> None:
    # 8 copies of a token over experts on two domains: 4 are bound for the remote one, which
    # a deduplicating dispatcher reaches with 1 - 0.5^8 of one copy (the chance that any of
    # the 8 lands there): a share of 0.99609375 / 4
    assert coll.deduplicated_network_share(8, 2) == pytest.approx((1 - 0.5**8) / 4)
    assert coll.deduplicated_network_share(8, 1) == 1  # one domain: NVLink only
    # one copy a token: nothing to deduplicate
    assert coll.deduplicated_network_share(1, 4) == pytest.approx(1.0)
    # priced: the DeepSeek-V3-shaped preset (top 8) with ep 16 over two 8-GPU H100 nodes. The
    # alltoall dispatcher sends half its bytes over one NIC at NCCL's 0.74 of 50 GB/s: 37 /
    # 0.5 = 74 GB/s a rank. Deduplicated, the network carries that share of them: at NCCL's
    # pace 37 / (0.5 x 0.249) = 297 GB/s; at the dispatchers' measured line rate (DeepEP's and
    # HybridEP's 50 GB/s) 402, above NVLink's all-to-all 370, which then sets the pace
    job = plate_job(16, "deepseek-v3-shaped", global_batch=64, seq_len=4096)
    layout = Layout(tp=1, pp=1, ep=16, zero=1)
    alltoall = evaluate(job, layout, "standard").times_s["moe_all_to_all"]
    share = (1 - 0.5**8) / 4
    at_nccl_pace = CostAssumptions(moe_dispatch_dedup=True, moe_dispatch_network_efficiency=0.74)
    nccl = evaluate(job, layout, "standard", at_nccl_pace).times_s["moe_all_to_all"]
    assert nccl == pytest.approx(alltoall * share)
    dedup = evaluate(job, layout, "standard", CostAssumptions(moe_dispatch_dedup=True))
    assert CostAssumptions().moe_dispatch_network_efficiency == 1.0
    assert 50e9 / (0.5 * share) > 370e9
    assert dedup.times_s["moe_all_to_all"] == pytest.approx(alltoall * 74e9 / 370e9)


def test_a_clamped_glu_charges_its_eager_clamps_by_hand() -> None:
    # GPT-OSS's shape: 36 MoE layers, 4 routed experts of f_e 2,880 a token. Eager clamps
    # move 16 + 20 bytes a value of f_e a copy, forward and backward: on one H100 (3.35 TB/s),
    # tp 2, a 4,096-token micro-batch, each rank's share of the tokens, 4,096 / 2
    config = {
        "model_type": "gpt_oss", "num_hidden_layers": 36, "hidden_size": 2880,
        "intermediate_size": 2880, "num_attention_heads": 64, "num_key_value_heads": 8,
        "head_dim": 64, "vocab_size": 201088, "tie_word_embeddings": False,
        "num_local_experts": 128, "num_experts_per_tok": 4,
    }  # fmt: skip
    job = plate_job(64, global_batch=64, seq_len=4096)
    job = job.model_copy(update={"model": from_hf_config(config)})
    layout = Layout(tp=2, ep=8, zero=1)
    eager = evaluate(job, layout, "standard").times_s["matmul"]
    fused = evaluate(job, layout, "standard", CostAssumptions(fused_glu_clamp=True))
    by_hand = 4096 / 2 * (16 + 20) * 4 * 2880 / 3.35e12
    assert eager - fused.times_s["matmul"] == pytest.approx(by_hand, rel=1e-9)
    # a model without a clamp pays nothing either way
    plain = job.model_copy(update={"model": job.model.model_copy(update={"glu_clamp": None})})
    assert evaluate(plain, layout, "standard").times_s["matmul"] == pytest.approx(
        fused.times_s["matmul"], rel=1e-12
    )
