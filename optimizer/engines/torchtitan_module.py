"""A torchtitan 0.3.0 config module for a Llama model no registry flavor has.

torchtitan takes a model's shape only from Python: `Trainer.Config.model_spec` is kept off
the command line (trainer.py:75-77) and set by a config function. `--module` accepts a module
of the user's own by its dotted path (config/manager.py:125-141), and `--config` names a
function in it (manager.py:143-158). So the export for such a model is that module: a config
function that builds the shape as the registry's flavors do (`_build_llama3_layers` and
`Llama3Model.Config`, models/llama3/__init__.py:69-111, 236-274), on the training settings of
`llama3_8b` (models/llama3/config_registry.py:184-216), with the job's layout as command-line
arguments the module passes on when run by torchrun.
"""

from __future__ import annotations

import json

from models.job import TrainingJob
from models.transformer import TransformerSpec

from .base import Artefact

FILENAME = "layoutopt_torchtitan.py"
# Llama 3's rotary embedding as every llama3 flavor sets it (__init__.py:265-270).
ROPE_THETA = 500_000
ROPE_MAX_SEQ_LEN = 131_072


def custom_module(job: TrainingJob, summary: list[str], args: list[str]) -> Artefact:
    """The module's text: `summary` (the layout in words, a line each, as comments: the model's
    name is request text, and a comment line is the one place no text can end) and `args` (the
    command line of the layout, as for a registry config) around the model's shape."""
    usage = [
        *summary,
        "No registry flavor has this shape, and torchtitan reads a shape only from Python",
        "(trainer.py:75-77), so this file is the config module. Save it as",
        f"{FILENAME} and run: torchrun --nproc_per_node=8 {FILENAME}",
        "It passes ARGS to torchtitan.train with --module (this module: a module path of your",
        "own, config/manager.py:125-141) and --config layoutopt_model. Add --hf_assets_path",
        f"with a tokenizer of {job.model.vocab_size} tokens.",
    ]
    text = (
        "".join(f"# {line}\n" for line in usage)
        + f"\n{_imports()}\n\n"
        + f"ARGS = {json.dumps(args, indent=4)}\n\n\n"
        + f"{_config_function(job.model, job.training.seq_len)}\n\n"
        + _main()
    )
    return Artefact("torchtitan", "torchtitan-config-module", FILENAME, text)


def _imports() -> str:
    return (
        "import dataclasses\n"
        "import pathlib\n"
        "import sys\n\n"
        "from torchtitan.components.loss import ChunkedLossWrapper, CrossEntropyLoss\n"
        "from torchtitan.models.common import ComplexRoPE, Embedding, Linear, RMSNorm\n"
        "from torchtitan.models.llama3 import (\n"
        "    _EMBEDDING_INIT,\n"
        "    _EMBEDDING_SKIP_INIT,\n"
        "    _NORM_INIT,\n"
        "    Llama3Model,\n"
        "    _build_llama3_layers,\n"
        "    _output_linear_init,\n"
        "    model_registry,\n"
        ")\n"
        "from torchtitan.models.llama3.config_registry import llama3_8b\n"
        "from torchtitan.trainer import Trainer\n"
    )


def _config_function(m: TransformerSpec, seq_len: int) -> str:
    """`layoutopt_model`: llama3_8b's settings with this model, built as a flavor is; a tied
    model skips the embedding's own init, as the tied 1B flavor does (__init__.py:148-189)."""
    embedding_init = "_EMBEDDING_SKIP_INIT" if m.tied_embeddings else "_EMBEDDING_INIT"
    return (
        "def layoutopt_model() -> Trainer.Config:\n"
        f"    dim, vocab_size = {m.hidden_size}, {m.vocab_size}\n"
        "    model = Llama3Model.Config(\n"
        "        dim=dim,\n"
        "        vocab_size=vocab_size,\n"
        f"        enable_weight_tying={m.tied_embeddings},\n"
        "        tok_embeddings=Embedding.Config(\n"
        f"            num_embeddings=vocab_size, embedding_dim=dim, param_init={embedding_init}\n"
        "        ),\n"
        "        norm=RMSNorm.Config(normalized_shape=dim, param_init=_NORM_INIT),\n"
        "        lm_head=Linear.Config(\n"
        "            in_features=dim, out_features=vocab_size, "
        "param_init=_output_linear_init(dim)\n"
        "        ),\n"
        "        layers=_build_llama3_layers(\n"
        "            fuse_qkv=True,\n"
        f"            n_layers={m.num_layers},\n"
        "            dim=dim,\n"
        f"            n_heads={m.num_attention_heads},\n"
        f"            n_kv_heads={m.num_kv_heads},\n"
        f"            hidden_dim={m.ffn_hidden_size},\n"
        "            rope=ComplexRoPE.Config(\n"
        f"                dim=dim // {m.num_attention_heads},\n"
        f"                max_seq_len={max(ROPE_MAX_SEQ_LEN, seq_len)},\n"
        f"                theta={ROPE_THETA},\n"
        '                scaling="llama",\n'
        "            ),\n"
        '            attn_backend="flex",\n'
        "        ),\n"
        "    )\n"
        "    config = llama3_8b()\n"
        '    config.model_spec = dataclasses.replace(model_registry("8B"), flavor="layoutopt", '
        "model=model)\n"
        "    config.loss = ChunkedLossWrapper.Config(\n"
        "        loss_fn=CrossEntropyLoss.Config(global_vocab_size=vocab_size)\n"
        "    )\n"
        "    return config\n"
    )


def _main() -> str:
    return (
        'if __name__ == "__main__":\n'
        "    from torchtitan.train import main\n\n"
        "    module = pathlib.Path(__file__).stem\n"
        '    sys.argv[1:] = ["--module", module, "--config", "layoutopt_model", *ARGS]\n'
        "    main()\n"
    )
