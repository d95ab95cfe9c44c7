"""Models no engine names: a custom Llama-shape 13B is answered under every engine with an
export that states its shape in the engine's own keys, read back by the engine's grammar
(shell words, Python, JSON, Hydra overrides); a model whose pieces an engine's code lacks is
refused naming the piece (docs/engines.md)."""

from __future__ import annotations

import ast
import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.engine_cases import command_line

# A Llama 2 13B-like shape with GQA and a vocabulary of its own: no engine names this model.
CUSTOM_13B = {
    "name": "custom-13b",
    "num_layers": 40,
    "hidden_size": 5120,
    "ffn_hidden_size": 13824,
    "num_attention_heads": 40,
    "num_kv_heads": 8,
    "vocab_size": 100_352,
}


def optimize_body(model: dict[str, Any], engine: str) -> dict[str, Any]:
    return {
        "model": model,
        "cluster": {"gpus": 64},
        "training": {"global_batch": 256, "seq_len": 4096},
        "search": {"max_vpp": 2},
        "engine": engine,
        "explain": False,
        "time_limit_s": 60,
    }


def best_export(api: TestClient, engine: str) -> dict[str, Any]:
    response = api.post("/v1/optimize", json=optimize_body(CUSTOM_13B, engine))
    answer = response.json()
    assert response.status_code == 200, answer
    assert answer["status"] == "optimal"
    best = answer["best"]
    assert best["export_error"] is None
    export: dict[str, Any] = best["export"]
    return export


def flag_values(text: str) -> dict[str, str]:
    """Megatron-LM's `--flag value` words, as bash splits them."""
    words = command_line(text)
    return {w: v for w, v in zip(words, [*words[1:], ""], strict=True) if w.startswith("--")}


def test_megatron_writes_the_custom_shape_as_its_flags(api: TestClient) -> None:
    flags = flag_values(best_export(api, "megatron")["text"])
    assert {k: flags[k] for k in MEGATRON_SHAPE} == MEGATRON_SHAPE


MEGATRON_SHAPE = {
    "--num-layers": "40",
    "--hidden-size": "5120",
    "--ffn-hidden-size": "13824",
    "--num-attention-heads": "40",
    "--num-query-groups": "8",
}


def test_nemo_writes_the_custom_shape_as_recipe_overrides(api: TestClient) -> None:
    pytest.importorskip("hydra")
    from hydra.core.override_parser.overrides_parser import OverridesParser

    export = best_export(api, "nemo")
    lines = [line for line in export["text"].splitlines() if line and not line.startswith("#")]
    parsed = {o.key_or_group: o.value() for o in OverridesParser.create().parse_overrides(lines)}
    assert "--recipe llama3_8b_pretrain_config" in export["text"]
    assert {k: parsed[k] for k in BRIDGE_SHAPE} == BRIDGE_SHAPE


BRIDGE_SHAPE = {
    "model.num_layers": 40,
    "model.hidden_size": 5120,
    "model.ffn_hidden_size": 13824,
    "model.num_attention_heads": 40,
    "model.num_query_groups": 8,
    "model.kv_channels": 128,
    "model.vocab_size": 100_352,
    "model.share_embeddings_and_output_weights": False,
    "model.gated_linear_unit": True,
}


def module_keywords(text: str) -> dict[str, object]:
    """Every literal keyword argument of the module's calls, names resolved from its tuple
    assignments (`dim, vocab_size = 5120, 100352`)."""
    tree = ast.parse(text)
    names: dict[str, object] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple):
            values = ast.literal_eval(node.value)
            names |= {t.id: v for t, v in zip(node.targets[0].elts, values, strict=True)}  # type: ignore[attr-defined]
    keywords: dict[str, object] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg is not None:
            if isinstance(node.value, ast.Constant):
                keywords[node.arg] = node.value.value
            elif isinstance(node.value, ast.Name) and node.value.id in names:
                keywords[node.arg] = names[node.value.id]
    return keywords


def test_torchtitan_writes_a_config_module_with_the_custom_shape(api: TestClient) -> None:
    export = best_export(api, "torchtitan")
    assert (export["format"], export["filename"]) == (
        "torchtitan-config-module",
        "layoutopt_torchtitan.py",
    )
    keywords = module_keywords(export["text"])
    assert {k: keywords[k] for k in TITAN_SHAPE} == TITAN_SHAPE
    # the layout's command line rides along, as for a registry config
    tree = ast.parse(export["text"])
    (args,) = [
        ast.literal_eval(n.value)
        for n in tree.body
        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "ARGS"
    ]
    assert "--parallelism.tensor_parallel_degree" in args
    assert args[-1].startswith("activation_checkpoint:")


TITAN_SHAPE = {
    "n_layers": 40,
    "dim": 5120,
    "n_heads": 40,
    "n_kv_heads": 8,
    "hidden_dim": 13824,
    "vocab_size": 100_352,
    "enable_weight_tying": False,
}


def test_deepspeed_and_generic_answer_the_custom_model_too(api: TestClient) -> None:
    # DeepSpeed's config has no model section (the model is the module handed to
    # deepspeed.initialize): the JSON is the layout's alone
    config = json.loads(best_export(api, "deepspeed")["text"])
    assert config["train_batch_size"] == 256
    assert "model" not in config
    layout = json.loads(best_export(api, "generic")["text"])["layout"]
    assert layout["tp"] * layout["pp"] * layout["cp"] * layout["dp"] == 64


def test_a_hostile_name_stays_in_the_torchtitan_modules_comments() -> None:
    from models.layout import Layout
    from models.transformer import TransformerSpec
    from optimizer.engines import export, get_engine
    from tests.helpers import plate_job

    name = '""" ; import os # \\'
    model = TransformerSpec.model_validate(CUSTOM_13B | {"name": name})
    job = plate_job(64, "llama3-8b", global_batch=256).model_copy(update={"model": model})
    text = export(get_engine("torchtitan"), job, Layout(tp=8, zero=3)).text
    assert [line for line in text.splitlines() if name in line] == [
        line for line in text.splitlines() if line.startswith("#") and name in line
    ]
    assert "import os" not in {
        n.names[0].name for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Import)
    }


MOE_13B = CUSTOM_13B | {"num_experts": 8, "experts_per_token": 2, "expert_ffn_hidden_size": 4096}
MLA_13B = CUSTOM_13B | {
    "num_kv_heads": 40,  # a key and value a query head, from the latent
    "kv_lora_rank": 512,
    "q_lora_rank": 1536,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
}


@pytest.mark.parametrize(
    ("engine", "model", "piece"),
    [
        ("torchtitan", MOE_13B, "custom-13b has mixture-of-experts layers"),
        ("torchtitan", MLA_13B, "custom-13b has multi-head latent attention"),
        ("nemo", MLA_13B, "custom-13b has multi-head latent attention"),
    ],
)
def test_a_piece_the_engines_code_lacks_is_refused_by_name(
    api: TestClient, engine: str, model: dict[str, Any], piece: str
) -> None:
    body = optimize_body(model, engine) | {"layout": {"tp": 8}}
    body = {k: v for k, v in body.items() if k not in ("search", "explain", "time_limit_s")}
    response = api.post("/v1/export", json=body)
    error = response.json()["error"]
    assert (response.status_code, error["field"]) == (422, "engine")
    assert piece in error["message"]
    # and a search under it proves nothing runs
    answer = api.post("/v1/optimize", json=optimize_body(model, engine)).json()
    assert answer["status"] == "infeasible" and answer["best"] is None


def test_custom_moe_is_exported_by_bridge_as_overrides(api: TestClient) -> None:
    # Megatron-Core has MoE layers: Bridge's Llama recipe takes them as overrides
    answer = api.post("/v1/optimize", json=optimize_body(MOE_13B, "nemo")).json()
    assert answer["status"] == "optimal"
    text = answer["best"]["export"]["text"]
    assert "model.num_moe_experts=8" in text.splitlines()
    assert "model.moe_router_topk=2" in text.splitlines()
