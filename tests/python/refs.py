"""refs.py - independent references for the tpla Python tests: a float64 NumPy
Newton-Schulz, a plain PyTorch Muon (Keller Jordan's recipe, no tpla), the
coefficient tables typed in again, and small helpers to gather shards.
"""
import numpy as np
import torch

MUON = [(3.4445, -4.7750, 2.0315)]
MUON5 = [(4.0848, -6.8946, 2.9270), (3.9505, -6.3029, 2.6377), (3.7418, -5.5913, 2.3037),
         (2.8769, -3.1427, 1.2046), (2.8366, -3.0525, 1.2012)]
CUBIC = [(1.5, -0.5, 0.0)]


def schedule(table, steps):
    """steps triples: the table, its last triple repeated."""
    return [table[min(i, len(table) - 1)] for i in range(steps)]


def ns_numpy(x, triples, eps=1e-7, safety=1.0):
    """Newton-Schulz in float64 with the coefficients rounded to float32 (as
    the library stores them), Gram of the short side."""
    x = np.asarray(x, dtype=np.float64)
    x = x / (safety * np.linalg.norm(x) + eps)
    tall = x.shape[0] > x.shape[1]
    if tall:
        x = x.T
    for a, b, c in triples:
        a, b, c = (float(np.float32(v)) for v in (a, b, c))
        g = x @ x.T
        x = a * x + (b * g + c * (g @ g)) @ x
    return x.T if tall else x


def ns_torch(g, steps=5, eps=1e-7, dtype=torch.float32):
    """The reference recipe's zeropower_via_newtonschulz5, in `dtype`."""
    a, b, c = MUON[0]
    x = g.to(dtype)
    tall = x.size(-2) > x.size(-1)
    if tall:
        x = x.mT
    x = x / (x.norm() + eps)
    for _ in range(steps):
        m = x @ x.mT
        x = a * x + (b * m + c * m @ m) @ x
    return x.mT if tall else x


class RefMuon(torch.optim.Optimizer):
    """Plain PyTorch Muon (momentum, Nesterov, NS, max(1, r/c)^0.5, decoupled
    weight decay) for 2-D+ params; AdamW for the params given as adamw_params."""

    def __init__(self, params, lr=0.02, momentum=0.95, nesterov=True, weight_decay=0.0,
                 ns_steps=5, ns_dtype=torch.float32, adamw_params=(), adamw_lr=3e-4,
                 adamw_betas=(0.9, 0.95), adamw_eps=1e-8, adamw_weight_decay=0.0):
        groups = [dict(params=list(params), muon=True, lr=lr, weight_decay=weight_decay)]
        adamw_params = list(adamw_params)
        if adamw_params:
            groups.append(dict(params=adamw_params, muon=False, lr=adamw_lr,
                               weight_decay=adamw_weight_decay))
        super().__init__(groups, dict(momentum=momentum, nesterov=nesterov, betas=adamw_betas,
                                      eps=adamw_eps))
        self.ns_steps, self.ns_dtype = ns_steps, ns_dtype

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                if group["muon"]:
                    g = p.grad.reshape(p.shape[0], -1)
                    if "buf" not in st:
                        st["buf"] = torch.zeros_like(g)
                    st["buf"].lerp_(g, 1 - group["momentum"])
                    u = g.lerp(st["buf"], group["momentum"]) if group["nesterov"] else st["buf"]
                    u = ns_torch(u, self.ns_steps, dtype=self.ns_dtype).to(p.dtype)
                    u = u * max(1.0, u.size(-2) / u.size(-1)) ** 0.5
                    p.mul_(1 - group["lr"] * group["weight_decay"])
                    p.add_(u.reshape(p.shape), alpha=-group["lr"])
                else:
                    if not st:
                        st["t"], st["m"], st["v"] = 0, torch.zeros_like(p), torch.zeros_like(p)
                    st["t"] += 1
                    b1, b2 = group["betas"]
                    p.mul_(1 - group["lr"] * group["weight_decay"])
                    st["m"].lerp_(p.grad, 1 - b1)
                    st["v"].mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                    denom = (st["v"].sqrt() / (1 - b2 ** st["t"]) ** 0.5).add_(group["eps"])
                    p.addcdiv_(st["m"], denom, value=-group["lr"] / (1 - b1 ** st["t"]))


def seeded(shape, seed, dtype=torch.float32, device="cpu", scale=1.0):
    """The same pseudo-random tensor on every rank."""
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=gen, dtype=torch.float64) * scale).to(
        dtype=dtype, device=device)


def gather_rows(t, group=None):
    """Every rank's rows of t (any counts), stacked in rank order, as float64 numpy."""
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_initialized()):
        return t.detach().double().cpu().numpy()
    parts = [None] * dist.get_world_size(group)
    dist.all_gather_object(parts, t.detach().double().cpu().numpy(), group=group)
    return np.concatenate(parts, axis=0)


def gather_cols(t, group=None):
    return gather_rows(t.t(), group).T
