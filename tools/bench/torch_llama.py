"""PyTorch baseline for the Llama-3 1B benchmark of issue 14: the same model as
models/llama3_1b.kiln (pre-norm RMSNorm blocks, RoPE with Hugging Face's
pairing, grouped-query attention, SwiGLU, tied embedding, no biases), trained
on random tokens with bf16 autocast, fused AdamW, SDPA attention (GQA through
enable_gqa) and torch.compile. Prints the JSON line of torch_bench_common.

    python3 torch_llama.py --batch 16 --seq 2048 --steps 10          # on a GPU
    python3 torch_llama.py --device cpu --layers 2 --dim 64 --heads 4 --kv-heads 2 \\
        --vocab 300 --batch 2 --seq 32 --steps 3 --no-compile --precision fp32

FLOPs are counted like kilnc counts them: every matmul, forward (1x) and
backward (2x), attention over the full [T, T] score matrix.
"""
import math

import torch
import torch.nn.functional as F
import torch.utils.checkpoint

import torch_bench_common as common


def parse_args():
    p = common.parser(__doc__.split("\n\n")[0], vocab=131072, dim=2048, layers=16, heads=32,
                      batch=16, seq=2048, steps=10)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--theta", type=float, default=500000.0)
    p.add_argument("--checkpoint", action="store_true",
                   help="recompute every block in the backward (torch.utils.checkpoint)")
    return p.parse_args()


def rope(x, cos, sin):
    """Hugging Face's rotate_half pairing: (i, i + D/2)."""
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


def attention(q, k, v):
    """Causal grouped-query attention: SDPA with enable_gqa (torch >= 2.5); older
    torch (the CPU smoke test) repeats k and v and uses the softmax form."""
    groups = q.shape[1] // k.shape[1]
    try:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=groups > 1)
    except (AttributeError, TypeError):
        k, v = (t.repeat_interleave(groups, dim=1) for t in (k, v))
        T = q.shape[-2]
        s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
        return torch.softmax(s, dim=-1) @ v


def rms_norm(x, w, eps=1e-5):
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps).to(x.dtype) * w


class Llama(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        C, L, H, KV = a.dim, a.layers, a.heads, a.kv_heads
        D = C // H
        self.heads, self.kv_heads, self.head_dim = H, KV, D
        self.checkpoint = a.checkpoint
        ffn = 4 * C
        normal = lambda *s, std: torch.nn.Parameter(torch.randn(*s) * std)
        ones = lambda *s: torch.nn.Parameter(torch.ones(*s))
        self.wte, self.norm = normal(a.vocab, C, std=0.02), ones(C)
        out_scale = 1 / math.sqrt(2 * L)
        self.blocks = torch.nn.ModuleList()
        for _ in range(L):
            b = torch.nn.Module()
            b.attn_norm, b.mlp_norm = ones(C), ones(C)
            b.wq = normal(C, C, std=1 / math.sqrt(C))
            b.wk, b.wv = normal(C, KV * D, std=1 / math.sqrt(C)), normal(C, KV * D, std=1 / math.sqrt(C))
            b.wo = normal(C, C, std=out_scale / math.sqrt(C))
            b.w1, b.w3 = normal(C, ffn, std=1 / math.sqrt(C)), normal(C, ffn, std=1 / math.sqrt(C))
            b.w2 = normal(ffn, C, std=out_scale / math.sqrt(ffn))
            self.blocks.append(b)
        inv = 1.0 / (a.theta ** (torch.arange(0, D, 2, dtype=torch.float32) / D))
        angles = torch.outer(torch.arange(a.seq, dtype=torch.float32), inv)
        angles = torch.cat((angles, angles), dim=-1)                          # [T, D]
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def block(self, b, x, cos, sin):
        B, T, C = x.shape
        H, KV, D = self.heads, self.kv_heads, self.head_dim
        h = rms_norm(x, b.attn_norm)
        q = rope((h @ b.wq).view(B, T, H, D).transpose(1, 2), cos, sin)
        k = rope((h @ b.wk).view(B, T, KV, D).transpose(1, 2), cos, sin)
        v = (h @ b.wv).view(B, T, KV, D).transpose(1, 2)
        y = attention(q, k, v)                                                # [B, H, T, D]
        x = x + y.transpose(1, 2).reshape(B, T, C) @ b.wo
        h = rms_norm(x, b.mlp_norm)
        return x + (F.silu(h @ b.w1) * (h @ b.w3)) @ b.w2

    def forward(self, tokens, targets):
        T = tokens.shape[1]
        cos, sin = self.cos[:T], self.sin[:T]
        x = self.wte[tokens]                                                  # [B, T, C]
        for b in self.blocks:
            if self.checkpoint:
                x = torch.utils.checkpoint.checkpoint(self.block, b, x, cos, sin, use_reentrant=False)
            else:
                x = self.block(b, x, cos, sin)
        x = rms_norm(x, self.norm)
        logits = x @ self.wte.t()                                             # [B, T, V]
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def flops_per_step(a):
    """2*M*N*K for every matmul, forward + backward (x3)."""
    B, T, C, L, V = a.batch, a.seq, a.dim, a.layers, a.vocab
    kv = a.kv_heads * (C // a.heads)
    per_layer = 2 * B * T * C * (C + 2 * kv + C + 3 * 4 * C) + 2 * 2 * B * T * T * C
    return 3 * (L * per_layer + 2 * B * T * C * V)


def main():
    a = parse_args()
    torch.manual_seed(0)
    common.train_and_report(a, Llama(a), flops_per_step(a), no_decay=("wte",))


if __name__ == "__main__":
    main()
