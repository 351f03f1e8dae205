"""muon_graph_bench.py - a whole Muon step, eager and captured in a CUDA graph, on one GPU
or (under torchrun) on every rank of a data-parallel group.

A step orthogonalizes every matrix of the model: tpla.torch.Muon runs them as
one batched plan (its default fp32 Gram, and ns_gram_dtype=bf16, the anchor's
precision), the PyTorch anchor (the reference recipe: Nesterov momentum,
ns_torch.py's ns_local in bf16, the update scaled by max(1, rows/cols)^0.5)
one matrix after another. For a transformer of --layers layers of width
--hidden (per layer q, k, v, o: hidden x hidden; MLP: 4 hidden x hidden and
hidden x 4 hidden), this times per step: each optimizer eager, and its step
captured once into a torch.cuda.CUDAGraph and replayed. Wall time of --iters
back-to-back steps between two CUDA events / --iters, median of --rounds
loops after a warm-up; the gradients are fixed random bf16 tensors (the
steps' inputs; the parameters move, as in training).

With --adamw the model also has what a Muon recipe leaves to AdamW: two norm
weights per layer, the final norm, and with --vocab V an embedding and a head
(V x hidden). tpla's Muon steps them itself (adamw_params, capturable=True);
the anchor adds torch.optim.AdamW(capturable=True, foreach), the same
hyperparameters, to its step.

Under torchrun with more than one rank every rank holds the whole model (data
parallel) and the step is shared: tpla.torch.Muon(comm=...) assigns whole
matrices to ranks in its batched plan and all-gathers the updates; the anchor
is the distributed form of the reference recipe (parameters of one shape
dealt to the ranks in turn, each rank orthogonalizes its own, then one
torch.distributed.all_gather per turn, NCCL). The slowest rank's time is
printed, and the ranks' parameters are checked to agree after the timing.

  python3 bench/muon_graph_bench.py [--hidden 1024] [--layers 8] [--iters 20] [--adamw]
  torchrun --nproc_per_node=2 bench/muon_graph_bench.py [--hidden 2048] ...
"""
import argparse
import math
import os
import sys

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

import tpla.torch as tt  # noqa: E402
from ns_graph_bench import captured, per_call_us  # noqa: E402
from ns_torch import ns_local  # noqa: E402


def model_params(hidden, layers):
    shapes = [(hidden, hidden)] * 4 + [(4 * hidden, hidden), (hidden, 4 * hidden)]
    params = []
    for _ in range(layers):
        for rows, cols in shapes:
            p = torch.nn.Parameter(torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
                                   * 0.02)
            p.grad = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
            params.append(p)
    return params


def adamw_params(hidden, layers, vocab):
    """The parameters a Muon recipe leaves to AdamW: two norm weights per layer, the final
    norm and (vocab > 0) the embedding and the head; bf16 with bf16 gradients."""
    shapes = [(hidden,)] * (2 * layers + 1) + [(vocab, hidden)] * (2 if vocab else 0)
    params = []
    for shape in shapes:
        p = torch.nn.Parameter(1.0 + 0.02 * torch.randn(shape, device="cuda",
                                                         dtype=torch.bfloat16))
        p.grad = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
        params.append(p)
    return params


ADAMW = dict(lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0)


def with_adamw(muon_step, params):
    """The anchor's step followed by torch's AdamW over params (none: the step alone)."""
    if not params:
        return muon_step
    opt = torch.optim.AdamW(params, capturable=True, **ADAMW)

    def step():
        muon_step()
        opt.step()
    return step


def torch_muon(params, lr=0.02, momentum=0.95):
    """The anchor's step: the reference recipe, one matrix at a time."""
    bufs = [torch.zeros_like(p) for p in params]

    @torch.no_grad()
    def step():
        for p, buf in zip(params, bufs):
            buf.lerp_(p.grad, 1.0 - momentum)
            u = p.grad.lerp(buf, momentum)
            x = ns_local(u, 5)
            rows, cols = p.shape
            p.add_(x.to(p.dtype), alpha=-lr * math.sqrt(max(1.0, rows / cols)))
    return step


def torch_muon_dist(params, rank, world, lr=0.02, momentum=0.95):
    """The anchor on `world` ranks: each shape's matrices dealt to the ranks in turns
    of `world`; a rank updates its momentum and orthogonalizes its matrix of a turn,
    then the turn's updates are all-gathered (a zero-filled pad where a turn runs
    short) and every rank applies all of them."""
    by_shape = {}
    for p in params:
        by_shape.setdefault(tuple(p.shape), []).append(p)
    bufs = {p: torch.zeros_like(p) for p in params}

    @torch.no_grad()
    def step():
        for shape, group in by_shape.items():
            scale = -lr * math.sqrt(max(1.0, shape[0] / shape[1]))
            for base in range(0, len(group), world):
                turn = group[base:base + world]
                if rank < len(turn):
                    p, buf = turn[rank], bufs[turn[rank]]
                    buf.lerp_(p.grad, 1.0 - momentum)
                    mine = ns_local(p.grad.lerp(buf, momentum), 5).to(p.dtype)
                else:
                    mine = torch.zeros_like(group[0])
                got = [torch.empty_like(mine) for _ in range(world)]
                dist.all_gather(got, mine)
                for p, u in zip(turn, got):
                    p.add_(u, alpha=scale)
    return step


def every_rank(ok):
    """Whether ok holds on every rank (one rank's failed capture must not leave the others
    waiting in a collective it skips)."""
    if not dist.is_initialized():
        return ok
    t = torch.tensor([0.0 if ok else 1.0], device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t) == 0.0


def slowest(value):
    """The largest value over the ranks (the step's time is the slowest rank's)."""
    if not dist.is_initialized():
        return value
    t = torch.tensor([value], device="cuda", dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t)


def disagreement(params):
    """Largest |p - rank 0's p| over the parameters (0 on one rank)."""
    worst = 0.0
    if dist.is_initialized():
        for p in params:
            ref = p.detach().clone()
            dist.broadcast(ref, 0)
            worst = max(worst, float((p.detach() - ref).abs().max()))
    return slowest(worst)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--adamw", action="store_true", help="add the AdamW parameters")
    ap.add_argument("--vocab", type=int, default=0, help="with --adamw: embedding and head rows")
    args = ap.parse_args()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank, comm = 0, None
    if world > 1:
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local))
        rank = dist.get_rank()
        comm = tt.Communicator()
    torch.manual_seed(1234)  # every rank the same model and gradients (data parallel)
    ours = model_params(args.hidden, args.layers)
    ours_aw = adamw_params(args.hidden, args.layers, args.vocab) if args.adamw else []
    copies = []
    for _ in range(2):
        copies.append([[torch.nn.Parameter(p.detach().clone()) for p in ps]
                       for ps in (ours, ours_aw)])
        for p, q in zip(ours + ours_aw, copies[-1][0] + copies[-1][1]):
            q.grad = p.grad.clone()
    (bf16_gram, bf16_gram_aw), (theirs, theirs_aw) = copies
    aw = dict(adamw_lr=ADAMW["lr"], adamw_betas=ADAMW["betas"], adamw_eps=ADAMW["eps"],
              adamw_weight_decay=ADAMW["weight_decay"], capturable=True)
    opt = tt.Muon(ours, lr=0.02, momentum=0.95, comm=comm, adamw_params=ours_aw, **aw)
    fast = tt.Muon(bf16_gram, lr=0.02, momentum=0.95, comm=comm, ns_gram_dtype=torch.bfloat16,
                   adamw_params=bf16_gram_aw, **aw)
    anchor = with_adamw(torch_muon(theirs) if world == 1
                        else torch_muon_dist(theirs, rank, world), theirs_aw)
    steps = (("tpla Muon (one batched plan)", opt.step),
             ("tpla Muon, bf16 Gram", fast.step),
             ("torch Muon reference" + (" (dealt)" if world > 1 else ""), anchor))
    say = print if rank == 0 else (lambda *a, **k: None)
    # each round starts after a small all-reduce, so one rank's lead is not timed as the step's
    align = (lambda: dist.all_reduce(torch.zeros(1, device="cuda"))) if world > 1 else None
    say("# a Muon step on %d GPU(s) (%s, torch %s): %d layers of width %d, %d matrices, %d "
        "AdamW parameters (vocab %d); ms per step, the wall time of %d back-to-back steps / "
        "%d, median of %d rounds, slowest rank"
        % (world, torch.cuda.get_device_name(), torch.__version__, args.layers, args.hidden,
           len(ours), len(ours_aw), args.vocab if ours_aw else 0, args.iters, args.iters,
           args.rounds))
    say("# %-30s %10s %10s %10s" % ("optimizer", "eager", "graph", "graph/eag"))
    results = []
    for name, step in steps:
        for _ in range(3):
            step()
        eager = slowest(per_call_us(step, args.iters, args.rounds, align) / 1e3)
        try:
            replay, why = captured(step), None
        except RuntimeError as e:  # a capture refused: the eager figure still stands
            replay, why = None, str(e).splitlines()[0][:160]
        graph = float("nan")
        if every_rank(replay is not None):
            graph = slowest(per_call_us(replay, args.iters, args.rounds, align) / 1e3)
        else:
            print("# rank %d, %s: no graph (%s)" % (rank, name, why or "another rank's failed"))
        results.append((eager, graph))
        say("  %-30s %10.3f %10.3f %10.3f" % (name, eager, graph, graph / eager), flush=True)
    (te, tg), (fe, fg), (re, rg) = results
    say("# tpla / torch: eager %.3f, graph %.3f; bf16 Gram: eager %.3f, graph %.3f"
        % (te / re, tg / rg, fe / re, fg / rg))
    if world > 1:
        say("# ranks' parameters differ by at most: tpla %.3g (bf16 Gram %.3g), torch %.3g"
            % (disagreement(ours + ours_aw), disagreement(bf16_gram + bf16_gram_aw),
               disagreement(theirs + theirs_aw)))
        comm.close()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
