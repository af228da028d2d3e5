"""What the PyTorch baselines of the training benchmarks share
(tools/bench/torch_gpt2.py, tools/bench/torch_llama.py): the command-line
flags every model takes, the training loop as people run it today (bf16
autocast, fused AdamW, torch.compile), its timing, and the JSON line that the
bench scripts put beside kiln-run's figures.
"""
import argparse
import json
import time

import torch

# Dense bf16 tensor-core peaks (TFLOP/s) of the GPUs we benchmark on, by name
# fragment; the same table as runtime/metrics/PeakFlops.
PEAK_BF16_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0}


def parser(description, vocab, dim, layers, heads, batch, seq, steps):
    """The flags of every baseline, with the model's defaults."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--device", default="cuda")
    p.add_argument("--vocab", type=int, default=vocab)
    p.add_argument("--dim", type=int, default=dim)
    p.add_argument("--layers", type=int, default=layers)
    p.add_argument("--heads", type=int, default=heads)
    p.add_argument("--batch", type=int, default=batch)
    p.add_argument("--seq", type=int, default=seq)
    p.add_argument("--steps", type=int, default=steps, help="timed steps, after --warmup")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--no-compile", action="store_true", help="eager (torch < 2 has no compile)")
    p.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--kernels", type=int, default=0, metavar="N",
                   help="after the timing, profile one step and print its N costliest "
                        "CUDA kernels and the time by kind (GEMM, attention, other)")
    return p


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


GEMM_KEYS = ("gemm", "cutlass", "sm90_xmma", "sm80_xmma", "nvjet", "cublas",
             "aten::mm", "aten::addmm", "aten::bmm")
ATTENTION_KEYS = ("flash", "fmha", "attention", "sdpa", "cudnn")


def print_kernels(step, count, cuda):
    """One profiled training step (forward, backward, optimizer): its `count`
    costliest CUDA kernels by self device time (on the CPU: operators by self
    CPU time), and the totals by kind, so a Kiln --profile table of the same
    model can be read against it."""
    from torch.profiler import ProfilerActivity, profile
    activity = ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU
    with profile(activities=[activity]) as prof:
        step()
        if cuda:
            torch.cuda.synchronize()
    field = "self_device_time_total" if cuda else "self_cpu_time_total"
    rows = [(getattr(e, field), e.count, e.key) for e in prof.key_averages()
            if getattr(e, field) > 0]
    rows.sort(reverse=True)
    total = sum(r[0] for r in rows)

    def kind(key):
        k = key.lower()
        if any(a in k for a in ATTENTION_KEYS):
            return "attention"
        return "GEMM" if any(g in k for g in GEMM_KEYS) else "other"

    by_kind = {}
    for us, calls, key in rows:
        t = by_kind.setdefault(kind(key), [0.0, 0])
        t[0] += us
        t[1] += calls
    print(f"torch {'kernels' if cuda else 'operators'}, one profiled step: "
          f"{total / 1e3:.3f} ms, " + ", ".join(
        f"{k} {v[0] / 1e3:.3f} ms ({v[1]} calls)" for k, v in sorted(by_kind.items())))
    print("   time%      ms  calls  kernel")
    for us, calls, key in rows[:count]:
        print(f"  {100 * us / total:5.1f}% {us / 1e3:7.3f} {calls:6d}  {key[:110]}")


def train_and_report(a, model, flops_per_step, no_decay=("wte", "wpe")):
    """Trains `model` (called as model(tokens, targets) -> loss) on random
    tokens for a.warmup + a.steps steps of AdamW (weight decay 0.1 on the
    matrices but the embeddings) and prints one JSON line of figures."""
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
    model = model.to(dev)
    fused = {"fused": True} if cuda else {}
    named = list(model.named_parameters())
    decay = [p for n, p in named if p.dim() == 2 and n not in no_decay]
    other = [p for n, p in named if not (p.dim() == 2 and n not in no_decay)]
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
    tflops = flops_per_step / seconds / 1e12
    result["model_tflops"] = round(tflops, 2)
    if cuda:
        result["peak_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 3)
        peak = next((v for k, v in PEAK_BF16_TFLOPS.items() if k in result["device"]), None)
        if peak:
            result["mfu"] = round(tflops / peak, 4)
        result["attention_ms"] = round(attention_seconds(step_fn, tokens, targets, ctx) * 1e3, 3)
    print(json.dumps(result))
    if a.kernels > 0:
        print_kernels(step, a.kernels, cuda)
