"""A tiny Qwen3 for the real-engine suite, made here (no model hub): the Qwen3 architecture with
2 layers, hidden size 64, 4 attention and 2 KV heads of 32 (vLLM's CPU attention takes head sizes
from 32 up), the real 151,936-token vocabulary, seeded random weights as safetensors, and the real
Qwen3 tokenizer.json and tokenizer_config.json (chat template) that `builtin:qwen3` ships. Its
answers are nonsense; its tokenizer, template, prefix cache, usage and KV events are vLLM's own.

SIZE `prefill` makes the same with 4 layers, hidden size 256, 4 attention and 2 KV heads of 64:
a 2k-token prompt then takes about 0.25 s to first token on one core, several times a cached
one's (docs/real_policy_comparison.md), as prefill dominates a GPU engine's time to first token.

usage: make_tiny_qwen3.py OUT_DIR TOKENIZER_DIR [tiny|prefill]
"""
import shutil
import sys

import torch
from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

out, tokenizer_dir = sys.argv[1], sys.argv[2]
size = sys.argv[3] if len(sys.argv) > 3 else "tiny"
SIZES = {
    "tiny": dict(num_hidden_layers=2, hidden_size=64, intermediate_size=128, head_dim=32),
    "prefill": dict(num_hidden_layers=4, hidden_size=256, intermediate_size=768, head_dim=64),
}
config = Qwen3Config(
    **SIZES[size],
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=151936,
    max_position_embeddings=8192,
    tie_word_embeddings=True,
    bos_token_id=151643,
    eos_token_id=151645,
    torch_dtype="bfloat16",
)
torch.manual_seed(0)
model = Qwen3ForCausalLM(config).to(torch.bfloat16)
model.save_pretrained(out, safe_serialization=True)
GenerationConfig(bos_token_id=151643, eos_token_id=[151645, 151643], pad_token_id=151643).save_pretrained(out)
for name in ("tokenizer.json", "tokenizer_config.json"):
    shutil.copy(f"{tokenizer_dir}/{name}", out)
print(f"{size} Qwen3: {sum(p.numel() for p in model.parameters())} parameters in {out}")
