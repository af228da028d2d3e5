"""PyTorch side of the end-to-end TSP benchmark of issue 5: the model of
models/tsp.kiln (linear city embedding, pre-LN encoder blocks whose attention
adds -slope[h] * (h + 1) * dist(i, j) with a LEARNED per-head slope and masks
keys j >= lengths[b], a pointer loss over the real cities) written the way people
write it today: FlexAttention (score_mod closing over the coordinates and the
slope, a block mask from the lengths rebuilt every batch), torch.compile, bf16
autocast, fused AdamW. Prints one JSON line with samples/s and step time.

    python3 tools/bench/torch_tsp.py --n-min 10 --n-max 20 --steps 50          # GPU
    python3 tools/bench/torch_tsp.py --device cpu --precision fp32 --steps 3 \\
        --warmup 1 --no-compile                                                 # smoke

Throughput only: the targets are the successors of a random tour (the same
amount of work as a solver's tour), so the loss is not comparable with kiln-run's.
Without FlexAttention (torch < 2.5) the attention falls back to the eager
[N, N] softmax form and the JSON line says so.
"""
import argparse
import json
import math
import time

import torch
import torch.nn.functional as F

try:
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    FLEX_MISSING = None
except ImportError as e:
    flex_attention = create_block_mask = None
    FLEX_MISSING = f"FlexAttention needs torch >= 2.5; this is torch {torch.__version__} ({e})"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--n-min", type=int, default=10)
    p.add_argument("--n-max", type=int, default=20)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=30, help="timed steps, after --warmup")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--no-compile", action="store_true", help="eager (torch < 2 has no compile)")
    p.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


def batch_of_instances(B, n_min, n_max, gen, device):
    """coords [B, n_max, 2] (padding zero), lengths [B], targets [B, n_max]
    (successor in a random tour; n_max on padding, ignored)."""
    lengths = torch.randint(n_min, n_max + 1, (B,), generator=gen)
    slot = torch.arange(n_max).view(1, n_max)
    real = slot < lengths.view(B, 1)
    coords = torch.rand(B, n_max, 2, generator=gen) * real.unsqueeze(-1)
    # A random tour per sample, vectorized (no per-sample Python loop in the
    # timed step): sorting random keys with padding last puts a random
    # permutation of the real cities in the first lengths[b] positions.
    keys = torch.rand(B, n_max, generator=gen).masked_fill(~real, 2.0)
    tour = keys.argsort(dim=1)                                     # [B, n_max]
    following = torch.where(slot + 1 < lengths.view(B, 1), slot + 1, torch.zeros_like(slot))
    targets = torch.full((B, n_max), -100, dtype=torch.long)
    targets.scatter_(1, tour, tour.gather(1, following))
    targets[~real] = -100
    return coords.to(device), lengths.to(device), targets.to(device)


class Block(torch.nn.Module):
    def __init__(self, C, H, L):
        super().__init__()
        self.H, self.D = H, C // H
        self.ln1, self.ln2 = torch.nn.LayerNorm(C), torch.nn.LayerNorm(C)
        self.qkv = torch.nn.Linear(C, 3 * C, bias=False)
        self.proj = torch.nn.Linear(C, C)
        self.slope = torch.nn.Parameter(torch.ones(H))
        self.fc, self.fc_proj = torch.nn.Linear(C, 4 * C), torch.nn.Linear(4 * C, C)
        for w in (self.qkv.weight, self.fc.weight):
            torch.nn.init.normal_(w, std=0.02)
        for w in (self.proj.weight, self.fc_proj.weight):
            torch.nn.init.normal_(w, std=0.02 / math.sqrt(2 * L))

    def attention(self, q, k, v, coords, lengths, block_mask):
        slope = self.slope
        if block_mask is not None:
            def score(s, b, h, i, j):
                dx = coords[b, i, 0] - coords[b, j, 0]
                dy = coords[b, i, 1] - coords[b, j, 1]
                return s - slope[h] * (h + 1) * torch.sqrt(dx * dx + dy * dy + 1e-6)
            return flex_attention(q, k, v, score_mod=score, block_mask=block_mask)
        # Eager fallback: the [B, H, N, N] bias and mask materialized.
        N = q.shape[2]
        diff = coords.unsqueeze(2) - coords.unsqueeze(1)
        dist = torch.sqrt((diff * diff).sum(-1) + 1e-6).unsqueeze(1)       # [B, 1, N, N]
        heads = torch.arange(1, self.H + 1, device=q.device).view(1, -1, 1, 1)
        s = q @ k.transpose(-1, -2) / math.sqrt(self.D) - (slope.view(1, -1, 1, 1) * heads) * dist
        pad = torch.arange(N, device=q.device).view(1, 1, 1, N) >= lengths.view(-1, 1, 1, 1)
        return torch.softmax(s.float().masked_fill(pad, -math.inf), dim=-1).to(v.dtype) @ v

    def forward(self, x, coords, lengths, block_mask):
        B, N, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(B, N, 3, self.H, self.D).permute(2, 0, 3, 1, 4)
        y = self.attention(q, k, v, coords, lengths, block_mask)
        x = x + self.proj(y.transpose(1, 2).reshape(B, N, C))
        return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class TspModel(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        C = a.dim
        self.embed = torch.nn.Linear(2, C)
        torch.nn.init.normal_(self.embed.weight, std=0.5)
        torch.nn.init.zeros_(self.embed.bias)
        self.blocks = torch.nn.ModuleList(Block(C, a.heads, a.layers) for _ in range(a.layers))
        self.lnf = torch.nn.LayerNorm(C)
        self.w_from = torch.nn.Linear(C, C, bias=False)
        self.w_to = torch.nn.Linear(C, C, bias=False)
        for w in (self.w_from.weight, self.w_to.weight):
            torch.nn.init.normal_(w, std=0.02)

    def forward(self, coords, lengths, targets, block_mask):
        x = self.embed(coords)                                                # [B, N, C]
        for blk in self.blocks:
            x = blk(x, coords, lengths, block_mask)
        x = self.lnf(x)
        logits = self.w_from(x) @ self.w_to(x).transpose(1, 2) / math.sqrt(x.shape[-1])
        N = logits.shape[-1]
        pad = torch.arange(N, device=x.device).view(1, 1, N) >= lengths.view(-1, 1, 1)
        logits = logits.float().masked_fill(pad, -math.inf)
        # Mean over all B * N slots like kiln.cross_entropy (padded ones count 0).
        nll = F.cross_entropy(logits.view(-1, N), targets.view(-1), ignore_index=-100,
                              reduction="sum")
        return nll / targets.numel()


def main():
    a = parse_args()
    torch.manual_seed(a.seed)
    gen = torch.Generator().manual_seed(a.seed)
    dev = a.device
    use_flex = FLEX_MISSING is None
    model = TspModel(a).to(dev)
    fused = dev.startswith("cuda") and "fused" in torch.optim.AdamW.__init__.__code__.co_varnames
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=0.0, **({"fused": True} if fused else {}))
    compiled = not a.no_compile and hasattr(torch, "compile")
    fwd = torch.compile(model) if compiled else model
    autocast = a.precision == "bf16"

    def step():
        coords, lengths, targets = batch_of_instances(a.batch, a.n_min, a.n_max, gen, dev)
        block_mask = None
        if use_flex:  # new lengths every batch: a new block mask every step
            block_mask = create_block_mask(lambda b, h, i, j: j < lengths[b], a.batch, None,
                                           a.n_max, a.n_max, device=dev)
        with torch.autocast(device_type=dev.split(":")[0], dtype=torch.bfloat16, enabled=autocast):
            loss = fwd(coords, lengths, targets, block_mask)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    sync = torch.cuda.synchronize if dev.startswith("cuda") else (lambda: None)
    for _ in range(a.warmup):
        step()
    sync()
    t = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    sync()
    seconds = time.perf_counter() - t
    print(json.dumps({
        "torch": torch.__version__, "device": dev, "precision": a.precision,
        "attention": "flex_attention" if use_flex else f"eager softmax ({FLEX_MISSING})",
        "compiled": compiled, "batch": a.batch, "cities": f"{a.n_min}-{a.n_max}",
        "steps": a.steps, "step_ms": seconds / a.steps * 1e3,
        "samples_per_s": a.batch * a.steps / seconds, "final_loss": loss.item()}))


if __name__ == "__main__":
    main()
