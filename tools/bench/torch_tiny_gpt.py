"""PyTorch (CPU, float32) training throughput of the same tiny_gpt, for comparison
with kiln-run on the same machine. Uses the oracle's independent model definition.

usage: torch_tiny_gpt.py DATA STEPS THREADS
"""
import math
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "test", "e2e", "Inputs"))
import tiny_gpt_oracle as model  # noqa: E402

B, T = 8, 128


def init_params():
    torch.manual_seed(0)
    C, L = model.DIM, model.N_LAYER
    normal = lambda *shape, std=0.02: (torch.randn(*shape) * std)
    P = {"wte": normal(model.VOCAB, C), "wpe": normal(128, C), "lnf_w": torch.ones(C), "lnf_b": torch.zeros(C)}
    for l in range(L):
        p = f"Block.{l}."
        for n in ("ln1", "ln2"):
            P[p + n + "_w"], P[p + n + "_b"] = torch.ones(C), torch.zeros(C)
        for n in ("wq", "wk", "wv"):
            P[p + n] = normal(C, C)
        for n in ("bq", "bk", "bv", "bo", "b_proj"):
            P[p + n] = torch.zeros(C)
        P[p + "wo"] = normal(C, C, std=0.02 / math.sqrt(2 * L))
        P[p + "w_fc"], P[p + "b_fc"] = normal(C, 4 * C), torch.zeros(4 * C)
        P[p + "w_proj"] = normal(4 * C, C, std=0.02 / math.sqrt(2 * L))
    return {k: v.requires_grad_() for k, v in P.items()}


def main():
    data_path, steps, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(threads)
    data = np.frombuffer(open(data_path, "rb").read(), dtype=np.uint8).astype(np.int64)
    P = init_params()
    opt = torch.optim.AdamW(list(P.values()), lr=1e-3, betas=model.BETAS, eps=model.ADAM_EPS,
                            weight_decay=model.WEIGHT_DECAY)
    warmup = 5
    for s in range(steps + warmup):
        if s == warmup:
            start = time.perf_counter()
        x, y = model.batch(data, 0, s, B, T)
        opt.zero_grad()
        loss = model.forward(P, x, y)
        loss.backward()
        opt.step()
    seconds = time.perf_counter() - start
    print(f"torch {torch.__version__} CPU fp32, {threads} threads: {steps} steps in {seconds:.2f} s, "
          f"{steps * B * T / seconds:.0f} tokens/s, final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
