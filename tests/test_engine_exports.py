"""What the launch artefacts write is what was priced: a request's recompute module list,
FP8, multi-latent attention's widths, and, where a flag cannot carry it, a header line that
says what the price counted (docs/engines.md)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from models.hf_config import from_hf_config
from models.layout import Layout, resolve_layout
from models.presets import model_preset, model_presets, published_hf_configs
from optimizer import Request
from optimizer.costmodel.grid import PLACEMENTS
from optimizer.engines import export, get_engine
from optimizer.searches import optimize, prepare_search
from tests.engine_cases import _llama70b, _llama70b_fp8, _mixtral, command_line, megatron_parser
from tests.helpers import engine_or_none, plate_job
from tests.test_recompute_modules import NONE, job


def export_body(engine: str, modules: list[str] | None) -> dict[str, object]:
    body: dict[str, object] = {
        "model": "llama3-70b",
        "cluster": {"gpus": 1024, "gpu": "h100-sxm"},
        "training": {"global_batch": 1024, "seq_len": 8192},
        "layout": {"tp": 8, "pp": 4, "vpp": 5, "zero": 1, "recompute": "selective"},
        "engine": engine,
        "profile": "standard",
    }
    if modules is not None:
        body["assumptions"] = {"selective_recompute_modules": modules}
    return body


def test_the_export_names_the_module_list_it_was_priced_with(api: TestClient) -> None:
    # the default list is what --recompute-granularity selective alone runs: nothing added
    plain = api.post("/v1/export", json=export_body("megatron", None)).json()["text"]
    assert "--recompute-granularity selective" in plain and "--recompute-modules" not in plain
    named = api.post("/v1/export", json=export_body("megatron", ["core_attn", "mlp"])).json()
    args, _ = megatron_parser().parse_known_args(command_line(named["text"]))
    assert args.recompute_modules == ["core_attn", "mlp"]
    assert args.recompute_granularity == "selective"
    bridge = api.post("/v1/export", json=export_body("nemo", ["core_attn", "mlp"])).json()
    assert "model.recompute_modules=[core_attn,mlp]" in bridge["text"].splitlines()
    # Bridge's recipes name their own lists: the default is written out, not left to them
    default = api.post("/v1/export", json=export_body("nemo", None)).json()
    assert "model.recompute_modules=[core_attn]" in default["text"].splitlines()
    # evaluate's answer carries the same export
    answer = api.post("/v1/evaluate", json=export_body("megatron", ["mlp"])).json()
    assert "--recompute-modules mlp" in answer["export"]["text"]


def test_exports_write_the_modules_that_apply_to_the_model(api: TestClient) -> None:
    # an MoE model under the engines' list: all three; a dense one: Megatron's default alone
    # (moe_act would be refused without grouped-GEMM experts, transformer_config.py:1964)
    body = export_body("megatron", None) | {"model": "mixtral-8x7b"}
    body["layout"] = {"pp": 4, "vpp": 2, "ep": 8, "zero": 1, "recompute": "selective"}
    moe = api.post("/v1/export", json=body).json()["text"]
    args, _ = megatron_parser().parse_known_args(command_line(moe))
    assert args.recompute_modules == ["core_attn", "layernorm", "moe_act"]
    # Megatron-Bridge runs GPT-OSS from its recipe: the same three written out
    gpt_oss = from_hf_config(published_hf_configs()["gpt-oss-120b"]["config"])
    oss_job = job().model_copy(update={"model": gpt_oss})
    oss_layout = resolve_layout(Layout(pp=4, ep=8, zero=1, recompute="selective"), oss_job)
    bridge = export(get_engine("nemo"), oss_job, oss_layout).text
    assert "model.recompute_modules=[core_attn,layernorm,moe_act]" in bridge.splitlines()
    # a module the model lacks is left out of the launch, as it is priced at nothing
    named = export_body("megatron", ["core_attn", "mla_up_proj", "mlp"])
    args, _ = megatron_parser().parse_known_args(
        command_line(api.post("/v1/export", json=named).json()["text"])
    )
    assert args.recompute_modules == ["core_attn", "mlp"]


def test_megatron_export_says_which_priced_attention_its_flags_leave_out() -> None:
    # GPT-OSS windows 18 of 36 layers to 128 tokens: priced so, but the spec keeps the count,
    # not which layers, so the header says what to add; a model without windows says nothing
    gpt_oss = from_hf_config(published_hf_configs()["gpt-oss-120b"]["config"])
    oss_job = job().model_copy(update={"model": gpt_oss})
    layout = resolve_layout(Layout(pp=4, ep=8, zero=1), oss_job)
    text = export(get_engine("megatron"), oss_job, layout).text
    assert "# Priced with 18 of 36 layers attending to a window of 128 tokens" in text
    assert command_line(text) == command_line(text.replace("# Priced", "# priced"))
    dense = export(get_engine("megatron"), job(), resolve_layout(NONE, job())).text
    assert "window" not in dense


def test_megatron_writes_multi_latent_attention_with_its_widths() -> None:
    # DeepSeek-V3's MLA (arguments.py:3546-3557): without these flags Megatron-Core would build
    # 128 ordinary heads of 7168 / 128 = 56
    from tests.test_mla import deepseek_v3

    job = _mixtral().model_copy(update={"model": deepseek_v3()})
    layout = resolve_layout(Layout(tp=1, pp=4, ep=64, zero=1), job)
    args = megatron_parser().parse_args(
        command_line(export(get_engine("megatron"), job, layout).text)
    )
    assert args.multi_latent_attention and args.moe_grouped_gemm
    widths = (args.q_lora_rank, args.kv_lora_rank, args.qk_head_dim, args.qk_pos_emb_head_dim)
    assert widths == (1536, 512, 128, 64) and args.v_head_dim == 128
    # a dense GQA model gets none of them
    plain = megatron_parser().parse_args(
        command_line(export(get_engine("megatron"), _llama70b(), Layout(tp=8, pp=4)).text)
    )
    assert not plain.multi_latent_attention and plain.kv_lora_rank is None


def test_torchtitan_export_says_an_fp8_price_needs_a_float8_config() -> None:
    layout = Layout(tp=8, pp=4, vpp=2, zero=3)
    bf16 = export(get_engine("torchtitan"), _llama70b(), layout).text
    fp8 = export(get_engine("torchtitan"), _llama70b_fp8(), layout).text
    assert "Priced in FP8" in fp8 and "Priced in FP8" not in bf16
    # the arguments themselves are the same
    assert command_line(fp8) == command_line(bf16)


def test_searches_lay_ranks_only_as_the_engine_does_and_megatron_says_which_order() -> None:
    # Megatron-LM lays ranks tp-cp-ep-dp-pp, or tp-cp-ep-pp-dp with --use-tp-pp-dp-mapping
    # (initialize.py); torchtitan, DeepSpeed and NeMo's exports the first only; generic any
    plate = plate_job(16384)
    orders = {}
    for engine in ("megatron", "nemo", "torchtitan", "deepspeed", "generic"):
        problem, _ = prepare_search(Request(plate, engine=engine_or_none(engine)))
        orders[engine] = {PLACEMENTS[p] for p in problem.placements}
    assert orders["megatron"] == {("tp", "cp", "dp", "pp"), ("tp", "cp", "pp", "dp")}
    assert orders["nemo"] == orders["torchtitan"] == orders["deepspeed"]
    assert orders["deepspeed"] == {("tp", "cp", "dp", "pp")}
    assert len(orders["generic"]) == 24
    best = optimize(Request(plate, engine=get_engine("megatron"), explain=False)).best
    assert best is not None and best.layout.placement in orders["megatron"]
    # pipeline stages inside data parallelism: the flag; the default order: none
    parser, megatron = megatron_parser(), get_engine("megatron")
    inside = resolve_layout(Layout(tp=8, pp=16, vpp=4, placement=("tp", "cp", "pp", "dp")), plate)
    outside = inside.model_copy(update={"placement": ("tp", "cp", "dp", "pp")})
    flags = [
        parser.parse_args(command_line(export(megatron, plate, lay).text))
        for lay in (inside, outside)
    ]
    assert [f.use_tp_pp_dp_mapping for f in flags] == [True, False]
    # an order it has not (a placement the request fixed): said in the header, no flag
    odd = export(megatron, plate, inside.model_copy(update={"placement": ("dp", "tp", "cp", "pp")}))
    assert "an order Megatron-LM does not lay ranks in" in odd.text
    assert not parser.parse_args(command_line(odd.text)).use_tp_pp_dp_mapping


@pytest.mark.parametrize("preset", sorted(model_presets()))
def test_megatron_export_states_the_priced_architecture(preset: str) -> None:
    # Megatron-LM's own defaults are LayerNorm, learned absolute positions, biased linears,
    # no gated MLP and tied embeddings: each priced choice must be written, or a launch
    # trains another model than the one priced
    job = plate_job().model_copy(update={"model": model_preset(preset)})
    model = job.model
    layout = resolve_layout(Layout(tp=8, pp=16, zero=1), job)
    args = megatron_parser().parse_args(
        command_line(export(get_engine("megatron"), job, layout).text)
    )
    assert (args.normalization, args.position_embedding_type) == ("RMSNorm", "rope")
    assert args.add_bias_linear is False
    assert args.swiglu == model.gated_mlp
    assert args.untie_embeddings_and_output_weights == (not model.tied_embeddings)
    assert (args.num_layers, args.hidden_size) == (model.num_layers, model.hidden_size)
    assert args.ffn_hidden_size == model.ffn_hidden_size
    assert (args.num_experts or 0) == model.num_experts
