#!/usr/bin/python3
"""Differential fuzzing of kilnc and kiln-run against PyTorch in float64.

  kiln_fuzz.py [--seeds 0:200] [--targets cpu,cuda] [--work DIR] [--keep]
               [--kilnc build/bin/kilnc] [--kiln-run build/bin/kiln-run] [--show SEED]

Each seed draws a random model in Kiln's language -- unary math, broadcasting
arithmetic, matmuls, reshapes and transposes, reductions, softmax, causal
masks, layer_norm and rms_norm, slices, concat, split, expand, where, rope,
gathers, attention with random scores, masks and grouped kv heads, blocks
repeated with their own parameters, cross_entropy over token inputs -- and,
beside it, the same computation written in PyTorch by the generator itself
(never by reading the Kiln text back). kilnc compiles the model (fp32) for
each target; kiln-run trains one step (`--save-init`, `--save-grads`,
`--metrics`, `--save-batches`); PyTorch recomputes the loss and every
gradient from the saved initial parameters and batch, in float64 (the
reference) and in float32 (to measure how well the model's own conditioning
lets float32 get the answer). The CUDA target runs under the device simulator
($KILN_CUDA_LIB_DIR, else build/sim/lib), so its generated kernels execute
on this machine.

A seed passes when Kiln's loss and each gradient are within
  max(16 x PyTorch float32's error, 1e-4) x scale
of the float64 reference, per tensor, the scale being its largest entry or a
hundredth of the largest gradient's, whichever is larger (see check()). Float32
kernels and PyTorch's float32 differ only in summation order and formulas
(tanh-form GELU, exp-based sigmoid), which the factor 16 covers; a
wrong index, a dropped term or a wrong broadcast is off by order 1.

A failing seed leaves its directory (model.kiln, oracle.py, the logs) under
--work and is printed with what disagreed; `--show SEED` prints the model and
the PyTorch program without running anything. Exit status: 0 when every seed
passed, 1 otherwise.
"""
import argparse
import json
import math
import os
import random
import shutil
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e", "Inputs"))
from tiny_gpt_oracle import read_safetensors  # noqa: E402  (the tree's one reader)
TEXT = "/usr/share/common-licenses/GPL-3"  # the token inputs' bytes (Debian's base-files)

# The helpers the generated PyTorch programs call; also written at the head of
# each failing seed's oracle.py so that it runs alone.
PRELUDE = r'''
import math
import torch
import torch.nn.functional as F


def sl(x, dim, start, end):
    index = [slice(None)] * x.dim()
    index[dim] = slice(start, end)
    return x[tuple(index)]


def wh(cond, a, b):
    dt = a.dtype if torch.is_tensor(a) else b.dtype
    a = a if torch.is_tensor(a) else torch.tensor(a, dtype=dt)
    b = b if torch.is_tensor(b) else torch.tensor(b, dtype=dt)
    return torch.where(cond, a, b)


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope(x, theta):
    # Hugging Face's rotary embedding: positions along dim -2, feature i
    # paired with i + D/2.
    t, d = x.shape[-2], x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    ang = torch.outer(torch.arange(t, dtype=torch.float64), inv)
    ang = torch.cat((ang, ang), dim=-1).to(x.dtype)
    half = torch.cat((-x[..., d // 2:], x[..., : d // 2]), dim=-1)
    return x * ang.cos() + half * ang.sin()


def causal_softmax(x):
    # causal_mask of [.., T, S]: -inf where j > i + (S - T).
    t, s = x.shape[-2], x.shape[-1]
    keep = torch.ones(t, s, dtype=torch.bool).tril(s - t)
    return torch.softmax(x.masked_fill(~keep, float("-inf")), -1)


class RoundBf16(torch.autograd.Function):
    """x rounded to bfloat16 (kept in x's dtype), its gradient rounded too:
    precision = bf16 emulated coarsely, every value and gradient rounded."""

    @staticmethod
    def forward(ctx, x):
        return x.to(torch.bfloat16).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        return g.to(torch.bfloat16).to(g.dtype)


def rb(x):
    return RoundBf16.apply(x) if torch.is_tensor(x) and x.is_floating_point() else x


def rep(block, x, name, layers):
    # `repeat LAYERS Name(x)`: layer l's parameters are Name.l.*
    for layer in range(layers):
        x = block(x, f"{name}.{layer}.")
    return x


def attention(q, k, v, scale, score, mask):
    # q [B, H, T, D], k and v [B, KVH, S, D]: kv head h // (H / KVH) serves
    # query head h. score(s, b, h, i, j) and mask(b, h, i, j) take
    # broadcasting index tensors.
    B, H, T, D = q.shape
    group = H // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    S = k.shape[2]
    b = torch.arange(B).view(B, 1, 1, 1)
    h = torch.arange(H).view(1, H, 1, 1)
    i = torch.arange(T).view(1, 1, T, 1)
    j = torch.arange(S).view(1, 1, 1, S)
    s = (q @ k.transpose(-1, -2)) * (1 / math.sqrt(D) if scale is None else scale)
    s = score(s, b, h, i, j)
    keep = mask(b, h, i, j)
    if keep is not None:
        s = s.masked_fill(~keep.expand(s.shape), float("-inf"))
    return torch.softmax(s, -1) @ v
'''


def numel(shape):
    return int(np.prod(shape)) if shape else 1


class Value:
    def __init__(self, name, shape):
        self.name, self.shape, self.uses = name, tuple(shape), 0
        # A softmax's rows sum to 1: sum() of it is a constant, whose
        # gradient is 0 up to rounding (bf16's stored probabilities make
        # that rounding 1e-5, nothing to compare), so the loss squares it.
        self.normalized = False


class Program:
    """A random model: Kiln lines and the PyTorch lines computing the same,
    grown one statement at a time. Each statement is evaluated at once on
    sample parameters (the generator's own normal draws, same std as the
    model's initializers) so that the generator keeps values finite and of
    moderate size, and checks its own idea of every shape."""

    MAX_ELEMS = 6000

    def __init__(self, seed, parent=None):
        self.seed = seed
        self.kiln_head, self.kiln, self.torch = [], [], []
        self.params = []            # (name, shape, std)
        self.values = []
        self.n = 0
        self.parent = parent        # the enclosing program of a block's body
        self.blocks = []            # (kiln lines, torch lines) of each block
        self.tokens = None          # (batch, seq) when the model reads tokens
        self.flags = []             # kilnc options drawn for this seed
        self.metrics = []           # (name, torch expression)
        self.precision = "fp32"
        self.mesh = {}              # e.g. {"data": 2, "model": 2}: several ranks
        self.grad_accum = 1         # micro-batches per step
        if parent:
            self.r, self.torch_rng, self.ns = parent.r, parent.torch_rng, parent.ns
            self.large, self.MAX_ELEMS = parent.large, parent.MAX_ELEMS
            self.mesh, self.grad_accum = parent.mesh, parent.grad_accum
        else:
            self.r = random.Random(seed)
            # One seed in five: long rows (1000-2049 wide) and larger tensors,
            # where row kernels take several passes or blocks per row.
            self.large = self.r.random() < 0.2
            if self.large:
                self.MAX_ELEMS = 40000
            self.torch_rng = torch.Generator().manual_seed(seed)
            self.ns = {}
            exec(PRELUDE, self.ns)  # noqa: S102
            self.ns["P"] = {}

    # -- helpers -----------------------------------------------------------

    def dim(self, big=False):
        small = [1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17]
        if big and self.r.random() < 0.3:
            wide = [31, 33, 64, 100, 130, 257]
            return self.r.choice(wide + [1000, 1031, 2049] if self.large else wide)
        return self.r.choice(small)

    def shape(self, rank):
        s = [self.dim() for _ in range(rank - 1)] + [self.dim(big=True)]
        while numel(s) > self.MAX_ELEMS:
            i = self.r.randrange(rank)
            s[i] = max(1, s[i] // 2)
        return s

    def param(self, shape, std=None, ones=False):
        name = f"{'w' if self.parent else 'p'}{len(self.params)}"
        if std is None:
            std = self.r.choice([0.5, 1.0])
        init = "ones" if ones else f"normal({std})"
        even = [k for k, n in enumerate(shape) if n % 2 == 0]
        if "model" in self.mesh and even and self.r.random() < 0.5:
            # Tensor parallel: one even dim split over 'model'.
            split = self.r.choice(even)
            init += " shard [" + ", ".join("model" if k == split else "_"
                                           for k in range(len(shape))) + "]"
        self.kiln_head.append(f"param {name} [{', '.join(map(str, shape))}] = {init}")
        self.params.append((name, tuple(shape), None if ones else std))
        self.ns["P"][name] = self.sample(shape, std)
        if self.parent:  # a block's parameter: P[L + "p0"], L = "Name.layer."
            return Value(f'P[L + "{name}"]', shape), name
        return Value(f'P["{name}"]', shape), name

    def sample(self, shape, std):
        if std is None:
            return torch.ones(shape, dtype=torch.float64)
        return torch.randn(shape, dtype=torch.float64, generator=self.torch_rng) * std

    def pick(self, pred=lambda v: True):
        cands = [v for v in self.values if pred(v)]
        if not cands:
            return None
        # Recent values more often: chains grow deep.
        weights = [1 + 3 * (k >= len(cands) - 3) for k in range(len(cands))]
        return self.r.choices(cands, weights)[0]

    def ref(self, v):
        """(kiln, torch) spelling of a value."""
        if v.name.startswith('P["'):
            return v.name[3:-2], v.name
        if v.name.startswith('P[L + "'):
            return v.name[7:-2], v.name
        return v.name, v.name

    def emit(self, kexpr, texpr, shape, operands=()):
        """Adds `tN = expr` if it evaluates to the predicted shape, finite and
        moderate on the sample; returns the value or None."""
        name = f"t{self.n}" if not self.parent else f"b{self.n}"
        try:
            out = eval(texpr, self.ns)  # noqa: S307
        except Exception as e:  # the generator's own mistake
            raise RuntimeError(f"generator: {texpr}: {e}")
        if tuple(out.shape) != tuple(shape):
            raise RuntimeError(f"generator: {texpr}: shape {tuple(out.shape)}, "
                               f"predicted {tuple(shape)}")
        if not torch.isfinite(out).all() or out.abs().max().item() > 30:
            if not torch.isfinite(out).all():
                return None
            kexpr, texpr = f"tanh({kexpr})", f"torch.tanh({texpr})"
            out = torch.tanh(out)
        self.n += 1
        self.ns[name] = out
        self.kiln.append(f"{name} = {kexpr}")
        self.torch.append(f"{name} = {texpr}")
        for o in operands:
            o.uses += 1
        v = Value(name, shape)
        self.values.append(v)
        return v

    # -- operations --------------------------------------------------------

    def op_unary(self, x):
        kx, tx = self.ref(x)
        kind = self.r.choice(["tanh", "sigmoid", "silu", "relu", "sin", "cos",
                              "gelu", "exp", "log", "sqrt", "square", "cube",
                              "pow", "neg"])
        k, t = {
            "tanh": (f"tanh({kx})", f"torch.tanh({tx})"),
            "sigmoid": (f"sigmoid({kx})", f"torch.sigmoid({tx})"),
            "silu": (f"silu({kx})", f"F.silu({tx})"),
            "relu": (f"relu({kx})", f"torch.relu({tx})"),
            "sin": (f"sin({kx})", f"torch.sin({tx})"),
            "cos": (f"cos({kx})", f"torch.cos({tx})"),
            "gelu": (f"gelu({kx})", f"F.gelu({tx}, approximate='tanh')"),
            "exp": (f"exp(tanh({kx}))", f"torch.exp(torch.tanh({tx}))"),
            "log": (f"log({kx} * {kx} + 1)", f"torch.log({tx} * {tx} + 1)"),
            "sqrt": (f"sqrt({kx} * {kx} + 1)", f"torch.sqrt({tx} * {tx} + 1)"),
            "square": (f"square({kx})", f"torch.square({tx})"),
            "cube": (f"{kx} ** 3", f"{tx} ** 3"),
            "pow": (f"pow({kx} * {kx} + 0.5, 1.5)", f"torch.pow({tx} * {tx} + 0.5, 1.5)"),
            "neg": (f"-{kx}", f"-{tx}"),
        }[kind]
        return self.emit(k, t, x.shape, [x])

    def broadcast_partner(self, shape):
        """A shape that broadcasts against `shape` (leading dims dropped, some
        dims set to 1), or a longer one `shape` broadcasts to."""
        s = list(shape)
        roll = self.r.random()
        if roll < 0.3 and len(s) < 4 and numel(s) * 3 <= self.MAX_ELEMS:
            return [self.r.choice([2, 3])] + s
        drop = self.r.randrange(len(s)) if s and self.r.random() < 0.5 else 0
        s = s[drop:]
        for i in range(len(s)):
            if self.r.random() < 0.3:
                s[i] = 1
        return s

    def op_binary(self, x):
        kx, tx = self.ref(x)
        op = self.r.choice(["+", "-", "*", "/"])
        roll = self.r.random()
        if roll < 0.2:
            c = round(self.r.uniform(-2, 2), 3)
            ky, ty, yshape, y = str(c), str(c), (), None
        else:
            same = [v for v in self.values if v is not x and _broadcasts(v.shape, x.shape)]
            if same and roll < 0.6:
                y = self.r.choice(same)
            else:
                y, _ = self.param(self.broadcast_partner(x.shape))
            ky, ty = self.ref(y)
            yshape = y.shape
        out = _broadcast(x.shape, yshape)
        if numel(out) > self.MAX_ELEMS * 3:
            return None
        if op == "/":
            ky, ty = f"({ky} * {ky} + 1)", f"({ty} * {ty} + 1)"
        if self.r.random() < 0.5:
            k, t = f"{kx} {op} {ky}", f"{tx} {op} {ty}"
        else:  # the other operand first
            if op == "/":
                k, t = f"{ky} / ({kx} * {kx} + 1)", f"{ty} / ({tx} * {tx} + 1)"
            else:
                k, t = f"{ky} {op} {kx}", f"{ty} {op} {tx}"
        return self.emit(k, t, out, [x] + ([y] if y else []))

    def op_matmul(self, x):
        if len(x.shape) < 2:
            return None
        kx, tx = self.ref(x)
        kdim = x.shape[-1]
        batch = x.shape[:-2]
        roll = self.r.random()
        n = self.dim(big=True)
        partners = [v for v in self.values if len(v.shape) >= 2 and v.shape[-2] == kdim
                    and (len(v.shape) == 2 or v.shape[:-2] == batch)]
        if partners and roll < 0.3:
            y = self.r.choice(partners)
            ky, ty = self.ref(y)
            out = batch + (x.shape[-2], y.shape[-1])
            c = round(1 / math.sqrt(kdim), 5)
            k, t = f"({kx} @ {ky}) * {c}", f"({tx} @ {ty}) * {c}"
        elif roll < 0.65:
            y, _ = self.param([kdim, n], std=round(1 / math.sqrt(kdim), 5))
            ky, ty = self.ref(y)
            out = batch + (x.shape[-2], n)
            k, t = f"{kx} @ {ky}", f"{tx} @ {ty}"
        else:
            y, _ = self.param([n, kdim], std=round(1 / math.sqrt(kdim), 5))
            ky, ty = self.ref(y)
            out = batch + (x.shape[-2], n)
            k, t = f"{kx} @ transpose({ky})", f"{tx} @ {ty}.transpose(-1, -2)"
        if numel(out) > self.MAX_ELEMS * 3:
            return None
        return self.emit(k, t, out, [x, y])

    def op_transpose(self, x):
        r = len(x.shape)
        if r < 2:
            return None
        kx, tx = self.ref(x)
        if self.r.random() < 0.5:
            s = list(x.shape)
            s[-1], s[-2] = s[-2], s[-1]
            return self.emit(f"transpose({kx})", f"{tx}.transpose(-1, -2)", s, [x])
        perm = list(range(r))
        self.r.shuffle(perm)
        s = [x.shape[p] for p in perm]
        return self.emit(f"transpose({kx}, {perm})", f"{tx}.permute({perm})", s, [x])

    def op_reshape(self, x):
        s = list(x.shape)
        roll = self.r.random()
        if not s:  # a scalar
            s = [1] * self.r.randint(1, 3)
        elif roll < 0.3 and len(s) >= 2:
            i = self.r.randrange(len(s) - 1)
            s[i:i + 2] = [s[i] * s[i + 1]]
        elif roll < 0.8 and len(s) < 4:
            i = self.r.randrange(len(s))
            divisors = [d for d in range(2, s[i]) if s[i] % d == 0]
            if not divisors:
                s.insert(i, 1)
            else:
                d = self.r.choice(divisors)
                s[i:i + 1] = [d, s[i] // d]
        else:
            s = [numel(s)]
        kx, tx = self.ref(x)
        return self.emit(f"reshape({kx}, {s})", f"{tx}.reshape({s})", s, [x])

    def op_reduce(self, x):
        r = len(x.shape)
        kx, tx = self.ref(x)
        if r and self.r.random() < 0.2:  # to a scalar, which broadcasts later
            fn = self.r.choice(["sum", "mean"])
            return self.emit(f"{fn}({kx})", f"torch.{fn}({tx})", (), [x])
        if r < 2:
            return None
        dims = sorted(self.r.sample(range(r), self.r.randint(1, r - 1)))
        spell = [d - r if self.r.random() < 0.3 else d for d in dims]
        out = [x.shape[d] for d in range(r) if d not in dims]
        fn = self.r.choice(["sum", "mean"])
        return self.emit(f"{fn}({kx}, {spell})", f"torch.{fn}({tx}, {spell})", out, [x])

    def op_softmax(self, x):
        if not x.shape:
            return None
        kx, tx = self.ref(x)
        if len(x.shape) >= 2 and x.shape[-1] >= x.shape[-2] and self.r.random() < 0.5:
            out = self.emit(f"softmax(causal_mask({kx}))", f"causal_softmax({tx})", x.shape, [x])
        else:
            out = self.emit(f"softmax({kx})", f"torch.softmax({tx}, -1)", x.shape, [x])
        if out:
            out.normalized = True
        return out

    def op_norm(self, x):
        if not x.shape or x.shape[-1] < 2:
            return None
        kx, tx = self.ref(x)
        d = x.shape[-1]
        eps = self.r.choice(["1e-5", "1e-6", "0.01"])
        w, _ = self.param([d], ones=self.r.random() < 0.3)
        kw, tw = self.ref(w)
        if self.r.random() < 0.5:
            return self.emit(f"rms_norm({kx}, {kw}, {eps})", f"rms_norm({tx}, {tw}, {eps})",
                             x.shape, [x, w])
        b, _ = self.param([d])
        kb, tb = self.ref(b)
        return self.emit(f"layer_norm({kx}, {kw}, {kb}, {eps})",
                         f"F.layer_norm({tx}, ({d},), {tw}, {tb}, {eps})", x.shape, [x, w, b])

    def op_slice(self, x):
        if not x.shape:
            return None
        r = len(x.shape)
        d = self.r.randrange(r)
        n = x.shape[d]
        if n < 2:
            return None
        start = self.r.randrange(n)
        end = self.r.randrange(start + 1, n + 1)
        ks = start - n if self.r.random() < 0.3 else start
        ke = end - n if (end < n and self.r.random() < 0.4) else end
        kd = d - r if self.r.random() < 0.3 else d
        kx, tx = self.ref(x)
        s = list(x.shape)
        s[d] = end - start
        return self.emit(f"slice({kx}, {kd}, {ks}, {ke})", f"sl({tx}, {kd}, {ks}, {ke})", s, [x])

    def op_concat(self, x):
        if not x.shape:
            return None
        d = self.r.randrange(len(x.shape))
        others = [v for v in self.values if len(v.shape) == len(x.shape) and
                  all(a == b for k, (a, b) in enumerate(zip(v.shape, x.shape)) if k != d)]
        parts = [x]
        for _ in range(self.r.randint(1, 2)):
            if others and self.r.random() < 0.5:
                parts.append(self.r.choice(others))
            else:
                s = list(x.shape)
                s[d] = self.dim()
                parts.append(self.param(s)[0])
        self.r.shuffle(parts)
        s = list(x.shape)
        s[d] = sum(p.shape[d] for p in parts)
        if numel(s) > self.MAX_ELEMS * 3:
            return None
        kd = d - len(s) if self.r.random() < 0.3 else d
        ks = ", ".join(self.ref(p)[0] for p in parts)
        ts = ", ".join(self.ref(p)[1] for p in parts)
        return self.emit(f"concat([{ks}], {kd})", f"torch.cat([{ts}], {kd})", s, parts)

    def op_split(self, x):
        if not x.shape:
            return None
        d = self.r.randrange(len(x.shape))
        n = x.shape[d]
        if n < 2:
            return None
        cuts = sorted(self.r.sample(range(1, n), min(n - 1, self.r.randint(1, 2))))
        sizes = [b - a for a, b in zip([0] + cuts, cuts + [n])]
        kx, tx = self.ref(x)
        names = [f"{'b' if self.parent else 't'}{self.n + k}" for k in range(len(sizes))]
        pieces = eval(f"torch.split({tx}, {sizes}, {d})", self.ns)  # noqa: S307
        self.kiln.append(f"{', '.join(names)} = split({kx}, {sizes}, {d})")
        self.torch.append(f"{', '.join(names)} = torch.split({tx}, {sizes}, {d})")
        x.uses += 1
        self.n += len(sizes)
        out = None
        for name, piece, size in zip(names, pieces, sizes):
            self.ns[name] = piece
            s = list(x.shape)
            s[d] = size
            out = Value(name, s)
            self.values.append(out)
        return out

    def op_expand(self, x):
        s = list(x.shape)
        ones = [k for k, n in enumerate(s) if n == 1]
        target = list(s)
        for k in ones:
            target[k] = self.r.choice([2, 3, 5])
        if (not ones or self.r.random() < 0.3) and len(s) < 4:
            target = [self.r.choice([2, 3])] + target
        if target == s or numel(target) > self.MAX_ELEMS * 3:
            return None
        kx, tx = self.ref(x)
        return self.emit(f"expand({kx}, {target})", f"{tx}.expand({target})", target, [x])

    def op_where(self, x):
        kx, tx = self.ref(x)
        c = round(self.r.uniform(-0.6, 0.6), 3)
        cmp = self.r.choice([">", "<", ">=", "<="])
        def branch(*shapes):
            options = [v for v in self.values if all(_broadcasts(v.shape, s) for s in shapes)]
            if options and self.r.random() < 0.6:
                v = self.r.choice(options)
                return self.ref(v) + (v,)
            num = self.r.choice(["0", "1.5", "-0.25"])
            return num, num, None

        kcond, tcond = f"{kx} {cmp} {c}", f"{tx} {cmp} {c}"
        roll = self.r.random()
        if roll < 0.2:  # and / or with a second comparison of x
            d = round(self.r.uniform(-0.6, 0.6), 3)
            join = self.r.choice([("and", "&"), ("or", "|")])
            kcond = f"{kcond} {join[0]} {kx} < {d}"
            tcond = f"({tcond}) {join[1]} ({tx} < {d})"
        elif roll < 0.3:
            kcond, tcond = f"not ({kcond})", f"~({tcond})"
        ka, ta, va = branch(x.shape)
        kb, tb, vb = branch(x.shape, *([va.shape] if va else []))
        out = _broadcast(x.shape, *[v.shape for v in (va, vb) if v])
        if numel(out) > self.MAX_ELEMS * 3:
            return None
        if va is None and vb is None:
            return None
        used = [x] + [v for v in (va, vb) if v]
        return self.emit(f"where({kcond}, {ka}, {kb})", f"wh({tcond}, {ta}, {tb})", out, used)

    def op_positions(self, x):
        """x times (or plus) float(iota(n)) along its last dim, or rms(x)."""
        kx, tx = self.ref(x)
        if not x.shape or self.r.random() < 0.3:
            return self.emit(f"rms({kx})", f"torch.sqrt(torch.mean({tx} * {tx}))", (), [x])
        n = x.shape[-1]
        op = self.r.choice(["*", "+"])
        return self.emit(f"{kx} {op} float(iota({n})) * 0.1",
                         f"{tx} {op} torch.arange({n}, dtype={tx}.dtype) * 0.1", x.shape, [x])

    def op_rope(self, x):
        if len(x.shape) < 2 or x.shape[-1] % 2:
            return None
        theta = self.r.choice([100, 10000, 500000])
        kx, tx = self.ref(x)
        return self.emit(f"rope({kx}, theta = {theta})", f"rope({tx}, {theta})", x.shape, [x])

    def op_gather(self, x):
        n = self.r.choice([1, 2, 5, 9, 16])
        rows = n + self.r.choice([0, 1, 7])
        d = self.dim(big=True)
        table, _ = self.param([rows, d])
        kt, tt = self.ref(table)
        return self.emit(f"{kt}[iota({n})]", f"{tt}[torch.arange({n})]", [n, d], [table])

    def op_attention(self, x):
        if len(x.shape) != 4:
            return None
        B, H, T, D = x.shape
        if T > 40 or D > 64 or numel(x.shape) * T > 40000:
            return None
        kx, tx = self.ref(x)
        kvh = self.r.choice([d for d in range(1, H + 1) if H % d == 0])
        mask = self.r.choice([None, ("j <= i", "j <= i"),
                              ("j <= i and i - j < 3", "(j <= i) & (i - j < 3)"),
                              ("i == j or j < 2", "(i == j) | (j < 2)")])
        # Keys as many as the queries, or (where every row keeps a key) another
        # count: a longer context, or fewer keys than queries.
        S = T
        if self.r.random() < 0.3 and (mask is None or mask[0] == "j <= i"):
            S = self.r.choice([1, 2, 7, T + 3, 2 * T + 1])
        kv = []
        for _ in range(2):
            if kvh == H and S == T and self.r.random() < 0.3:
                kv.append(x)
            else:
                kv.append(self.param([B, kvh, S, D])[0])
        (kk, tk), (kv_, tv) = self.ref(kv[0]), self.ref(kv[1])
        score = self.r.choice([None, ("s * 0.5", "s * 0.5"),
                               ("tanh(s / 2) * 2", "torch.tanh(s / 2) * 2"),
                               "bias", "slope", "batch_bias"])
        used = [x] + kv
        if score == "bias":
            bias, _ = self.param([H, T, S])
            kb, tb = self.ref(bias)
            score = (f"s + {kb}[h, i, j]", f"s + {tb}[h, i, j]")
            used.append(bias)
        elif score == "batch_bias":
            bias, _ = self.param([B, T, S], std=0.5)
            kb, tb = self.ref(bias)
            score = (f"s * {kb}[b, i, j]", f"s * {tb}[b, i, j]")
            used.append(bias)
        elif score == "slope":
            slope, _ = self.param([H], std=0.5)
            kb, tb = self.ref(slope)
            score = (f"s - {kb}[h] * abs(i - j)", f"s - {tb}[h] * torch.abs(i - j)")
            used.append(slope)
        scale = self.r.choice([None, 0.3])
        args = [kx, kk, kv_]
        if score:
            args.append(f"score = {score[0]}")
        if mask:
            args.append(f"mask = {mask[0]}")
        if scale:
            args.append(f"scale = {scale}")
        tscore = f"lambda s, b, h, i, j: {score[1] if score else 's'}"
        tmask = f"lambda b, h, i, j: {mask[1] if mask else 'None'}"
        return self.emit(f"attention({', '.join(args)})",
                         f"attention({tx}, {tk}, {tv}, {scale}, {tscore}, {tmask})",
                         x.shape, used)

    def op_make4d(self, x):
        """A fresh [B, H, T, D] parameter, so that attention has operands."""
        s = [self.r.choice([1, 2]), self.r.choice([1, 2, 4]), self.r.choice([3, 5, 8, 13, 17]),
             self.r.choice([4, 8, 16, 12])]
        p, _ = self.param(s)
        kp, tp = self.ref(p)
        return self.emit(f"{kp} * 1.0", f"{tp} * 1.0", s, [p])

    def op_hand_attention(self, x):
        """softmax(where(causal, q @ transpose(k) * c [+ bias], -inf)) @ v
        written out, which attention-match turns into one flash attention."""
        if len(x.shape) != 4 or x.shape[2] > 40 or numel(x.shape) * x.shape[2] > 40000:
            return None
        B, H, T, D = x.shape
        kx, tx = self.ref(x)
        k, _ = self.param([B, H, T, D])
        v, _ = self.param([B, H, T, D])
        (kk, tk), (kv, tv) = self.ref(k), self.ref(v)
        c = round(1 / math.sqrt(D), 5)
        ks = f"{kx} @ transpose({kk}) * {c}"
        ts = f"{tx} @ {tk}.transpose(-1, -2) * {c}"
        used = [x, k, v]
        if self.r.random() < 0.5:
            bias, _ = self.param([T, T] if self.r.random() < 0.5 else [H, T, T])
            kb, tb = self.ref(bias)
            ks, ts = f"{ks} + {kb}", f"{ts} + {tb}"
            used.append(bias)
        kmask = f"reshape(iota({T}), [{T}, 1]) >= reshape(iota({T}), [1, {T}])"
        tmask = f"torch.arange({T}).view({T}, 1) >= torch.arange({T}).view(1, {T})"
        return self.emit(f"softmax(where({kmask}, {ks}, -inf)) @ {kv}",
                         f"torch.softmax(wh({tmask}, {ts}, float('-inf')), -1) @ {tv}",
                         x.shape, used)

    def op_block(self, x):
        """`repeat N Name(x)`: a block of a few random statements and its own
        parameters, returning x plus what it computed."""
        if self.parent or len(self.blocks) >= 2 or not x.shape:
            return None
        name = f"Blk{len(self.blocks)}"
        layers = self.r.randint(1, 3)
        body = Program(self.seed, parent=self)
        self.ns["L"] = ""
        self.ns["x"] = self.ns[x.name] if not x.name.startswith("P[") else eval(x.name, self.ns)
        body.values.append(Value("x", x.shape))
        for _ in range(self.r.randint(2, 5)):
            op = getattr(body, self.r.choices(*zip(*self.BLOCK_OPS))[0])
            op(body.pick())
        outs = [v for v in body.values[1:]
                if _broadcasts(v.shape, x.shape) and _broadcast(v.shape, x.shape) == tuple(x.shape)]
        if outs:
            kv, tv = body.ref(self.r.choice(outs))
        elif len(body.values) > 1:
            last = body.values[-1]
            kv, tv = f"sum({body.ref(last)[0]})", f"torch.sum({body.ref(last)[1]})"
        else:
            return None
        shape = ", ".join(map(str, x.shape))
        kiln = [f"block {name}(x: [{shape}]) {{"] + ["  " + line for line in body.kiln_head]
        kiln += ["  " + line for line in body.kiln] + [f"  return x + {kv}", "}"]
        torch_def = [f"def {name}(x, L):"] + ["    " + line for line in body.torch]
        torch_def += [f"    return x + {tv}"]
        exec("\n".join(torch_def), self.ns)  # noqa: S102
        for layer in range(layers):
            for pname, pshape, std in body.params:
                self.ns["P"][f"{name}.{layer}.{pname}"] = self.sample(pshape, std)
        remat = self.r.choice(["", "", ", remat = full", ", remat = none"])
        kx, tx = self.ref(x)
        out = self.emit(f"repeat {layers} {name}({kx}{remat})",
                        f'rep({name}, {tx}, "{name}", {layers})', x.shape, [x])
        if out is None:
            return None
        self.blocks.append((kiln, torch_def))
        self.params += [(f"{name}.{layer}.{pname}", pshape, std)
                        for layer in range(layers) for pname, pshape, std in body.params]
        return out

    def start_tokens(self):
        """input tokens/targets [batch, seq] and an embedding: the model reads
        bytes of a text (vocabulary 256) and its loss has a cross_entropy."""
        batch, seq = self.r.choice([1, 2, 3]), self.r.choice([3, 5, 8, 13])
        self.tokens = (batch, seq)
        self.ns["TOK"] = torch.randint(0, 256, (batch, seq))
        self.ns["TGT"] = torch.randint(0, 256, (batch, seq))
        d = self.r.choice([4, 8, 12, 16, 24])
        emb, _ = self.param([256, d], std=0.5)
        ke, te = self.ref(emb)
        self.emb = emb
        return self.emit(f"{ke}[tokens]", f"{te}[TOK]", [batch, seq, d], [emb])

    def cross_entropy_term(self):
        batch, seq = self.tokens
        cands = [v for v in self.values if len(v.shape) == 3 and v.shape[:2] == (batch, seq)]
        h = self.r.choice(cands[-3:])
        kh, th = self.ref(h)
        d = h.shape[-1]
        if d == self.emb.shape[1] and self.r.random() < 0.5:
            ke, te = self.ref(self.emb)
            kl, tl = f"{kh} @ transpose({ke})", f"{th} @ {te}.transpose(-1, -2)"
        else:
            w, _ = self.param([d, 256], std=round(1 / math.sqrt(d), 5))
            kw, tw = self.ref(w)
            kl, tl = f"{kh} @ {kw}", f"{th} @ {tw}"
        h.uses += 1
        return (f"cross_entropy({kl}, targets)",
                f"F.cross_entropy(({tl}).reshape(-1, 256), TGT.reshape(-1).long())")

    BLOCK_OPS = [("op_unary", 4), ("op_binary", 5), ("op_matmul", 3), ("op_softmax", 1),
                 ("op_norm", 2), ("op_slice", 1), ("op_where", 1), ("op_rope", 1),
                 ("op_attention", 1), ("op_reduce", 1), ("op_transpose", 1)]

    OPS = [("op_unary", 4), ("op_binary", 5), ("op_matmul", 3), ("op_transpose", 1),
           ("op_reshape", 1), ("op_reduce", 1), ("op_softmax", 1), ("op_norm", 2),
           ("op_slice", 1), ("op_concat", 1), ("op_split", 1), ("op_expand", 1),
           ("op_where", 1), ("op_rope", 1), ("op_gather", 0.3), ("op_attention", 2),
           ("op_make4d", 0.4), ("op_hand_attention", 0.7), ("op_block", 1),
           ("op_positions", 0.5)]

    # -- the whole model ---------------------------------------------------

    def generate(self):
        # Token inputs, except over several data ranks or micro-batches:
        # each reads its own rows, and --save-grads keeps the first rows
        # only, so the oracle would not know the whole batch.
        if self.r.random() < 0.35 and "data" not in self.mesh and self.grad_accum == 1:
            self.start_tokens()
        for _ in range(self.r.randint(1, 3)):
            p, _ = self.param(self.shape(self.r.randint(1, 4)))
            kp, tp = self.ref(p)
            self.emit(f"{kp} * 1.0", f"{tp} * 1.0", p.shape, [])
        target = self.r.randint(4, 16 if self.r.random() < 0.7 else 32)
        names, weights = zip(*self.OPS)
        tries = 0
        while self.n < target and tries < 200:
            tries += 1
            op = getattr(self, self.r.choices(names, weights)[0])
            x = self.pick()
            op(x)
        self.finish_loss()
        self.draw_metrics()
        self.draw_flags()

    def draw_metrics(self):
        """`metric mK = EXPR` of a few values: kiln-run reports them."""
        scalars = [v for v in self.values if v.uses][-8:]
        for v in self.r.sample(scalars, min(len(scalars), self.r.choice([0, 0, 1, 2]))):
            kv, tv = self.ref(v)
            name = f"m{len(self.metrics)}"
            fn = self.r.choice(["mean", "sum"])
            self.kiln.append(f"metric {name} = {fn}({kv})" if v.shape else
                             f"metric {name} = {kv}")
            self.metrics.append((name, f"torch.{fn}({tv})" if v.shape else tv))

    def draw_flags(self):
        """kilnc options that change how the same model is compiled."""
        r = self.r.random
        if r() < 0.15:
            self.flags.append("--no-fusion")
        if r() < 0.15:
            self.flags.append("--no-attention-match")
        if self.blocks and r() < 0.4:
            self.flags.append(f"--remat={self.r.choice(['full', 'selective'])}")
        if self.tokens and r() < 0.3:
            self.flags.append(f"--cross-entropy-chunk-rows={self.r.choice([1, 2, 3, 7])}")
        elif self.tokens and r() < 0.2:
            self.flags.append("--no-fused-cross-entropy")

    def finish_loss(self):
        terms_k, terms_t = [], []
        if self.tokens:
            k, t = self.cross_entropy_term()
            terms_k.append(k)
            terms_t.append(t)
        leaves = [v for v in self.values if v.uses == 0][-6:]
        for v in leaves:
            kv, tv = self.ref(v)
            c = round(self.r.uniform(0.5, 2) / max(1, numel(v.shape)) ** 0.5, 6)
            if not v.shape:
                terms_k.append(f"{kv} * {c}")
                terms_t.append(f"{tv} * {c}")
            elif self.r.random() < 0.5 and not v.normalized:
                terms_k.append(f"sum({kv}) * {c}")
                terms_t.append(f"torch.sum({tv}) * {c}")
            else:
                terms_k.append(f"mean(square({kv}))")
                terms_t.append(f"torch.mean(torch.square({tv}))")
        self.kiln.append("loss = " + " + ".join(terms_k))
        self.torch.append("loss = " + " + ".join(terms_t))

    def kiln_source(self):
        lines = [f"# kiln_fuzz.py seed {self.seed}; kilnc {' '.join(self.flags) or '(no options)'}",
                 f"model fuzz{self.seed}", ""]
        for kiln, _ in self.blocks:
            lines += kiln + [""]
        if self.tokens:
            lines += ["input tokens [batch, seq] : i32", "input targets [batch, seq] : i32"]
        lines += self.kiln_head + [""] + self.kiln
        batch, seq = self.tokens or (1, 1)
        lines += ["", "train {", f"  batch = {batch}", f"  seq = {seq}"]
        lines += [f"  precision = {self.precision}"] if self.precision != "fp32" else []
        if self.mesh:
            lines += ["  mesh = [" + ", ".join(f"{k} = {v}" for k, v in self.mesh.items()) + "]"]
        if self.grad_accum > 1:
            lines += [f"  grad_accum = {self.grad_accum}"]
        lines += ["}", ""]
        return "\n".join(lines)

    def torch_source(self, rounded=False):
        """The PyTorch program; `rounded`: each statement's value and gradient
        rounded to bfloat16 (not the loss's sum of terms)."""
        def line(text):
            name, _, expr = text.partition(" = ")
            if not rounded or name.strip() == "loss" or "," in name or text.startswith(" " * 4 + "return"):
                return text
            return f"{name} = rb({expr})"

        lines = []
        for _, torch_def in self.blocks:
            lines += [torch_def[0]] + ["    " + line(t[4:]) if not t.startswith("    return") else t
                                       for t in torch_def[1:]] + [""]
        lines += [line(t) for t in self.torch]
        lines += [f"{name} = {expr}" for name, expr in self.metrics]
        return "\n".join(lines) + "\n"


def _broadcast(*shapes):
    r = max((len(s) for s in shapes), default=0)
    out = []
    for k in range(r):
        dims = {s[len(s) - r + k] for s in shapes if len(s) - r + k >= 0} - {1}
        assert len(dims) <= 1, shapes
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def _broadcasts(a, b):
    for x, y in zip(reversed(a), reversed(b)):
        if x != y and x != 1 and y != 1:
            return False
    return True


# -- running and checking ----------------------------------------------------

def evaluate(prog, init, grads, dtype, rounded=False):
    ns = {}
    exec(PRELUDE, ns)  # noqa: S102
    params = {name: init[name].to(dtype).requires_grad_() for name, _, _ in prog.params}
    ns["P"] = {k: ns["rb"](v) for k, v in params.items()} if rounded else params
    if prog.tokens:  # the batch kiln-run trained on (--save-grads keeps it)
        ns["TOK"], ns["TGT"] = grads["input:tokens"].long(), grads["input:targets"].long()
    exec(prog.torch_source(rounded), ns)  # noqa: S102
    loss = ns["loss"]
    grads = torch.autograd.grad(loss, list(params.values()), allow_unused=True)
    return loss.item(), {name: (g if g is not None else torch.zeros_like(params[name])).double()
                         for name, g in zip(params, grads)}, \
        {name: ns[name].item() for name, _ in prog.metrics}


def rel_err(got, ref, floor):
    """Largest difference over the larger of the reference's largest entry and
    `floor`."""
    scale = max(ref.abs().max().item() if ref.numel() else 0.0, floor)
    diff = (got.double() - ref).abs().max().item() if ref.numel() else 0.0
    return diff / max(scale, 1e-30), scale


def check(prog, init, grads, record):
    """(ok, report lines); record: kiln-run's first --metrics line."""
    kiln_loss = record["loss"]
    ref_loss, ref_grads, ref_metrics = evaluate(prog, init, grads, torch.float64)
    bf16 = prog.precision == "bf16"
    # The calibration: PyTorch in float32, or (bf16) in float64 with every
    # value and gradient rounded to bfloat16.
    f32_loss, f32_grads, f32_metrics = evaluate(prog, init, grads,
                                                torch.float64 if bf16 else torch.float32, bf16)
    # bf16: the emulation rounds at statement boundaries, kiln where its
    # kernels store bf16 (GEMM operands, attention's dq, dk, dv), so their
    # errors differ in detail; 5e-2 is llama_oracle.test's bf16 gradient
    # tolerance, and a wrong op is off by order 1.
    factor, least = (4, 5e-2) if bf16 else (16, 1e-4)
    lines, ok = [], True

    def judge(what, kiln_err, f32_err, scale):
        nonlocal ok
        bound = max(factor * f32_err, least)
        good = kiln_err <= bound or scale < 1e-12
        ok &= good
        lines.append(f"  {what}: kiln rel {kiln_err:.2e}, torch {'bf16' if bf16 else 'fp32'} "
                     f"rel {f32_err:.2e}, bound {bound:.2e} {'ok' if good else 'MISMATCH'}")

    def scalar_err(x, ref):
        return abs(x - ref) / max(abs(ref), 1e-30)

    if not math.isfinite(kiln_loss):
        return False, [f"  loss: kiln {kiln_loss}, reference {ref_loss}"]
    judge(f"loss ({kiln_loss:.7g} vs {ref_loss:.7g})", scalar_err(kiln_loss, ref_loss),
          scalar_err(f32_loss, ref_loss), abs(ref_loss))
    for name, ref in ref_metrics.items():
        # kiln-run writes metric NAME as act_rms/NAME (its TensorBoard tag).
        got = record.get(f"act_rms/{name}")
        if got is None:
            ok = False
            lines.append(f"  metric {name}: missing from --metrics")
            continue
        # The metrics file keeps 9 significant digits: 1e-8 of rounding more.
        judge(f"metric {name} ({got:.7g} vs {ref:.7g})", scalar_err(got, ref),
              scalar_err(f32_metrics[name], ref) + 1e-8, abs(ref))
    # A gradient a hundred times smaller than the largest is a cancellation
    # of terms of the larger scale (a scale the next op normalizes away, as
    # layer_norm(x * w) does to w; a sum of softmax rows, whose gradient is
    # 0 up to rounding): each side resolves it only to the larger scale's
    # rounding, and PyTorch may happen to get 0 exactly, so that scale,
    # divided by 100, is its floor (also bf16's: 8 bits, llama_oracle.test's
    # floor). A wrong gradient of such a tensor shows when it is off by more
    # than 1e-6 of the largest (1e-4 of the floor).
    floor = 1e-2 * max(
        (g.abs().max().item() for g in ref_grads.values() if g.numel()), default=0.0)
    for name, ref in ref_grads.items():
        if name not in grads:
            ok = False
            lines.append(f"  grad {name}: missing from --save-grads")
            continue
        got = grads[name]
        if tuple(got.shape) != tuple(ref.shape):
            ok = False
            lines.append(f"  grad {name}: shape {tuple(got.shape)}, expected {tuple(ref.shape)}")
            continue
        kerr, scale = rel_err(got, ref, floor)
        ferr, _ = rel_err(f32_grads[name], ref, floor)
        judge(f"grad {name} {list(ref.shape)}", kerr, ferr, scale)
    return ok, lines


def run(cmd, env, log):
    with open(log, "w") as f:
        p = subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=600)
    return p.returncode


def roundtrip_phases(prog, target, tools, env, d, art):
    """Every phase's dump (--dump-phases-to), compiled from there
    (--compile-from), gives the direct compile's artifact byte for byte: the
    dumps print every op and attribute the later phases read."""
    dumps = os.path.join(d, f"{target}.phases")
    model = os.path.join(d, "model.kiln")
    common = [f"--target={target}"] + prog.flags
    rc = run([tools["kilnc"], model, f"--dump-phases-to={dumps}", "-o",
              os.path.join(d, f"{target}.dumped.kart")] + common,
             env, os.path.join(d, f"{target}.dump.log"))
    if rc != 0:
        return [f"{target}: kilnc --dump-phases-to exited {rc} (see {target}.dump.log)"]
    failures = []
    for name in sorted(os.listdir(dumps)):
        if not name.endswith(".mlir") or "-" not in name:
            continue
        phase = name[name.index("-") + 1:-len(".mlir")]
        if phase == "artifact":
            continue
        out = os.path.join(d, f"{target}.from-{phase}.kart")
        log = os.path.join(d, f"{target}.from-{phase}.log")
        # --remat is compiled into the dump (kilnc refuses it with one).
        rc = run([tools["kilnc"], f"--compile-from={phase}", os.path.join(dumps, name), "-o", out]
                 + [f for f in common if not f.startswith("--remat")], env, log)
        if rc != 0:
            failures.append(f"{target}: kilnc --compile-from={phase} exited {rc} (see {log})")
        elif open(out, "rb").read() != open(art, "rb").read():
            failures.append(f"{target}: the artifact compiled from the {phase} dump differs")
    return failures


def run_seed(seed, targets, tools, work, keep, roundtrip=False, precision="fp32", mesh=None,
             grad_accum=1):
    prog = Program(seed)
    prog.precision = precision
    prog.mesh = mesh or {}
    prog.grad_accum = grad_accum
    try:
        prog.generate()
    except Exception as e:  # the generator's own bug: reported, the run goes on
        return [f"generator error: {type(e).__name__}: {e}"], prog.n, []
    d = os.path.join(work, f"seed{seed}")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    with open(os.path.join(d, "model.kiln"), "w") as f:
        f.write(prog.kiln_source())
    with open(os.path.join(d, "oracle.py"), "w") as f:
        f.write(PRELUDE + "\n# P: the parameters (--save-init), float64 with requires_grad\n"
                + prog.torch_source())
    failures, refusals = [], []
    ranks = math.prod(prog.mesh.values()) if prog.mesh else 1
    launch = [] if ranks == 1 else [
        "env", "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
        "OMPI_MCA_rmaps_base_oversubscribe=1", "OMP_NUM_THREADS=1", "mpirun", "-np", str(ranks)]
    for target in targets:
        env = dict(os.environ)
        env["KILN_CACHE_DIR"] = os.path.join(work, f"cache-{target}")
        if target == "cuda":
            env["KILN_CUDA_LIB_DIR"] = tools["sim"]
            env["KILN_SIM_DEVICES"] = str(ranks)  # one simulated GPU per rank
        art = os.path.join(d, f"{target}.kart")
        rc = run([tools["kilnc"], os.path.join(d, "model.kiln"), f"--target={target}", "-o", art]
                 + prog.flags, env, os.path.join(d, f"{target}.kilnc.log"))
        if rc != 0:
            log = open(os.path.join(d, f"{target}.kilnc.log")).read()
            if prog.mesh and rc == 1 and " error: " in log and "internal error" not in log:
                refusals.append(f"{target}: refused: " + log.split(" error: ", 1)[1].split("\n")[0])
                continue
            failures.append(f"{target}: kilnc exited {rc} (see {target}.kilnc.log)")
            continue
        if roundtrip:
            failures += roundtrip_phases(prog, target, tools, env, d, art)
        files = {k: os.path.join(d, f"{target}.{k}") for k in ("init", "grads", "jsonl")}
        rc = run(launch + [tools["kiln-run"], art, "--steps", "1", "--seed", str(seed % 1000 + 1),
                  "--save-init", files["init"], "--save-grads", files["grads"],
                  "--metrics", files["jsonl"], "--quiet"]
                 + (["--data", TEXT] if prog.tokens else []),
                 env, os.path.join(d, f"{target}.run.log"))
        if rc != 0:
            failures.append(f"{target}: kiln-run exited {rc} (see {target}.run.log)")
            continue
        record = json.loads(open(files["jsonl"]).readline())
        ok, lines = check(prog, read_safetensors(files["init"]),
                          read_safetensors(files["grads"]), record)
        if not ok:
            failures.append(f"{target}: disagrees with PyTorch\n" + "\n".join(lines))
    if not failures and not keep:
        shutil.rmtree(d)
    return failures, prog.n, refusals


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0:50", help="A:B (B excluded) or a list A,B,C")
    ap.add_argument("--targets", default="cpu", help="cpu, cuda (device simulator) or cpu,cuda")
    ap.add_argument("--kilnc", default=os.path.join(ROOT, "build", "bin", "kilnc"))
    ap.add_argument("--kiln-run", default=os.path.join(ROOT, "build", "bin", "kiln-run"))
    ap.add_argument("--work", default="/tmp/kiln-fuzz")
    ap.add_argument("--keep", action="store_true", help="keep passing seeds' directories too")
    ap.add_argument("--show", type=int, help="print one seed's model and PyTorch program")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="the models' precision (bf16: checked against PyTorch with every "
                    "value and gradient rounded to bfloat16, 4x its error, at least 5e-2)")
    ap.add_argument("--mesh", default="",
                    help="several ranks over MPI, e.g. 'data=2', 'model=2' or 'data=2,model=2': "
                    "parameters split over 'model' at random, batches over 'data'; a clear "
                    "kilnc error on a split it does not support counts as refused, not failed")
    ap.add_argument("--grad-accum", type=int, default=1,
                    help="micro-batches per step (models without token inputs: each "
                    "micro-batch the whole loss, the mean of their gradients the same)")
    ap.add_argument("--roundtrip", action="store_true",
                    help="also compile from every phase's dump: the same artifact")
    a = ap.parse_args()
    if a.show is not None:
        prog = Program(a.show)
        prog.generate()
        print(prog.kiln_source())
        print("# PyTorch\n" + prog.torch_source())
        return 0
    if ":" in a.seeds:
        lo, hi = map(int, a.seeds.split(":"))
        seeds = range(lo, hi)
    else:
        seeds = [int(s) for s in a.seeds.split(",")]
    targets = a.targets.split(",")
    mesh = {}
    for axis in filter(None, a.mesh.split(",")):
        name, _, size = axis.partition("=")
        if name not in ("data", "model") or not size.isdigit() or int(size) < 2:
            ap.error(f"--mesh: '{axis}' is not data=N or model=N with N >= 2")
        mesh[name] = int(size)
    for t in targets:
        if t not in ("cpu", "cuda"):
            ap.error(f"unknown target '{t}' (cpu or cuda)")
    sim = os.environ.get("KILN_CUDA_LIB_DIR") or os.path.join(ROOT, "build", "sim", "lib")
    tools = {"kilnc": a.kilnc, "kiln-run": a.kiln_run, "sim": sim}
    for k, p in tools.items():
        if (k != "sim" or "cuda" in targets) and not os.path.exists(p):
            ap.error(f"{p} does not exist (build first, or --kilnc / --kiln-run, or "
                     "KILN_CUDA_LIB_DIR for the simulator's libraries)")
    os.makedirs(a.work, exist_ok=True)
    # Run copies, so that rebuilding while a long run goes on changes nothing
    # under it (and is not refused a busy executable).
    snapshot = os.path.join(a.work, "tools")
    shutil.rmtree(snapshot, ignore_errors=True)
    os.makedirs(snapshot)
    for k in ("kilnc", "kiln-run"):
        tools[k] = shutil.copy2(tools[k], os.path.join(snapshot, k))
    # kiln-run's plugins (MPI, Gloo), found in lib/ beside it.
    plugins = os.path.join(os.path.dirname(a.kiln_run), "..", "lib")
    if os.path.isdir(plugins):
        os.makedirs(os.path.join(snapshot, "lib"))
        for name in os.listdir(plugins):
            if name.startswith("libkiln_") and name.endswith(".so"):
                shutil.copy2(os.path.join(plugins, name), os.path.join(snapshot, "lib", name))
    if "cuda" in targets:
        tools["sim"] = shutil.copytree(tools["sim"], os.path.join(snapshot, "sim-lib"))
    failed, refused_seeds, start = [], [], time.time()
    for seed in seeds:
        failures, n, refused = run_seed(seed, targets, tools, a.work, a.keep, a.roundtrip,
                                        a.precision, mesh, a.grad_accum)
        status = "FAIL" if failures else "refused" if refused else "ok"
        print(f"seed {seed}: {n} statements, {status}", flush=True)
        for f in refused:
            print("  " + f, flush=True)
        for f in failures:
            print("  " + f.replace("\n", "\n  "), flush=True)
        if failures:
            failed.append(seed)
        elif refused:
            refused_seeds.append(seed)
    passed = len(seeds) - len(failed) - len(refused_seeds)
    print(f"{passed} passed, {len(failed)} failed"
          + (f", {len(refused_seeds)} refused" if refused_seeds else "") + " "
          f"({time.time() - start:.0f} s; failing seeds in {a.work}: {failed})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
