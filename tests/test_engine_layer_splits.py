"""The layer-split arithmetic the engine rules and exporters share (Megatron-Core's even,
first/last and account-for splits, layout strings, torchtitan's stages), and the recipes
through which NeMo runs a model. Split from test_engines_rules.py."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

from api.http.app import create_app
from models.hf_config import from_hf_config
from models.layout import Layout
from models.presets import model_preset
from optimizer.engines import export, get_engine, stages, violations
from tests.helpers import plate_job


def test_megatron_core_split_predicates_hand_worked() -> None:
    # 126 layers, pp 16, vpp 4: 126 % 64 != 0; first/last need 4 | 126 (no: 126 = 4 * 31 + 2);
    # embedding and loss as layers: 128 % 64 = 0.
    assert not stages.mcore_even(126, 16, 4)
    assert not stages.mcore_first_last(126, 16, 4)
    assert stages.mcore_account_for(126, 16, 4)
    # Vectorised: pp 16 x vpp 1 -> first/last (1 | 126 and 126 >= 16); pp 2 x vpp 4 -> 126 % 4.
    got = stages.mcore_first_last(126, np.array([16, 2]), np.array([1, 4]))
    assert got.tolist() == [True, False]


@pytest.mark.parametrize(
    ("layers", "pp", "vpp", "method", "peak"),
    [
        (80, 4, 5, "even", 4),  # 80 / 20
        (126, 16, 1, "first_last", 8),  # 7 + 14 x 8 + 7
        (126, 16, 4, "account_for", 2),  # (126 + 2) / 64 = 2, minus E and L at the ends
        (80, 4, 3, "layout", 7),  # 80 / 12: 8 chunks of 7, 4 of 6
    ],
)
def test_megatron_core_split_is_balanced(
    layers: int, pp: int, vpp: int, method: str, peak: int
) -> None:
    split = stages.mcore_split(layers, pp, vpp)
    assert split.method == method
    assert sum(split.chunk_layers) == layers and len(split.chunk_layers) == pp * vpp
    assert max(split.chunk_layers) == peak
    per_rank = [sum(split.chunk_layers[r::pp]) for r in range(pp)]
    assert max(per_rank) == -(-layers // pp)


def test_first_last_split_numbers() -> None:
    split = stages.mcore_split(126, 16, 1)
    assert (split.first_stage_layers, split.last_stage_layers) == (7, 7)


def test_layout_string_counts() -> None:
    split = stages.mcore_split(80, 4, 3)
    assert split.layout == "Et*6|t*7|t*7|t*7|t*7|t*7|t*7|t*7|t*7|t*6|t*6|t*6L"


def test_torchtitan_stage_layers_hand_worked() -> None:
    # 126 + 2 = 128 effective layers on 64 stages: 2 each, the first and last give one to
    # the embedding and the head.
    assert stages.titan_layers_per_stage(126, 16, 4) == 2
    per_stage = stages.titan_stage_layers(126, 64)
    assert per_stage[0] == per_stage[-1] == 1 and set(per_stage[1:-1]) == {2}
    assert stages.titan_stages_ok(np.array([80, 80, 80]), 4, np.array([1, 2, 5])).tolist() == [
        True,
        True,
        False,
    ]


def test_nemo_runs_qwen_through_its_recipe_and_names_it() -> None:
    # Megatron-Bridge's qwen25_72b_pretrain_config loads Qwen/Qwen2.5-72B, the preset's shape
    job = plate_job(gpus=1024, model="qwen2.5-72b")
    layout = Layout(tp=8, pp=4)
    nemo = get_engine("nemo")
    assert violations(nemo, job, layout) == []
    assert "--recipe qwen25_72b_pretrain_config" in export(nemo, job, layout).text
    # a copy of the preset under another name is the same shape, so the same recipe
    renamed = job.model.model_copy(update={"name": "my-qwen"})
    assert violations(nemo, job.model_copy(update={"model": renamed}), layout) == []


def test_a_config_json_that_writes_head_dim_is_still_the_engines_config() -> None:
    # a Llama 3.1 8B config.json saved by a recent transformers (LlamaConfig has head_dim)
    # writes head_dim 128 (= 4096 / 32), which the preset leaves out: the same model, so
    # torchtitan's llama3_8b and Bridge's recipe train it
    config = {"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096,
              "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
              "head_dim": 128, "vocab_size": 128256, "tie_word_embeddings": False}  # fmt: skip
    job = plate_job(gpus=64, model="llama3-8b")
    imported = job.model_copy(update={"model": from_hf_config(config)})
    layout = Layout(tp=8, pp=1, zero=2)
    for name in ("torchtitan", "nemo"):
        assert violations(get_engine(name), imported, layout) == []
    # a head_dim that differs is a piece torchtitan's llama3 layers do not build
    other = from_hf_config({**config, "head_dim": 64})
    other_job = job.model_copy(update={"model": other})
    broken = violations(get_engine("torchtitan"), other_job, layout)
    assert any("a head_dim other than hidden / heads" in v for v in broken)


@pytest.mark.parametrize(
    ("published", "recipe"),
    [
        ("gpt-oss-120b", "gpt_oss_120b_pretrain_config"),
        ("qwen3-30b-a3b", "qwen3_30b_a3b_pretrain_config"),
        ("deepseek-v3", "deepseek_v3_pretrain_config"),
    ],
)
def test_nemo_runs_published_hf_configs_through_the_recipes_that_load_them(
    published: str, recipe: str
) -> None:
    # each recipe loads the model with AutoBridge.from_hf_pretrained from the Hub: the same
    # config.json, imported, is that recipe's model (a user pasting it gets the recipe)
    model = model_preset(published)
    job = plate_job(gpus=256, model="llama3-8b").model_copy(update={"model": model})
    layout = Layout(tp=1, pp=4, ep=8, zero=1)
    assert not [v for v in violations(get_engine("nemo"), job, layout) if "recipe" in v]
    assert f"--recipe {recipe}" in export(get_engine("nemo"), job, layout).text


def test_the_bridge_recipes_128_chunks_of_126_layers_price_and_export() -> None:
    # Megatron-Bridge's Llama 3.1 405B GB200 MXFP8 recipe: tp 4, pp 16, vpp 8 (archive at
    # 067f987, 26.02 and 26.04.01): 128 chunks for 126 layers, the embedding and the loss a
    # chunk each; it was refused as "chunks exceed num_layers"
    body = {
        "model": "llama3-405b",
        "cluster": {"gpus": 256, "gpu": "gb200"},
        "training": {"global_batch": 1536, "seq_len": 8192, "precision": "mxfp8"},
        "layout": {"tp": 4, "pp": 16, "vpp": 8, "micro_batch": 1, "zero": 1},
        "engine": "nemo",
    }
    answer = TestClient(create_app()).post("/v1/evaluate", json=body)
    assert answer.status_code == 200, answer.text
    text = answer.json()["export"]["text"]
    assert "model.account_for_embedding_in_pipeline_split=true" in text
    assert "model.account_for_loss_in_pipeline_split=true" in text
    split = stages.mcore_split(126, 16, 8)
    assert split.method == "account_for" and split.chunk_layers[0] == split.chunk_layers[-1] == 0


def test_a_search_fixed_on_those_chunks_says_it_leaves_them_out() -> None:
    # the search keeps a layer in every chunk (its stage plans need one): fixed on 128 chunks
    # of 126 layers it finds nothing, and says that evaluate prices the layout
    body = {
        "model": "llama3-405b",
        "cluster": {"gpus": 256, "gpu": "gb200"},
        "training": {"global_batch": 1536, "seq_len": 8192},
        "search": {"pp": 16, "vpp": 8},
        "engine": "nemo",
        "explain": False,
    }
    answer = TestClient(create_app()).post("/v1/optimize", json=body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "infeasible"
    assert any("128 chunks for num_layers(126)" in w for w in answer.json()["warnings"])
