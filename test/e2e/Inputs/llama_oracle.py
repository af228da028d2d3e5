"""An independent PyTorch implementation of models/llama3_1b.kiln: the oracle.

  llama_oracle.py --heads H --kv-heads KVH --theta THETA [--eps E] \
      INIT GRADS BATCHES METRICS --steps N --lr X [tiny_gpt_oracle options]

The same checks as tiny_gpt_oracle.py (its harness: step 1's loss, every
gradient and the global norm, then N steps of torch.optim AdamW, all in
float64, relative 1e-4; see there for why that tolerance is right), with the
model swapped for Llama's, written as Hugging Face's LlamaForCausalLM
computes it: RMSNorm, rotary embedding with rotate_half, grouped-query
attention repeating each kv head for H / KVH consecutive query heads,
SwiGLU (silu(x w1) * x w3) w2, tied embeddings, no biases. Vocabulary, width
and depth come from the saved parameters. Weight decay: the harness's rule
(matrices decay; norm weights and the embedding table do not), which is
Kiln's default.
"""
import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
import tiny_gpt_oracle as harness  # noqa: E402

CONFIG = {}


def rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def forward(P, tokens, targets, metrics=None):
    B, T = tokens.shape
    H, KVH, eps = CONFIG["heads"], CONFIG["kv_heads"], CONFIG["eps"]
    V, C = P["wte"].shape
    D = C // H
    inv_freq = 1.0 / (CONFIG["theta"] ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    freqs = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    rope = lambda t: t * emb.cos() + rotate_half(t) * emb.sin()
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    x = P["wte"][tokens]
    layers = len({n.split(".")[1] for n in P if n.startswith("Block.")})
    for l in range(layers):
        p = lambda n: P[f"Block.{l}.{n}"]
        h = rms_norm(x, p("attn_norm"), eps)
        q = rope((h @ p("wq")).view(B, T, H, D).transpose(1, 2))
        k = rope((h @ p("wk")).view(B, T, KVH, D).transpose(1, 2))
        v = (h @ p("wv")).view(B, T, KVH, D).transpose(1, 2)
        k = k.repeat_interleave(H // KVH, dim=1)  # query head h reads kv head h // (H / KVH)
        v = v.repeat_interleave(H // KVH, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(D)
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ p("wo")
        h = rms_norm(x, p("mlp_norm"), eps)
        x = x + (F.silu(h @ p("w1")) * (h @ p("w3"))) @ p("w2")
    x = rms_norm(x, P["norm"], eps)
    logits = x @ P["wte"].T
    return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1).long())


if __name__ == "__main__":
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--kv-heads", type=int, required=True)
    ap.add_argument("--theta", type=float, required=True)
    ap.add_argument("--eps", type=float, default=1e-5)
    known, rest = ap.parse_known_args()
    CONFIG.update(heads=known.heads, kv_heads=known.kv_heads, theta=known.theta, eps=known.eps)
    harness.forward = forward  # the harness calls its module's forward
    sys.argv = [sys.argv[0]] + rest
    harness.main()
