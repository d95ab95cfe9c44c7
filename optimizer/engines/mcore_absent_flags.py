"""The flags the Megatron-LM export may write that an older release's launcher does not
parse: an artefact naming any of them would stop `pretrain_gpt.py` at its argument parser
("unrecognized arguments"), so under that release it is refused, naming them, not written.

Each set is every flag the exporter and the settings can write (megatron.py, mcore.py,
settings.py) that the release's arguments.py does not define, read at its tag: v2.5
(e269e20064) and 23.04 (2360d732a3) megatron/arguments.py, core_r0.8.0 (baf94af3c6)
megatron/training/arguments.py. The newest release is the code the exporter was written from.
Each older release lacks what the next one lacks and more.
"""

from __future__ import annotations

ABSENT_IN_CORE_R0_8_0 = frozenset(
    {
        "--account-for-embedding-in-pipeline-split",
        "--account-for-loss-in-pipeline-split",
        "--attention-backend",
        "--ckpt-format",
        "--cross-entropy-fusion-impl",
        "--cuda-graph-impl",
        "--data-parallel-sharding-strategy",
        "--decoder-first-pipeline-num-layers",
        "--decoder-last-pipeline-num-layers",
        "--exp-avg-dtype",
        "--exp-avg-sq-dtype",
        "--fp4-format",
        "--fp4-recipe",
        "--fp8-param-gather",
        "--fp8-recipe",
        "--grad-reduce-in-bf16",
        "--kv-lora-rank",
        "--main-params-dtype",
        "--moe-ffn-hidden-size",
        "--moe-flex-dispatcher-backend",
        "--moe-layer-freq",
        "--moe-shared-expert-intermediate-size",
        "--multi-latent-attention",
        "--num-virtual-stages-per-pipeline-rank",
        "--overlap-moe-expert-parallel-comm",
        "--pipeline-model-parallel-layout",
        "--q-lora-rank",
        "--qk-head-dim",
        "--qk-pos-emb-head-dim",
        "--recompute-modules",
        "--use-megatron-fsdp",
        "--v-head-dim",
    }
)
ABSENT_IN_23_04 = ABSENT_IN_CORE_R0_8_0 | {
    "--context-parallel-size",
    "--cross-entropy-loss-fusion",
    "--ddp-bucket-size",
    "--expert-model-parallel-size",
    "--fp8-format",
    "--group-query-attention",
    "--moe-grouped-gemm",
    "--moe-router-topk",
    "--moe-token-dispatcher-type",
    "--no-overlap-p2p-communication",
    "--normalization",
    "--num-query-groups",
    "--overlap-grad-reduce",
    "--overlap-param-gather",
    "--position-embedding-type",
    "--tp-comm-overlap",
    "--tp-comm-overlap-cfg",
    "--use-tp-pp-dp-mapping",
}
ABSENT_IN_V2_5 = ABSENT_IN_23_04 | {
    "--disable-bias-linear",
    "--no-async-tensor-model-parallel-allreduce",
    "--num-experts",
    "--recompute-granularity",
    "--recompute-method",
    "--recompute-num-layers",
    "--sequence-parallel",
    "--swiglu",
    "--transformer-impl",
    "--untie-embeddings-and-output-weights",
    "--use-distributed-optimizer",
    "--use-flash-attn",
}
