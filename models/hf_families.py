"""The Hugging Face families the import knows: for each `model_type`, whether its MLP is
gated and whether its embeddings are tied when config.json omits `tie_word_embeddings`
(models/hf_config.py reads this table)."""

from __future__ import annotations

# model_type -> (gated MLP, tie_word_embeddings when config.json omits it). config.json
# states neither the MLP's shape nor, when it equals the class default, the tying: both
# come from transformers' configuration_<type>.py and modeling_<type>.py. Gated: three
# matrices (gate, up, down; SwiGLU or GeGLU); plain: two (fc1/fc2, c_fc/c_proj).
FAMILIES: dict[str, tuple[bool, bool]] = {
    "llama": (True, False),
    "mistral": (True, False),
    "mixtral": (True, False),
    "qwen2": (True, False),
    "qwen2_moe": (True, False),
    "qwen3": (True, False),
    "qwen3_moe": (True, False),
    # Qwen3-VL's language models (under text_config): Qwen3 and Qwen3-MoE layers, the tying
    # in the outer config (Qwen/Qwen3-VL-30B-A3B-Instruct config.json: tie_word_embeddings
    # false beside text_config model_type qwen3_vl_moe_text)
    "qwen3_vl_text": (True, False),
    "qwen3_vl_moe_text": (True, False),
    "gemma": (True, True),
    "gemma2": (True, True),
    "gemma3_text": (True, True),
    "deepseek_v2": (True, False),
    "deepseek_v3": (True, False),
    # Kimi K2 ships DeepseekV3ForCausalLM under its own model_type (moonshotai/Kimi-K2-*
    # config.json: architectures DeepseekV3ForCausalLM, auto_map configuration_deepseek),
    # with DeepSeek-V3's keys: MLA, n_routed_experts, first_k_dense_replace
    "kimi_k2": (True, False),
    # GLM-4.5: gate/up/down experts and dense MLP, untied (transformers
    # models/glm4_moe/configuration_glm4_moe.py, tie_word_embeddings=False), DeepSeek's MoE
    # keys (n_routed_experts, n_shared_experts, first_k_dense_replace)
    "glm4_moe": (True, False),
    # GLM-4.7-Flash's architecture: DeepSeek's MLA and MoE keys, its first layer dense by
    # default, untied (transformers 5.25 models/glm4_moe_lite/configuration_glm4_moe_lite.py)
    "glm4_moe_lite": (True, False),
    # SwiGLU experts (mlp1 is gate and up together), untied (openai/gpt-oss@7b58334
    # gpt_oss/torch/model.py l.275-309, 364-378)
    "gpt_oss": (True, False),
    # Mistral 4: DeepSeek-V3's keys (MLA's kv_lora_rank and q_lora_rank, n_routed_experts,
    # n_shared_experts, first_k_dense_replace, moe_intermediate_size), gate/up/down experts
    # and shared experts, untied (transformers 5.25 models/mistral4/configuration_mistral4.py,
    # Mistral4Config: tie_word_embeddings False)
    "mistral4": (True, False),
    # MiniMax-M2: Mixtral's keys (num_local_experts as wide as intermediate_size), SwiGLU
    # experts, no shared expert, full attention in every layer, untied (transformers 5.25
    # models/minimax_m2/configuration_minimax_m2.py and modeling_minimax_m2.py)
    "minimax_m2": (True, False),
    # Seed-OSS: Llama's layers (gate, up, down) with biases on Q, K and V, untied
    # (transformers 5.25 models/seed_oss/modular_seed_oss.py, SeedOssConfig)
    "seed_oss": (True, False),
    # GLM-4 (0414): Phi-3's merged gate_up projection (gated), untied; HunYuan dense: Llama's
    # MLP, untied; ERNIE 4.5 (dense): Llama's MLP, tied by default; Apertus and Arcee's AFM:
    # Nemotron's two-matrix MLP (up, down; xIELU and ReLU^2), untied (transformers 5.25
    # models/<type>/modular_<type>.py and configuration_<type>.py of each)
    # EXAONE 4.0: OLMo 2's MLP (gate, up, down), windows on all but every fourth layer by
    # default (sliding_window_pattern 4 or "LLLG"), untied unless config.json says so
    "exaone4": (True, False),
    # dots.llm1: DeepSeek's MoE keys, untied; Qwen's max_window_layers (windows only from layer
    # 62 on by default, so none in dots.llm1's 62)
    "dots1": (True, False),
    "glm4": (True, False),
    "hunyuan_v1_dense": (True, False),
    "ernie4_5": (True, True),
    "apertus": (False, False),
    "arcee": (False, False),
    # Llama 4's text model (under a llama4 config's text_config): SwiGLU experts, shared
    # expert and dense MLPs (Llama4TextMLP: gate, up, down), untied (transformers
    # models/llama4/configuration_llama4.py, tie_word_embeddings=False)
    "llama4_text": (True, False),
    "phi3": (True, False),
    # Phi-3.5-MoE: Mixtral's experts (num_local_experts as wide as intermediate_size), untied
    # (transformers models/phimoe/configuration_phimoe.py, tie_word_embeddings=False)
    "phimoe": (True, False),
    # SmolLM3: Llama's layers, tied, its window off unless use_sliding_window (transformers
    # models/smollm3/modular_smollm3.py, SmolLM3Config)
    "smollm3": (True, True),
    "olmo": (True, False),
    "olmo2": (True, False),
    # OLMo 3: OLMo 2's layers (gate, up, down; untied) with sliding windows (transformers
    # models/olmo3/modular_olmo3.py, Olmo3Config(Olmo2Config))
    "olmo3": (True, False),
    "granite": (True, False),
    "cohere": (True, True),
    # Command R7B and Command A: Cohere's layers, tied, windows of 4,096 on all but every
    # fourth layer by default (transformers models/cohere2/configuration_cohere2.py)
    "cohere2": (True, True),
    # OLMoE: SwiGLU experts as wide as intermediate_size, untied (transformers
    # models/olmoe/modeling_olmoe.py, OlmoeSparseMoeBlock of OlmoeMLP(config))
    "olmoe": (True, False),
    # FlexOlmo: OLMoE's experts (num_experts as wide as intermediate_size), untied; Granite
    # MoE: Mixtral's keys with gate_up and down experts, untied (transformers 5.25
    # models/flex_olmo/modular_flex_olmo.py, models/granitemoe/modeling_granitemoe.py)
    "flex_olmo": (True, False),
    "granitemoe": (True, False),
    # Granite's sliding-window variants: Llama's MLP, tied (granite_swa), and Granite MoE's
    # experts, untied (granitemoe_swa); a shared MLP only where shared_intermediate_size is set,
    # which the import refuses (transformers 5.25 models/granite_swa, models/granitemoe_swa)
    "granite_swa": (True, True),
    "granitemoe_swa": (True, False),
    # ERNIE 4.5 MoE: the dense ERNIE 4.5's gated MLP and experts, tied by default
    # (Ernie4_5_MoeConfig tie_word_embeddings=True); Hunyuan-A13B: gated MLP experts, untied
    # (HunYuanMoEV1Config); their MoE keys: models/hf_moe_aliases.py
    "ernie4_5_moe": (True, True),
    "hunyuan_v1_moe": (True, False),
    # Nemotron-4 and Minitron: squared-ReLU MLP of up and down only, untied (transformers
    # 5.25 models/nemotron/modeling_nemotron.py NemotronMLP; NemotronConfig)
    "nemotron": (False, False),
    # Ministral (MinistralConfig: Mistral's layers, a 4,096-token window on every layer unless
    # layer_types says otherwise), Ministral 3's text model (Ministral3Config, no window by
    # default) and InternLM3 (InternLM3Config is LlamaConfig): Llama's gated MLP, untied
    "ministral": (True, False),
    "ministral3": (True, False),
    "internlm3": (True, False),
    "stablelm": (True, False),
    "phi": (False, False),
    "gpt_neox": (False, False),
    "starcoder2": (False, True),
}
