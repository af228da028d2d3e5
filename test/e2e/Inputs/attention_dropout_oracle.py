"""An independent float64 PyTorch reference of test/e2e/Inputs/attention_dropout.kiln.

Rebuilds Kiln's dropout masks with its own Philox4x32-10 (numpy uint32
arithmetic, written from the published algorithm: Salmon et al., SC11), checks
that Philox against Random123's known-answer vectors, then recomputes every
attention naively (full [T, S] scores, masked entries at -inf, softmax, then
p * keep / (1 - p_drop) on the probabilities, as torch's dropout) and compares
the loss and the gradient of every parameter (q/k/v, the projections, the
learned slope that enters through a score capture) with kiln-run's.

Mask contract (codegen/PhiloxRandom.inc): element (b, h, i, j) of the
micro-step with offset `offset` is kept when word 0 of
Philox4x32-10(counter = (j, i, b*H + h, offset mod 2^32), key = (seed mod 2^32,
seed >> 32)) is >= floor(p * 2^32), p being the f32 value of the model's
dropout. kiln-run writes seed = --seed and offset = step * grad_accum +
micro-step (1 * 1 + 0 for the first step of this model).

Tolerance: attention_oracle.py's, whose check() this uses (the same kernels, the same float32
arithmetic; the mask is exact, so dropout adds no error): relative 1e-4
norm-wise per gradient, 1e-5 on the loss relative to the sum of the
magnitudes of its terms. One element of the mask drawn differently changes a
gradient by ~1e-2 relative, far past that.

usage: attention_dropout_oracle.py INIT GRADS METRICS SEED OFFSET
"""
import math
import sys

import numpy as np
import torch

# The same reference attention and Kiln-vs-float64 comparison, in this folder.
from attention_oracle import attention as reference_attention, check

M0, M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
W0, W1 = np.uint32(0x9E3779B9), np.uint32(0xBB67AE85)


def philox4x32_10(c0, c1, c2, c3, k0, k1):
    """Elementwise Philox4x32-10 on uint32 arrays (broadcast)."""
    c0, c1, c2, c3 = (np.asarray(x, dtype=np.uint32) for x in (c0, c1, c2, c3))
    k0, k1 = np.uint32(k0), np.uint32(k1)
    with np.errstate(over="ignore"):
        for r in range(10):
            if r > 0:
                k0 = np.uint32(k0 + W0)
                k1 = np.uint32(k1 + W1)
            p0 = M0 * c0.astype(np.uint64)
            p1 = M1 * c2.astype(np.uint64)
            hi0, lo0 = (p0 >> np.uint64(32)).astype(np.uint32), p0.astype(np.uint32)
            hi1, lo1 = (p1 >> np.uint64(32)).astype(np.uint32), p1.astype(np.uint32)
            c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return c0, c1, c2, c3


def check_known_answers():
    vectors = [
        ((0, 0, 0, 0), (0, 0), (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
        ((0xffffffff,) * 4, (0xffffffff,) * 2,
         (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
        ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
         (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1)),
    ]
    for ctr, key, want in vectors:
        got = tuple(int(w) for w in philox4x32_10(*ctr, *key))
        assert got == want, f"philox KAT {ctr}: {got} != {want}"


def keep_mask(B, H, T, S, p, seed, offset):
    """[B, H, T, S] bool keep mask of Kiln's dropout."""
    threshold = math.floor(float(np.float32(p)) * 4294967296.0)
    b = np.arange(B).reshape(B, 1, 1, 1)
    h = np.arange(H).reshape(1, H, 1, 1)
    i = np.arange(T, dtype=np.uint32).reshape(1, 1, T, 1)
    j = np.arange(S, dtype=np.uint32).reshape(1, 1, 1, S)
    bh = (b * H + h).astype(np.uint32)
    shape = (B, H, T, S)
    x0, _, _, _ = philox4x32_10(np.broadcast_to(j, shape), np.broadcast_to(i, shape),
                                np.broadcast_to(bh, shape),
                                np.full(shape, offset & 0xffffffff, dtype=np.uint32),
                                seed & 0xffffffff, seed >> 32)
    return torch.from_numpy(x0 >= np.uint32(threshold))


def attention(q, k, v, scale, drop, seed, offset, score=None, mask=None):
    """attention_oracle's naive attention with dropout after the softmax; also
    returns the weights z = keep / (1 - p)."""
    B, H, T, S = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
    z = keep_mask(B, H, T, S, drop, seed, offset).double() / (1.0 - float(np.float32(drop)))
    return reference_attention(q, k, v, scale, score, mask, weights=z), z


def model(P, seed, offset):
    B, H, T, D = P["q1"].shape
    lens = torch.arange(B).view(B, 1, 1, 1)
    slope = P["slope"]
    a1, z1 = attention(P["q1"], P["k1"], P["v1"], 1 / math.sqrt(D), 0.1, seed, offset,
                       score=lambda s, b, h, i, j: s - slope[h] * (i - j).abs(),
                       mask=lambda b, h, i, j: j < 30 + 20 * lens)
    x2 = P["x2"]
    a2, z2 = attention(x2, x2, x2, 1 / math.sqrt(D), 0.3, seed, offset,
                       mask=lambda b, h, i, j: j <= i)
    kept1 = (z1 > 0).double().mean().item()
    kept2 = (z2 > 0).double().mean().item()
    print(f"kept fractions: {kept1:.4f} (p 0.1), {kept2:.4f} (p 0.3)")
    terms = [a1 * P["w1"], a2 * P["w2"]]
    loss = sum(t.sum() for t in terms)
    magnitude = sum(t.abs().sum() for t in terms).item()
    return loss, magnitude


def main():
    seed, offset = int(sys.argv[4]), int(sys.argv[5])
    check_known_answers()
    ok = check(lambda P: model(P, seed, offset), *sys.argv[1:4])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
