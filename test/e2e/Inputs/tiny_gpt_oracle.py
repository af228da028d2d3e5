"""An independent PyTorch implementation of models/tiny_gpt.kiln: the oracle.

Loads the initial parameters kiln-run used (--save-init), the first batch and the
gradients kiln computed for it (--save-grads), every micro-batch it read
(--save-batches) and its per-step records (--metrics JSONL), then checks in float64:
  1. the loss of step 1, every parameter gradient, the global gradient norm and
     the reported metrics (activation RMS) of step 1,
  2. the learning rate and the loss of each of the first N steps, training the
     same model with torch.optim (AdamW, Adam or SGD with momentum/Nesterov),
     torch's clip_grad_norm_, gradient accumulation over K micro-batches (mean
     of their losses) and the schedule written out from its definition.
Weight decay follows the documented rule: matrices decay; vectors (norm gains,
biases) and embedding tables (wte, also the tied output, and wpe) do not.

Tolerance: relative 1e-4, norm-wise per tensor: ||g_kiln - g_ref|| / (||g_ref|| + f),
with a floor f = 1e-6 * (global gradient norm). The floor matters only for tensors
whose true gradient is zero (the key biases bk: softmax is invariant to adding the
same q.bk to every score of a row), where float32 leaves ~1e-9 of rounding noise.
Kiln computes in float32; float32 sums of n terms carry a relative error of about
1e-7 * sqrt(n) with n up to ~10^4 here, and the chain of ~40 ops per layer amplifies
that by at most ~10-100, so correct code lands near 1e-6..1e-5: a wrong op (a missing
term, a transposed weight, a bad mask) gives errors of order 1, far above 1e-4.
Learning rates are compared at 1e-6 relative: kiln stores them as float32 (6e-8).

usage: tiny_gpt_oracle.py INIT GRADS BATCHES METRICS --steps N --lr X [--optimizer
       adamw|adam|sgd] [--momentum M --nesterov] [--clip C] [--grad-accum K]
       [--schedule constant|cosine|linear|wsd --warmup W --min-lr-ratio R]
       [--bf16 | --bf16-gemm] [--tolerance T --grad-tolerance G --floor F]
"""
import argparse
import json
import math
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

VOCAB, DIM, N_LAYER, N_HEAD, EPS = 256, 128, 4, 4, 1e-5
BETAS, ADAM_EPS, WEIGHT_DECAY = (0.9, 0.95), 1e-8, 0.1
TOLERANCE = 1e-4
LR_TOLERANCE = 1e-6


def read_safetensors(path):
    """Minimal reader of the safetensors format (8-byte header length, JSON, data)."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    dtypes = {"F32": np.float32, "I32": np.int32}
    tensors = {}
    for name, info in header.items():
        start, end = info["data_offsets"]
        data = np.frombuffer(blob[8 + n + start:8 + n + end], dtype=dtypes[info["dtype"]])
        tensors[name] = torch.from_numpy(data.reshape(info["shape"]).copy())
    return tensors


def round_bf16(t):
    """t rounded to bfloat16 (nearest even), kept in t's dtype."""
    return t.to(torch.bfloat16).to(t.dtype)


class Bf16Matmul(torch.autograd.Function):
    """a @ b as precision = bf16 computes it: both operands rounded to bf16, the
    products summed exactly enough (float64 here, fp32 in kiln), and with --bf16
    the result rounded to bf16 too (kiln's forward GEMMs write bf16, the
    logits included, as torch.autocast's head GEMM does; the cross-entropy
    widens them). The backward GEMMs read the bf16 operands and the bf16-rounded
    incoming gradient, as the mixed-precision pass makes kiln's backward GEMMs
    do (not torch.autocast's rule, which rounds the result instead), and write
    fp32 gradients; the result's rounding passes the gradient through."""

    @staticmethod
    def forward(ctx, a, b, round_result):
        a, b = round_bf16(a), round_bf16(b)
        ctx.save_for_backward(a, b)
        return round_bf16(a @ b) if round_result else a @ b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        g = round_bf16(g)
        da = g @ b.transpose(-2, -1)
        db = a.transpose(-2, -1) @ g
        while db.dim() > b.dim():  # b shared over the batch: sum its gradients
            db = db.sum(0)
        return da, db, None


class StoreBf16(torch.autograd.Function):
    """An activation kiln stores in bf16 (bias adds): every reader, forward and
    backward, sees the rounded value; the gradient passes through unchanged."""

    @staticmethod
    def forward(ctx, x):
        return round_bf16(x)

    @staticmethod
    def backward(ctx, g):
        return g


class Bf16Softmax(torch.autograd.Function):
    """softmax over the last dim with its output stored in bf16: the backward
    (dx = y * (dy - sum(dy * y))) reads the rounded y, as kiln's softmax_grad
    does."""

    @staticmethod
    def forward(ctx, x):
        y = round_bf16(x.softmax(dim=-1))
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return y * (g - (g * y).sum(dim=-1, keepdim=True))


class Bf16BiasGrad(torch.autograd.Function):
    """A bias [N] broadcast over the rows of `shape` [..., N]. Its gradient is
    the sum of the incoming gradient rounded to bf16, as the weight-gradient
    GEMM's BGRADB epilogue computes it under precision = bf16
    (kiln-fuse-gemm-epilogue): cuBLASLt sums the GEMM's bf16 operand (the
    rounded output gradient it multiplies) in fp32, written to an fp32 bias
    gradient -- torch.autocast's linear backward likewise sums its bf16
    grad_output."""

    @staticmethod
    def forward(ctx, b, shape):
        return b.expand(shape)

    @staticmethod
    def backward(ctx, g):
        return round_bf16(g).sum(dim=tuple(range(g.dim() - 1))), None


def bias(b, like):
    """b broadcast to like's shape, as precision = bf16 differentiates it."""
    return Bf16BiasGrad.apply(b, like.shape) if BF16_ACT else b


# How the model's GEMMs, stored activations and softmax compute: torch's
# (float64), --bf16-gemm (bf16 GEMM operands only) or --bf16 (everything
# precision = bf16 does: also bf16 forward GEMM results, bias adds and
# softmax outputs; GEMMs with a bias epilogue round once, see linear_bias).
BF16_GEMM, BF16_ACT = False, False


def mm(a, b):
    if not BF16_GEMM:
        return torch.matmul(a, b)
    return Bf16Matmul.apply(a, b, BF16_ACT)


def stored(x):
    return StoreBf16.apply(x) if BF16_ACT else x


def softmax(x):
    return Bf16Softmax.apply(x) if BF16_ACT else x.softmax(dim=-1)


class Bf16FusedGelu(torch.autograd.Function):
    """gelu of a bf16 GEMM's fp32 bias sum s, as the fused GEMM epilogue
    (cuBLASLt GELU_AUX_BIAS with a bf16 D) computes it: the forward reads the
    unrounded s, the backward's gelu_grad reads the aux output, s rounded to
    bf16."""

    @staticmethod
    def forward(ctx, s):
        ctx.save_for_backward(round_bf16(s))
        return F.gelu(s, approximate="tanh")

    @staticmethod
    def backward(ctx, g):
        (s,) = ctx.saved_tensors
        with torch.enable_grad():
            x = s.detach().requires_grad_()
            (dx,) = torch.autograd.grad(F.gelu(x, approximate="tanh"), x, g)
        return dx


def linear_bias(h, w, b, gelu=False):
    """h @ w + b [then gelu]. Under --bf16 as the fused bf16 GEMM epilogue
    computes it (kiln-fuse-gemm-epilogue): the bias, rounded to bf16 (cuBLASLt
    reads it in D's type), added to the unrounded fp32 product, the sum
    rounded once to bf16 (what is stored), and the gelu of the unrounded sum.
    The bias gradient sums the bf16-rounded output gradient (Bf16BiasGrad);
    with gelu, that gradient is DGELU's bf16 D (gelu' of the bf16 aux times
    the fp32 product, rounded once)."""
    if not BF16_ACT:
        s = stored(mm(h, w) + b)
        return F.gelu(s, approximate="tanh") if gelu else s
    p = Bf16Matmul.apply(h, w, False)
    s = p + StoreBf16.apply(bias(b, p))
    return Bf16FusedGelu.apply(s) if gelu else StoreBf16.apply(s)


def forward(P, tokens, targets, metrics=None):
    B, T = tokens.shape
    D = DIM // N_HEAD
    x = P["wte"][tokens] + P["wpe"][:T]
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(N_LAYER):
        p = lambda n: P[f"Block.{l}.{n}"]
        h = F.layer_norm(x, (DIM,), p("ln1_w"), p("ln1_b"), EPS)
        q = linear_bias(h, p("wq"), p("bq")).view(B, T, N_HEAD, D).transpose(1, 2)
        k = linear_bias(h, p("wk"), p("bk")).view(B, T, N_HEAD, D).transpose(1, 2)
        v = linear_bias(h, p("wv"), p("bv")).view(B, T, N_HEAD, D).transpose(1, 2)
        att = mm(q, k.transpose(-2, -1)) / math.sqrt(D)
        att = softmax(att.masked_fill(~causal, float("-inf")))
        y = mm(att, v).transpose(1, 2).reshape(B, T, DIM)
        attn = mm(y, p("wo"))
        x = x + attn + bias(p("bo"), attn)
        h = F.layer_norm(x, (DIM,), p("ln2_w"), p("ln2_b"), EPS)
        # The MLP down projection: its product is read only by the residual
        # add, so kiln-reassociate-bias moves the bias onto the GEMM and,
        # under --bf16, stores bf16(P + bias) (the bias epilogue's single
        # rounding, as torch.autocast's bf16 linear) instead of bf16(P) + bias.
        # The attention projection above keeps x + P + bias: the attn_rms
        # metric reads its product before the bias.
        x = x + linear_bias(linear_bias(h, p("w_fc"), p("b_fc"), gelu=True),
                            p("w_proj"), p("b_proj"))
        if metrics is not None:  # the model file's `metric` lines
            metrics[f"Block.{l}.attn_rms"] = attn.detach().pow(2).mean().sqrt().item()
            metrics[f"Block.{l}.resid_rms"] = x.detach().pow(2).mean().sqrt().item()
    x = F.layer_norm(x, (DIM,), P["lnf_w"], P["lnf_b"], EPS)
    logits = mm(x, P["wte"].T)
    return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1).long())


def learning_rate(a, step):
    """The schedule of 1-based `step`, from its definition (kiln-run --help)."""
    peak, warmup, total = a.lr, a.warmup, a.steps
    if warmup > 0 and step <= warmup:
        return peak * step / warmup
    if a.schedule == "constant":
        return peak
    low = peak * a.min_lr_ratio
    if step >= total:
        return low
    p = (step - warmup) / (total - warmup)
    if a.schedule == "cosine":
        return low + (peak - low) * 0.5 * (1 + math.cos(math.pi * p))
    return peak - (peak - low) * p


def make_optimizer(a, P):
    decay = [t for n, t in P.items() if t.dim() >= 2 and n not in ("wte", "wpe")]
    no_decay = [t for n, t in P.items() if not (t.dim() >= 2 and n not in ("wte", "wpe"))]
    groups = [{"params": decay, "weight_decay": a.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    if a.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=a.lr, momentum=a.momentum, nesterov=a.nesterov)
    kind = torch.optim.AdamW if a.optimizer == "adamw" else torch.optim.Adam
    return kind(groups, lr=a.lr, betas=BETAS, eps=ADAM_EPS)


def relative_error(a, b, floor):
    return (a - b).norm().item() / (b.norm().item() + floor)


def global_error(grads, ref):
    """||grads - ref|| / ||ref|| over all gradients as one vector."""
    diff = sum((grads[n].double() - ref[n]).norm().item() ** 2 for n in ref)
    return math.sqrt(diff / sum(ref[n].norm().item() ** 2 for n in ref))


def check_bf16_rounding(a, init, micro_batch, kiln_grads, P):
    """Kiln's gradients must be much closer to the bf16-GEMM reference than the
    exact (unrounded, float64) gradients are: proof that its GEMMs really read
    bf16 operands, which loss values alone cannot show at initialisation."""
    global BF16_GEMM, BF16_ACT
    exact = {n: t.double().requires_grad_() for n, t in init.items()}
    saved = BF16_GEMM, BF16_ACT
    BF16_GEMM, BF16_ACT = False, False
    for k in range(a.grad_accum):
        (forward(exact, *micro_batch(1, k)) / a.grad_accum).backward()
    BF16_GEMM, BF16_ACT = saved
    reference = {n: t.grad for n, t in P.items()}
    kiln_err = global_error(kiln_grads, reference)
    exact_err = global_error({n: t.grad for n, t in exact.items()}, reference)
    ok = kiln_err < exact_err / 4
    print(f"bf16 rounding: kiln {kiln_err:.2e} from the bf16 reference, "
          f"unrounded float64 {exact_err:.2e} ({'ok' if ok else 'FAIL'})")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser()
    for name in ("init", "grads", "batches", "metrics"):
        ap.add_argument(name)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--lr", type=float, required=True)
    ap.add_argument("--optimizer", default="adamw", choices=["adamw", "adam", "sgd"])
    ap.add_argument("--weight-decay", type=float, default=WEIGHT_DECAY)
    ap.add_argument("--momentum", type=float, default=0.0)
    ap.add_argument("--nesterov", action="store_true")
    ap.add_argument("--clip", type=float, default=0.0)
    ap.add_argument("--grad-accum", type=int, default=1)
    ap.add_argument("--schedule", default="constant")
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--min-lr-ratio", type=float, default=0.0)
    ap.add_argument("--bf16-gemm", action="store_true",
                    help="emulate bf16 GEMM operands only (fp32 activations)")
    ap.add_argument("--bf16", action="store_true",
                    help="the model was compiled with precision = bf16: bf16 GEMM "
                         "operands and forward results, bias adds and softmax "
                         "outputs stored in bf16")
    ap.add_argument("--tolerance", type=float, default=TOLERANCE,
                    help="relative tolerance of losses, norms and metrics")
    ap.add_argument("--grad-tolerance", type=float, default=TOLERANCE,
                    help="relative tolerance of each gradient tensor")
    ap.add_argument("--floor", type=float, default=1e-6,
                    help="gradient error floor, times the global gradient norm")
    a = ap.parse_args()
    global BF16_GEMM, BF16_ACT
    BF16_GEMM, BF16_ACT = a.bf16_gemm or a.bf16, a.bf16

    init = read_safetensors(a.init)
    kiln_grads = read_safetensors(a.grads)
    batches = read_safetensors(a.batches)
    records = [json.loads(line) for line in open(a.metrics)]
    tokens, targets = kiln_grads.pop("input:tokens"), kiln_grads.pop("input:targets")
    failures = 0

    def micro_batch(step, k):
        return (batches[f"step.{step}.{k}.tokens"].long(), batches[f"step.{step}.{k}.targets"].long())

    # The batch --save-grads kept is the last micro-batch of step 1.
    x1, y1 = micro_batch(1, a.grad_accum - 1)
    if not (torch.equal(x1, tokens.long()) and torch.equal(y1, targets.long())):
        print("FAIL: --save-grads and --save-batches disagree on step 1's batch")
        failures += 1

    # 1. Step 1: loss, gradients (mean over the micro-batches), norm, metrics.
    P = {n: t.double().requires_grad_() for n, t in init.items()}
    metrics = {}
    loss = 0.0
    for k in range(a.grad_accum):
        micro = forward(P, *micro_batch(1, k), metrics) / a.grad_accum
        micro.backward()
        loss += micro.item()
    err = abs(records[0]["loss"] - loss) / abs(loss)
    print(f"step 1 loss: kiln {records[0]['loss']:.8f} torch {loss:.8f} rel {err:.2e}")
    failures += err > a.tolerance
    if set(kiln_grads) != set(P):
        print(f"FAIL: gradient names differ: {sorted(set(kiln_grads) ^ set(P))}")
        failures += 1
    worst = 0.0
    norm = math.sqrt(sum(P[n].grad.norm().item() ** 2 for n in P))
    floor = a.floor * norm
    for name in sorted(P):
        if name not in kiln_grads:
            continue
        err = relative_error(kiln_grads[name].double(), P[name].grad, floor)
        worst = max(worst, err)
        if err > a.grad_tolerance:
            print(f"FAIL: gradient of {name}: relative error {err:.2e}")
            failures += 1
    print(f"gradients: {len(P)} tensors, worst relative error {worst:.2e}")
    if BF16_GEMM:
        failures += check_bf16_rounding(a, init, micro_batch, kiln_grads, P)
    err = abs(records[0]["grad_norm"] - norm) / norm
    print(f"grad norm: kiln {records[0]['grad_norm']:.6f} torch {norm:.6f} rel {err:.2e}")
    failures += err > a.tolerance
    worst = 0.0
    for name, value in metrics.items():
        key = f"metric/{name}"
        if key not in records[0]:
            print(f"FAIL: metric {key} missing from the JSONL")
            failures += 1
            continue
        worst = max(worst, abs(records[0][key] - value) / value)
    print(f"metrics: {len(metrics)} metric values, worst relative error {worst:.2e}")
    failures += worst > a.tolerance

    # 2. The first N steps with torch.optim.
    P = {n: t.double().requires_grad_() for n, t in init.items()}
    opt = make_optimizer(a, P)
    for s in range(1, a.steps + 1):
        lr = learning_rate(a, s)
        for group in opt.param_groups:
            group["lr"] = lr
        opt.zero_grad()
        loss = 0.0
        for k in range(a.grad_accum):
            micro = forward(P, *micro_batch(s, k)) / a.grad_accum
            micro.backward()
            loss += micro.item()
        if a.clip > 0:
            torch.nn.utils.clip_grad_norm_(list(P.values()), a.clip)
        opt.step()
        record = records[s - 1]
        err = abs(record["loss"] - loss) / abs(loss)
        lr_err = abs(record["lr"] - lr) / lr if lr > 0 else abs(record["lr"])
        print(f"step {s:2d} loss: kiln {record['loss']:.8f} torch {loss:.8f} rel {err:.2e}"
              f"  lr: kiln {record['lr']:.6e} schedule {lr:.6e}")
        failures += err > a.tolerance
        failures += lr_err > LR_TOLERANCE
    print("oracle: PASS" if failures == 0 else f"oracle: FAIL ({failures} mismatches)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
