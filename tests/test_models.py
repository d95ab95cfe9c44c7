"""Specs, presets and Hugging Face import: validation messages name the numbers."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from models.errors import InvalidSpec, UnknownPreset
from models.hardware import ClusterSpec, domain_segment_gpus
from models.hf_config import from_hf_config, looks_like_hf_config
from models.job import TrainingJob
from models.layout import Layout, chunks_hold_layers, resolve_layout
from models.presets import (
    gpu_preset,
    gpu_presets,
    model_preset,
    model_presets,
    published_hf_configs,
)
from models.training import TrainingSpec
from models.transformer import TransformerSpec
from tests.helpers import plate_job

LLAMA3_8B_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "tie_word_embeddings": False,
    "rope_theta": 500000.0,
    "torch_dtype": "bfloat16",
}


def test_every_preset_loads_and_cites_its_source() -> None:
    for name, entry in model_presets().items():
        assert model_preset(name).name == name
        assert entry["source"]
    for name, entry in gpu_presets().items():
        assert gpu_preset(name).source == entry["source"]
    assert {"llama3-8b", "llama3-70b", "llama3-405b"} <= set(model_presets())
    assert {"h100-sxm", "a100-80gb", "h200-sxm", "b200", "mi300x"} <= set(gpu_presets())


def test_current_models_are_presets_imported_from_their_published_configs() -> None:
    # the Hugging Face configs the validation rows name are presets a user asks for by name,
    # priced exactly as the rows price them
    configs = published_hf_configs()
    assert {"deepseek-v3", "gpt-oss-120b", "qwen3-235b-a22b"} <= set(configs)
    for name, entry in configs.items():
        imported = from_hf_config(entry["config"])
        assert model_preset(name) == imported.model_copy(update={"name": name})
        assert model_presets()[name]["source"] == entry["source"]
    # DeepSeek-V3 technical report (arXiv 2412.19437): 671B parameters, MTP module apart
    assert model_preset("DeepSeek-V3").total_params == pytest.approx(671e9, rel=1e-3)
    assert model_preset("deepseek-v3").is_mla


def test_usage_md_lists_every_preset() -> None:
    table = Path("docs/usage.md").read_text().split("| models | GPUs |")[1].splitlines()[2]
    models, gpus = ([n.strip() for n in cell.split(",")] for cell in table.strip("| ").split(" | "))
    assert (models, gpus) == (list(model_presets()), list(gpu_presets()))


def test_the_plates_h100_figures() -> None:
    h100 = gpu_preset("h100-sxm")
    assert (h100.memory_gb, h100.peak_tflops, h100.intra_node_gb_s, h100.inter_node_gb_s) == (
        80,
        989,
        400,
        50,
    )


def test_unknown_preset_lists_the_known_ones() -> None:
    with pytest.raises(UnknownPreset, match="unknown model preset 'llama9'; known: .*llama3-405b"):
        model_preset("llama9")


def test_hf_config_of_llama3_8b_imports_to_the_preset() -> None:
    imported = from_hf_config(LLAMA3_8B_CONFIG)
    assert imported.total_params == model_preset("llama3-8b").total_params


def test_hf_config_with_explicit_head_dim_and_tied_embeddings() -> None:
    # Qwen3-style: 16 heads of 128 on a 2048-wide model; q width 2048, kv width 2*8*128 = 2048
    config = {**LLAMA3_8B_CONFIG, "hidden_size": 2048, "num_attention_heads": 16, "head_dim": 128}
    config |= {"tie_word_embeddings": True, "vocab_size": 1000, "intermediate_size": 6144}
    spec = from_hf_config(config)
    # per layer: 2048*(2048 + 2048) + 2048*2048 + 3*2048*6144 = 8388608 + 4194304 + 37748736
    assert spec.params_per_layer == 50_331_648
    assert spec.embedding_params == 1000 * 2048


def test_hf_config_refuses_what_it_cannot_price() -> None:
    with pytest.raises(InvalidSpec, match="lacks intermediate_size"):
        from_hf_config({k: v for k, v in LLAMA3_8B_CONFIG.items() if k != "intermediate_size"})
    with pytest.raises(InvalidSpec, match="num_hidden_layers: Input should be greater than 0"):
        from_hf_config({**LLAMA3_8B_CONFIG, "num_hidden_layers": 0})


# Pythia 6.9B's config.json (EleutherAI/pythia-6.9b): GPT-NeoX, two-matrix GeLU MLP, untied
PYTHIA_6_9B_CONFIG = {
    "model_type": "gpt_neox",
    "num_hidden_layers": 32,
    "hidden_size": 4096,
    "intermediate_size": 16384,
    "num_attention_heads": 32,
    "vocab_size": 50432,
}


def test_hf_config_takes_mlp_shape_and_tying_from_the_family() -> None:
    # plain MLP: per layer 4h^2 + 2hf = 4*4096^2 + 2*4096*16384 = 201,326,592; 32 layers
    # = 6,442,450,944; untied input and output embeddings 2*50432*4096 = 413,138,944
    pythia = from_hf_config(PYTHIA_6_9B_CONFIG)
    assert not pythia.gated_mlp and not pythia.tied_embeddings
    assert pythia.total_params == 6_442_450_944 + 413_138_944
    # Gemma's config.json omits tie_word_embeddings: GemmaConfig's default ties them
    gemma = {**LLAMA3_8B_CONFIG, "model_type": "gemma"}
    del gemma["tie_word_embeddings"]
    spec = from_hf_config(gemma)
    assert spec.gated_mlp and spec.tied_embeddings


def test_hf_config_of_an_unknown_family_asks_instead_of_guessing() -> None:
    unknown = {**PYTHIA_6_9B_CONFIG, "model_type": "newarch"}
    with pytest.raises(InvalidSpec, match=r"'newarch'.*\"gated_mlp\": true or false.*tie_word"):
        from_hf_config(unknown)
    untyped = {k: v for k, v in PYTHIA_6_9B_CONFIG.items() if k != "model_type"}
    with pytest.raises(InvalidSpec, match="model_type None"):
        from_hf_config(untyped)
    # BLOOM's config.json says n_layer and n_head: named, with the way out
    bloom = {"model_type": "bloom", "n_layer": 70, "hidden_size": 14336, "vocab_size": 250880}
    assert looks_like_hf_config(bloom)
    with pytest.raises(InvalidSpec, match=r"lacks num_hidden_layers.*'bloom'.*as a spec"):
        from_hf_config(bloom)
    stated = from_hf_config({**unknown, "gated_mlp": False, "tie_word_embeddings": False})
    assert stated.total_params == from_hf_config(PYTHIA_6_9B_CONFIG).total_params


def test_a_sliding_window_names_its_length_and_at_most_every_layer() -> None:
    small = {"num_layers": 4, "hidden_size": 64, "ffn_hidden_size": 64,
             "num_attention_heads": 4, "num_kv_heads": 4, "vocab_size": 8}  # fmt: skip
    assert TransformerSpec(**small, sliding_window=16).windowed_layers == 4
    assert TransformerSpec(**small, sliding_window=16, sliding_window_layers=0).windowed_layers == 0
    assert TransformerSpec(**small).windowed_layers == 0
    with pytest.raises(ValidationError, match="sliding_window_layers needs sliding_window"):
        TransformerSpec(**small, sliding_window_layers=2)
    with pytest.raises(ValidationError, match=r"sliding_window_layers\(5\) is more than"):
        TransformerSpec(**small, sliding_window=16, sliding_window_layers=5)


def test_heads_must_group_evenly() -> None:
    with pytest.raises(
        ValidationError, match=r"num_attention_heads\(32\) is not divisible by num_kv_heads\(5\)"
    ):
        TransformerSpec(
            num_layers=2,
            hidden_size=64,
            ffn_hidden_size=64,
            num_attention_heads=32,
            num_kv_heads=5,
            vocab_size=8,
        )


@pytest.mark.parametrize(
    ("gpus", "layout", "message"),
    [
        (
            1000,
            Layout(tp=8, pp=16),
            r"tp\(8\) \* pp\(16\) \* cp\(1\) = 128 does not divide gpus\(1000\)",
        ),
        (
            12288,
            Layout(tp=8, pp=16),
            r"global_batch 2048 is not divisible by dp\(96\) \* micro_batch\(1\)",
        ),
        (16384, Layout(tp=32, pp=16, dp=7), r"dp\(7\) disagrees with gpus\(16384\)"),
        (16384, Layout(tp=8, pp=128), r"pp\(128\) exceeds num_layers\(126\)"),
        (
            16384,
            Layout(tp=8, pp=64, vpp=4),
            r"pp\(64\) \* vpp\(4\) = 256 chunks exceed num_layers\(126\)",
        ),
        (16384, Layout(tp=8, vpp=2), r"vpp\(2\) interleaves pipeline stages and needs pp > 1"),
        (16384, Layout(tp=256), r"tp\(256\) does not divide num_attention_heads\(128\)"),
        (3 * 8192, Layout(tp=8, cp=3), r"cp\(3\) does not divide seq_len\(8192\)"),
    ],
)
def test_invalid_layouts_are_refused_with_their_numbers(
    gpus: int, layout: Layout, message: str
) -> None:
    with pytest.raises(InvalidSpec, match=message):
        resolve_layout(layout, plate_job(gpus=gpus))


def test_placement_must_name_each_dimension_once() -> None:
    with pytest.raises(ValidationError, match="placement must order each of"):
        Layout(placement=("tp", "tp", "pp", "dp"))


@pytest.mark.parametrize(
    ("gpus", "domain", "per_node", "segment"),
    [
        (512, 72, 4, 64),  # 128 trays: 8 segments of 16 (18 does not divide 128)
        (256, 72, 4, 64),
        (2496, 72, 4, 64),  # 624 trays = 39 x 16
        (576, 72, 4, 72),  # 8 whole racks
        (136, 72, 4, 68),  # 34 trays = 2 x 17
        (44, 8, 4, 4),  # 11 trays, a prime count: a tray each
        (16384, 8, 8, 8),  # one node a domain: the node
        (12, 8, 8, 8),  # part of a node: the domain as stated
    ],
)
def test_a_job_over_several_domains_holds_equal_segments(
    gpus: int, domain: int, per_node: int, segment: int
) -> None:
    assert domain_segment_gpus(gpus, domain, per_node) == segment


def test_a_job_inside_one_domain_is_its_own_domain() -> None:
    cluster = ClusterSpec(gpus=48, gpu=gpu_preset("gb200"), gpus_per_node=4)
    assert cluster.job_nvlink_domain == 48
    assert ClusterSpec(gpus=512, gpu=gpu_preset("gb200"), gpus_per_node=4).job_nvlink_domain == 64


def test_two_more_chunks_than_layers_hold_the_embedding_and_the_loss() -> None:
    # Megatron-Bridge's GB200 recipes: Llama 3.1 405B's 126 layers on pp 16 x vpp 8 = 128
    # chunks, the first holding only the embedding and the last only the loss
    from optimizer.costmodel.standard import memory as mem  # the pricing's own split

    assert chunks_hold_layers(126, 16, 8) and chunks_hold_layers(126, 2, 63)
    assert not chunks_hold_layers(126, 1, 128)  # no pipeline to put them on
    assert not chunks_hold_layers(126, 127, 1)  # one more than layers: a chunk holds nothing
    assert not chunks_hold_layers(126, 8, 17)  # 136 chunks
    # 128 slots over 16 ranks: 8 each, the ends one layer fewer (7 + embedding, 7 + loss)
    layers = mem.stage_layers(126, 16, 8)
    assert (layers.first, layers.middle, layers.last, bool(layers.valid)) == (7, 8, 7, True)
    job = TrainingJob(
        model=model_preset("llama3-405b"),
        cluster=ClusterSpec(gpus=256, gpu=gpu_preset("gb200")),
        training=TrainingSpec(global_batch=1536, seq_len=8192),
    )
    resolved = resolve_layout(Layout(tp=4, pp=16, vpp=8), job)
    assert resolved.dp == 4
    with pytest.raises(InvalidSpec, match=r"136 chunks exceed num_layers\(126\)"):
        resolve_layout(Layout(tp=4, pp=8, vpp=17), job)
