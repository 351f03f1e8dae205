"""run173_bf16_mutant.py - one GPU: checks_graphs._tensor_vs_number_bf16 must fail on the
two roundings it was written for, restored here one at a time as mutants of tpla.torch's
Muon (not the library): a decay factor applied by p.mul_(1 - lr wd) with CUDA 0-dim tensors,
and a tensor momentum cast to the buffer's dtype. Prints one line per variant and exits 1
if the unchanged code fails or a mutant passes.

  TPLA_LIBRARY=build-gpu/libtpla.so python3 bench/run173_bf16_mutant.py
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "python"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

import torch  # noqa: E402
from tpla.torch import _muon  # noqa: E402
import checks_graphs  # noqa: E402


def rounded_decay(p, lr, weight_decay):
    p.mul_(1.0 - lr * weight_decay)


def momentum_in_buffer_dtype(original):
    def hyper(self, group, key, t):
        v = original(self, group, key, t)
        return v.to(t.dtype) if key == "momentum" and torch.is_tensor(v) else v
    return hyper


def main():
    dev = torch.device("cuda", 0)
    bad = 0
    variants = [("unchanged", None), ("decay by mul_", ("_decay", rounded_decay)),
                ("momentum cast", ("_hyper", momentum_in_buffer_dtype(_muon.Muon._hyper)))]
    for name, patch in variants:
        saved = None
        if patch is not None:
            owner = _muon if patch[0] == "_decay" else _muon.Muon
            saved = (owner, patch[0], getattr(owner, patch[0]))
            setattr(owner, patch[0], patch[1])
        try:
            worst = checks_graphs._tensor_vs_number_bf16(dev)
            verdict = "passed (worst %.2f roundings)" % worst
            bad += patch is not None
        except AssertionError as e:
            verdict = "FAILED: %s" % e
            bad += patch is None
        finally:
            if saved is not None:
                setattr(*saved)
        print("%-16s %s" % (name, verdict), flush=True)
    print("# %s" % ("as expected" if bad == 0 else "%d unexpected verdict(s)" % bad))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
