"""The random models of tools/fuzz/kiln_fuzz.py: a Program grows a Kiln model
and, beside it, the same computation in PyTorch (oracle_ops.py's helpers), one
statement at a time, each evaluated at once on sample parameters to keep the
values finite and moderate and to check the generator's own idea of every
shape."""
import math
import os
import random

import numpy as np
import torch

# oracle_ops.py's text: run in each program's namespace, copied into oracle.py.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "oracle_ops.py")) as f:
    PRELUDE = f.read()


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
        self.allow_dropout = False  # attention may drop (no PyTorch oracle then)
        self.dropout = False        # some attention drops: checked against itself only
        self.comparisons = []       # (torch value, operator, threshold) of where() conditions
        if parent:
            self.r, self.torch_rng, self.ns = parent.r, parent.torch_rng, parent.ns
            self.large, self.MAX_ELEMS = parent.large, parent.MAX_ELEMS
            self.mesh, self.grad_accum = parent.mesh, parent.grad_accum
            self.allow_dropout = parent.allow_dropout
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
        comparisons = [(tx, cmp, c)]
        roll = self.r.random()
        if roll < 0.2:  # and / or with a second comparison of x
            d = round(self.r.uniform(-0.6, 0.6), 3)
            comparisons.append((tx, "<", d))
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
        out = self.emit(f"where({kcond}, {ka}, {kb})", f"wh({tcond}, {ta}, {tb})", out, used)
        if out is not None and not self.parent:  # (a block's names are its function's)
            self.comparisons += comparisons
        return out

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
        # Dropout has no PyTorch twin (Kiln's Philox masks): a program with it
        # is only checked against itself (kiln_fuzz.py --same-bits).
        if self.allow_dropout and self.r.random() < 0.6:
            args.append(f"dropout = {self.r.choice([0.1, 0.5])}")
            root = self
            while root.parent:
                root = root.parent
            root.dropout = True
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
        # Token inputs, except over several micro-batches on several data
        # ranks: --save-batches (each micro-batch) is rank 0's alone, and
        # --save-grads (every rank's rows) holds the last micro-batch.
        if self.r.random() < 0.35 and (self.grad_accum == 1 or "data" not in self.mesh):
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
