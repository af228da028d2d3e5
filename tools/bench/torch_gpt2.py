"""PyTorch baseline for the GPT-2 124M benchmark of issue 3: the same model as
models/gpt2.kiln (pre-LN blocks, tied embedding, tanh GELU, biases), trained on
random tokens with bf16 autocast, fused AdamW, SDPA attention and torch.compile,
as people run it today. Prints one JSON line with tokens/s, step time, peak
memory, MFU and the attention share of the step (measured separately with the
profiler), so tools/bench/gpt2_bench.sh can put it beside kiln-run's figures.

    python3 torch_gpt2.py --batch 16 --seq 1024 --steps 30           # on a GPU
    python3 torch_gpt2.py --device cpu --layers 2 --dim 64 --heads 2 \
        --vocab 300 --batch 2 --seq 32 --steps 3 --no-compile          # smoke test

FLOPs are counted like kilnc counts them (flops_per_step in the artifact): every
matmul of the step, forward (1x) and backward (2x), attention's QK^T and PV
included, over the full [T, T] score matrix; elementwise work is not counted.
"""
import math

import torch
import torch.nn.functional as F

import torch_bench_common as common


def parse_args():
    p = common.parser(__doc__.split("\n\n")[0], vocab=50257, dim=768, layers=12, heads=12,
                      batch=16, seq=1024, steps=30)
    p.add_argument("--ctx", type=int, default=1024)
    return p.parse_args()


def attention(q, k, v):
    """Causal attention: SDPA (flash on a GPU); torch < 2 (the CPU smoke test
    on Debian's torch 1.13) has no SDPA and gets the plain softmax form."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    T = q.shape[-2]
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    s = s.masked_fill(torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


class GPT2(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        C, L = a.dim, a.layers
        self.heads = a.heads
        normal = lambda *s, std=0.02: torch.nn.Parameter(torch.randn(*s) * std)
        zeros = lambda *s: torch.nn.Parameter(torch.zeros(*s))
        ones = lambda *s: torch.nn.Parameter(torch.ones(*s))
        self.wte, self.wpe = normal(a.vocab, C), normal(a.ctx, C)
        self.lnf_w, self.lnf_b = ones(C), zeros(C)
        proj_std = 0.02 / math.sqrt(2 * L)
        self.blocks = torch.nn.ModuleList()
        for _ in range(L):
            b = torch.nn.Module()
            b.ln1_w, b.ln1_b, b.ln2_w, b.ln2_b = ones(C), zeros(C), ones(C), zeros(C)
            b.wqkv, b.bqkv = normal(C, 3 * C), zeros(3 * C)
            b.wo, b.bo = normal(C, C, std=proj_std), zeros(C)
            b.w_fc, b.b_fc = normal(C, 4 * C), zeros(4 * C)
            b.w_proj, b.b_proj = normal(4 * C, C, std=proj_std), zeros(C)
            self.blocks.append(b)

    def forward(self, tokens, targets):
        B, T = tokens.shape
        C = self.wte.shape[1]
        x = self.wte[tokens] + self.wpe[:T]                                  # [B, T, C]
        for b in self.blocks:
            h = F.layer_norm(x, (C,), b.ln1_w, b.ln1_b, 1e-5)
            q, k, v = (h @ b.wqkv + b.bqkv).split(C, dim=-1)
            q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
            y = attention(q, k, v)                                           # [B, H, T, D]
            x = x + y.transpose(1, 2).reshape(B, T, C) @ b.wo + b.bo
            h = F.layer_norm(x, (C,), b.ln2_w, b.ln2_b, 1e-5)
            x = x + F.gelu(h @ b.w_fc + b.b_fc, approximate="tanh") @ b.w_proj + b.b_proj
        x = F.layer_norm(x, (C,), self.lnf_w, self.lnf_b, 1e-5)
        logits = x @ self.wte.t()                                            # [B, T, V]
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def flops_per_step(a):
    """2*M*N*K for every matmul, forward + backward (x3)."""
    B, T, C, L, V = a.batch, a.seq, a.dim, a.layers, a.vocab
    per_layer = 2 * B * T * C * (3 * C + C + 4 * C + 4 * C) + 2 * 2 * B * T * T * C
    return 3 * (L * per_layer + 2 * B * T * C * V)


def main():
    a = parse_args()
    torch.manual_seed(0)
    common.train_and_report(a, GPT2(a), flops_per_step(a))


if __name__ == "__main__":
    main()
