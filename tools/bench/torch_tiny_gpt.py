"""PyTorch (CPU, float32, eager) training throughput of models/tiny_gpt.kiln's
model, for comparison with kiln-run on the same machine: written the way
people write it (nn.Linear, nn.Embedding, F.layer_norm, F.gelu with tanh,
F.scaled_dot_product_attention where torch has it, torch.optim.AdamW), with
tiny_gpt.kiln's sizes, initialisation, batch and optimizer settings; byte
tokens of DATA, consecutive windows.

    python3 torch_tiny_gpt.py DATA STEPS THREADS [--layers N --dim C --heads H
                                                  --batch B --seq T --warmup W]

Prints one line: steps, seconds, tokens/s, final loss.
"""
import argparse
import math
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("data")
    p.add_argument("steps", type=int, help="timed steps, after --warmup")
    p.add_argument("threads", type=int)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--warmup", type=int, default=5)
    return p.parse_args()


class Block(nn.Module):
    def __init__(self, dim, heads, layers):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim, eps=1e-5), nn.LayerNorm(dim, eps=1e-5)
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim) for _ in range(4))
        self.fc, self.proj = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
        for lin in (self.q, self.k, self.v, self.fc):
            nn.init.normal_(lin.weight, std=0.02)
        for lin in (self.o, self.proj):  # scaled by depth, as tiny_gpt.kiln
            nn.init.normal_(lin.weight, std=0.02 / math.sqrt(2 * layers))
        for lin in (self.q, self.k, self.v, self.o, self.fc, self.proj):
            nn.init.zeros_(lin.bias)

    def attention(self, h):
        B, T, C = h.shape
        q, k, v = (lin(h).view(B, T, self.heads, C // self.heads).transpose(1, 2)
                   for lin in (self.q, self.k, self.v))
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # torch < 2.0 (Debian's 1.13)
            s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
            s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
            y = torch.softmax(s, dim=-1) @ v
        return self.o(y.transpose(1, 2).reshape(B, T, C))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class TinyGpt(nn.Module):
    def __init__(self, a, vocab=256, ctx=128):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, a.dim), nn.Embedding(ctx, a.dim)
        nn.init.normal_(self.wte.weight, std=0.02)
        nn.init.normal_(self.wpe.weight, std=0.02)
        self.blocks = nn.ModuleList(Block(a.dim, a.heads, a.layers) for _ in range(a.layers))
        self.lnf = nn.LayerNorm(a.dim, eps=1e-5)

    def forward(self, tokens, targets):
        T = tokens.shape[1]
        x = self.wte(tokens) + self.wpe(torch.arange(T))
        for block in self.blocks:
            x = block(x)
        logits = self.lnf(x) @ self.wte.weight.t()  # tied embedding
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def main():
    a = parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    data = torch.from_numpy(np.fromfile(a.data, dtype=np.uint8).astype(np.int64))
    model = TinyGpt(a)
    # Weight decay on the matrices but the embeddings, as Kiln's adamw.
    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and "wte" not in n and "wpe" not in n]
    other = [p for n, p in model.named_parameters() if not (p.dim() == 2 and "wte" not in n and "wpe" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    window = a.batch * a.seq + 1
    for s in range(a.warmup + a.steps):
        if s == a.warmup:
            start = time.perf_counter()
        offset = (s * a.batch * a.seq) % (len(data) - window)
        chunk = data[offset:offset + window]
        x, y = chunk[:-1].view(a.batch, a.seq), chunk[1:].view(a.batch, a.seq)
        opt.zero_grad(set_to_none=True)
        loss = model(x, y)
        loss.backward()
        opt.step()
    seconds = time.perf_counter() - start
    print(f"torch {torch.__version__} CPU fp32, {a.threads} threads: {a.steps} steps in {seconds:.2f} s, "
          f"{a.steps * a.batch * a.seq / seconds:.0f} tokens/s, final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
