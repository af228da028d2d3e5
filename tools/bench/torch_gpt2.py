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
import argparse
import json
import math
import time

import torch
import torch.nn.functional as F

# Dense bf16 tensor-core peaks (TFLOP/s) of the GPUs we benchmark on, by name
# fragment; the same table as runtime/metrics/PeakFlops.
PEAK_BF16_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--dim", type=int, default=768)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--ctx", type=int, default=1024)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--steps", type=int, default=30, help="timed steps, after --warmup")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--no-compile", action="store_true", help="eager (torch < 2 has no compile)")
    p.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
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


def attention_seconds(model, tokens, targets, ctx):
    """Seconds per step spent in attention kernels (forward + backward), from the profiler."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        with ctx:
            loss = model(tokens, targets)
        loss.backward()
        torch.cuda.synchronize()
    keys = ("flash", "fmha", "attention", "sdpa", "cudnn")
    us = sum(e.self_device_time_total for e in prof.key_averages()
             if any(k in e.key.lower() for k in keys))
    return us / 1e6


def main():
    a = parse_args()
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    torch.manual_seed(0)
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
    model = GPT2(a).to(dev)
    fused = {"fused": True} if cuda else {}
    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and n not in ("wte", "wpe")]
    other = [p for n, p in model.named_parameters() if not (p.dim() == 2 and n not in ("wte", "wpe"))]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": other, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8, **fused)
    step_fn = model if a.no_compile else torch.compile(model)
    if a.precision == "bf16":
        ctx = torch.autocast(device_type=dev.type, dtype=torch.bfloat16)
    else:
        ctx = torch.autocast(device_type=dev.type, enabled=False)
    g = torch.Generator(device="cpu").manual_seed(1)
    tokens = torch.randint(0, a.vocab, (a.batch, a.seq), generator=g).to(dev)
    targets = torch.randint(0, a.vocab, (a.batch, a.seq), generator=g).to(dev)

    def step():
        opt.zero_grad(set_to_none=True)
        with ctx:
            loss = step_fn(tokens, targets)
        loss.backward()
        opt.step()
        return loss

    compile_start = time.perf_counter()
    for _ in range(a.warmup):
        loss = step()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    warmup_s = time.perf_counter() - compile_start
    start = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    if cuda:
        torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / a.steps
    result = {
        "framework": f"torch {torch.__version__}" + ("" if a.no_compile else " compile"),
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "precision": a.precision,
        "batch": a.batch, "seq": a.seq,
        "step_ms": round(seconds * 1e3, 3),
        "tokens_per_s": round(a.batch * a.seq / seconds, 1),
        "warmup_s": round(warmup_s, 2),
        "final_loss": round(loss.item(), 4),
    }
    tflops = flops_per_step(a) / seconds / 1e12
    result["model_tflops"] = round(tflops, 2)
    if cuda:
        result["peak_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 3)
        peak = next((v for k, v in PEAK_BF16_TFLOPS.items() if k in result["device"]), None)
        if peak:
            result["mfu"] = round(tflops / peak, 4)
        result["attention_ms"] = round(attention_seconds(step_fn, tokens, targets, ctx) * 1e3, 3)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
