"""PyTorch side of the attention benchmark of issue 5: forward and backward TFLOP/s
of FlexAttention (compiled) and SDPA (cuDNN, flash, memory-efficient backends) on
the three score/mask kinds Kiln's attention is measured on, bf16:

  causal  plain causal self-attention;
  alibi   causal + ALiBi (score - slope[h] * (i - j), slopes 2^(-8 (h + 1) / H));
  tsp     the TSP distance bias of models/tsp.kiln: score - slope[h] *
          dist(coords[b, i], coords[b, j]) with a LEARNED slope (its gradient is
          part of the backward), keys j < lengths[b] with lengths spread over
          [T / 2, T]: lengths[b] = T - b * (T / (2 B)), the rule
          tools/bench/attention_bench.sh writes into kiln's mask.

    python3 tools/bench/torch_attention.py                      # the GPU grid
    python3 tools/bench/torch_attention.py --device cpu --dtype fp32 \\
        --seqs 64 --head-dims 16 --tokens 256 --reps 1 --check  # CPU smoke

For each (kind, seq, head dim, backend) it prints one JSON line; `--table` adds a
readable table at the end. Shapes: heads = 2048 / head_dim (model dim 2048) and
batch = max(1, --tokens / seq), so batch x heads fills the GPU at every length.

FLOPs count only unmasked work, the way the issue asks: per kept (b, h, i, j) the
forward does 2 * D (QK^T) + 2 * D (PV) multiply-adds and the backward 2.5x that
(dV, dP, dQ, dK: 8 * D, plus the recomputed QK^T: 2 * D). Causal keeps
T (T + 1) / 2 pairs per (b, h); tsp keeps T * lengths[b]. Backends that cannot run
a case (no FlexAttention in this torch, SDPA without an arbitrary-bias kernel, out
of memory) print a line with "skipped" and the reason instead of a number.
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

try:  # torch >= 2.5
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    FLEX_MISSING = None
except ImportError as e:
    flex_attention = create_block_mask = None
    FLEX_MISSING = f"FlexAttention needs torch >= 2.5; this is torch {torch.__version__} ({e})"

try:  # torch >= 2.3
    from torch.nn.attention import SDPBackend, sdpa_kernel
except ImportError:
    SDPBackend = sdpa_kernel = None

OUT_OF_MEMORY = getattr(torch.cuda, "OutOfMemoryError", MemoryError)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", choices=["bf16", "fp16", "fp32"], default="bf16")
    p.add_argument("--kinds", default="causal,alibi,tsp")
    p.add_argument("--seqs", default="512,1024,2048,4096,8192,16384")
    p.add_argument("--head-dims", default="64,128")
    p.add_argument("--model-dim", type=int, default=2048, help="heads = model dim / head dim")
    p.add_argument("--tokens", type=int, default=32768, help="batch = tokens / seq")
    p.add_argument("--backends", default="flex,cudnn,flash,efficient",
                   help="also: naive (the whole [T, T] score matrix in eager PyTorch)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--check", action="store_true",
                   help="compare each backend's output and gradients with the naive one (small sizes)")
    p.add_argument("--table", action="store_true")
    return p.parse_args()


# ---------------------------------------------------------------- the cases


def tsp_length(T, B, b):
    """Sample b's number of real keys: T down to about T / 2 over the batch."""
    return T - b * (T // (2 * B))


def distances(coords):
    """[B, T, 2] -> [B, T, T], with models/tsp.kiln's 1e-6 inside the sqrt."""
    diff = coords.unsqueeze(2) - coords.unsqueeze(1)
    return torch.sqrt((diff * diff).sum(-1) + 1e-6)


class Case:
    """Inputs of one benchmark point and the score/mask in each backend's form."""

    def __init__(self, kind, B, H, T, D, dtype, device, gen):
        self.kind, self.B, self.H, self.T, self.D = kind, B, H, T, D
        mk = lambda *s: torch.randn(*s, generator=gen, device="cpu").to(device, dtype)
        self.q, self.k, self.v = mk(B, H, T, D), mk(B, H, T, D), mk(B, H, T, D)
        self.dout = mk(B, H, T, D)
        self.alibi = torch.tensor([2.0 ** (-8.0 * (h + 1) / H) for h in range(H)], device=device)
        # TSP: cities in the unit square; slope starts at 1 per head, learned.
        self.coords = torch.rand(B, T, 2, generator=gen).to(device)
        self.lengths = torch.tensor([tsp_length(T, B, b) for b in range(B)], device=device)
        self.slope = torch.ones(H, device=device)

    def kept_pairs(self):
        """Unmasked (b, h, i, j) count: the FLOP-relevant work."""
        if self.kind in ("causal", "alibi"):
            return self.B * self.H * self.T * (self.T + 1) // 2
        return self.H * self.T * int(self.lengths.sum().item())

    def flops(self):
        fwd = 4 * self.D * self.kept_pairs()
        return fwd, 2.5 * fwd

    def leaves(self):
        """The tensors the backward differentiates (slope only for tsp)."""
        ts = [self.q, self.k, self.v] + ([self.slope] if self.kind == "tsp" else [])
        return [t.detach().requires_grad_(True) for t in ts]

    # Naive: the whole [B, H, T, T] score matrix, any kind.
    def naive(self, q, k, v, slope=None):
        T = self.T
        s = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(self.D)
        i = torch.arange(T, device=q.device).view(T, 1)
        j = torch.arange(T, device=q.device).view(1, T)
        if self.kind == "alibi":
            s = s - self.alibi.view(1, -1, 1, 1) * (i - j)
        if self.kind == "tsp":
            d = distances(self.coords)  # [B, T, T]
            s = s - slope.view(1, -1, 1, 1) * d.unsqueeze(1)
            keep = (j.view(1, 1, 1, T) < self.lengths.view(-1, 1, 1, 1))
        else:
            keep = (j <= i).view(1, 1, T, T)
        s = s.masked_fill(~keep, -math.inf)
        return (torch.softmax(s, dim=-1) @ v.float()).to(q.dtype)

    # SDPA: causal via is_causal; a bias kind as a materialized float mask.
    def sdpa_args(self, slope=None):
        if self.kind == "causal":
            return {"is_causal": True}
        T, dev = self.T, self.q.device
        i = torch.arange(T, device=dev).view(T, 1)
        j = torch.arange(T, device=dev).view(1, T)
        if self.kind == "alibi":
            bias = -self.alibi.view(1, -1, 1, 1) * (i - j)
            bias = bias.masked_fill(j > i, -math.inf)
        else:
            d = distances(self.coords).unsqueeze(1)
            bias = -slope.view(1, -1, 1, 1) * d
            bias = bias.masked_fill(j.view(1, 1, 1, T) >= self.lengths.view(-1, 1, 1, 1), -math.inf)
        # SDPA needs the mask in the query dtype ([B, H, T, T]: what FlexAttention avoids).
        return {"attn_mask": bias.to(self.q.dtype)}

    # FlexAttention: score_mod / mask_mod closing over captured tensors.
    def flex_mods(self, slope=None):
        alibi, coords, lengths = self.alibi, self.coords, self.lengths
        if self.kind == "causal":
            return None, lambda b, h, i, j: j <= i
        if self.kind == "alibi":
            return (lambda s, b, h, i, j: s - alibi[h] * (i - j)), (lambda b, h, i, j: j <= i)

        def score(s, b, h, i, j):
            dx = coords[b, i, 0] - coords[b, j, 0]
            dy = coords[b, i, 1] - coords[b, j, 1]
            return s - slope[h] * torch.sqrt(dx * dx + dy * dy + 1e-6)

        return score, (lambda b, h, i, j: j < lengths[b])


# ---------------------------------------------------------------- timing


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(fn, device, warmup, reps):
    """Median seconds of fn() over reps (after warmup), CUDA events on a GPU."""
    for _ in range(warmup):
        fn()
    sync(device)
    times = []
    for _ in range(reps):
        if device.startswith("cuda"):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            torch.cuda.synchronize()
            times.append(a.elapsed_time(b) / 1e3)
        else:
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
    return statistics.median(times)


def make_runner(case, backend, compiled_flex):
    """A function leaves -> out for `backend`, or a string saying why it cannot run."""
    if backend == "naive":
        return lambda q, k, v, *slope: case.naive(q, k, v, *slope)
    if backend == "flex":
        if FLEX_MISSING:
            return FLEX_MISSING
        # The block mask is built once per case, outside the timing: kernel time
        # is what is compared (a training loop with new lengths per batch would
        # also pay create_block_mask every step).
        _, mask = case.flex_mods(case.slope)
        block_mask = create_block_mask(mask, case.B if case.kind == "tsp" else None, None,
                                       case.T, case.T, device=str(case.q.device))

        def run(q, k, v, *slope):
            score, _ = case.flex_mods(*slope)
            return compiled_flex(q, k, v, score_mod=score, block_mask=block_mask)
        return run
    if not hasattr(F, "scaled_dot_product_attention"):
        return f"SDPA needs torch >= 2.0; this is torch {torch.__version__}"
    if sdpa_kernel is None:
        return f"choosing an SDPA backend needs torch >= 2.3; this is torch {torch.__version__}"
    names = {"cudnn": "CUDNN_ATTENTION", "flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION"}
    if not hasattr(SDPBackend, names[backend]):
        return f"SDPBackend.{names[backend]} is not in torch {torch.__version__}"
    which = getattr(SDPBackend, names[backend])

    def run(q, k, v, *slope):
        with sdpa_kernel([which]):
            return F.scaled_dot_product_attention(q, k, v, **case.sdpa_args(*slope))
    return run


def measure(case, backend, runner, args):
    fwd_flops, bwd_flops = case.flops()
    leaves = case.leaves()

    def fwd():
        with torch.no_grad():
            runner(*leaves)

    def fwd_bwd():
        out = runner(*leaves)
        grads = torch.autograd.grad(out, leaves, case.dout)
        if any(g is None for g in grads):
            raise RuntimeError("a gradient is missing (None)")
        return grads

    t_fwd = timed(fwd, args.device, args.warmup, args.reps)
    t_all = timed(fwd_bwd, args.device, args.warmup, args.reps)
    t_bwd = max(t_all - t_fwd, 1e-12)
    return {"fwd_ms": t_fwd * 1e3, "bwd_ms": t_bwd * 1e3,
            "fwd_tflops": fwd_flops / t_fwd / 1e12, "bwd_tflops": bwd_flops / t_bwd / 1e12,
            "fwd_bwd_tflops": (fwd_flops + bwd_flops) / t_all / 1e12}


def check(case, runner):
    """Largest relative difference of out and every gradient against the naive form."""
    leaves, ref_leaves = case.leaves(), case.leaves()
    out = runner(*leaves)
    ref = case.naive(*ref_leaves)
    grads = torch.autograd.grad(out, leaves, case.dout)
    ref_grads = torch.autograd.grad(ref, ref_leaves, case.dout)
    rel = lambda a, b: ((a.float() - b.float()).norm() / b.float().norm().clamp(min=1e-30)).item()
    return max([rel(out, ref)] + [rel(g, r) for g, r in zip(grads, ref_grads)])


def main():
    args = parse_args()
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit("torch_attention.py: no CUDA device (use --device cpu for a smoke test)")
    gen = torch.Generator().manual_seed(args.seed)
    compiled_flex = None
    if not FLEX_MISSING:
        compiled_flex = torch.compile(flex_attention, dynamic=False)
    env = {"torch": torch.__version__, "device": torch.cuda.get_device_name()
           if args.device.startswith("cuda") else "cpu", "dtype": args.dtype}
    print(json.dumps({"env": env}), flush=True)
    rows = []
    for kind in args.kinds.split(","):
        for D in map(int, args.head_dims.split(",")):
            for T in map(int, args.seqs.split(",")):
                H = max(1, args.model_dim // D)
                B = max(1, args.tokens // T)
                case = Case(kind, B, H, T, D, dtype, args.device, gen)
                for backend in args.backends.split(","):
                    row = {"kind": kind, "seq": T, "head_dim": D, "batch": B, "heads": H,
                           "backend": backend}
                    runner = make_runner(case, backend, compiled_flex)
                    if isinstance(runner, str):
                        row["skipped"] = runner
                    else:
                        try:
                            if args.check:
                                row["max_rel_diff_vs_naive"] = check(case, runner)
                            row.update(measure(case, backend, runner, args))
                        except OUT_OF_MEMORY as e:
                            row["skipped"] = f"out of memory: {str(e).splitlines()[0]}"
                        except Exception as e:  # a backend refusing a case is a result
                            row["skipped"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                        if args.device.startswith("cuda"):
                            torch.cuda.empty_cache()
                    print(json.dumps(row), flush=True)
                    rows.append(row)
    if args.table:
        print(f"{'kind':7} {'seq':>6} {'D':>4} {'backend':10} {'fwd TF/s':>9} {'bwd TF/s':>9}")
        for r in rows:
            if "skipped" in r:
                print(f"{r['kind']:7} {r['seq']:>6} {r['head_dim']:>4} {r['backend']:10} skipped: {r['skipped'][:60]}")
            else:
                print(f"{r['kind']:7} {r['seq']:>6} {r['head_dim']:>4} {r['backend']:10} "
                      f"{r['fwd_tflops']:9.2f} {r['bwd_tflops']:9.2f}")


if __name__ == "__main__":
    main()
