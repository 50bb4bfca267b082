"""Paper-style training loops, the baselines of benchmarks/suite.py: what a paper's reference code does with the
same networks, batch size and seed as Veil. A torch DataLoader over a TensorDataset (rows fetched one by one and
collated), the encoder run again for every player that needs z, plain `torch.optim.Adam` and a `.item()` per
loss per step. Each loop plays its method's game as Veil's `train_step` does; only the engineering differs."""

from __future__ import annotations

import copy
from typing import Any, Callable, Iterator

import numpy as np
import torch
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from veil.datasets.dataset import Split
from veil.methods.method import Method

Loop = Callable[[Method, Split, int], int]
"""(a freshly built method, training rows, epochs) -> training rows processed (main minibatches only)."""


def loader(split: Split, batch: int, seed: int) -> DataLoader:
    """Shuffled full minibatches of (x, utility label, sensitive label), row by row as a paper's code reads them."""
    u, s = next(iter(split.utility.values())), next(iter(split.sensitive.values()))
    data = TensorDataset(torch.as_tensor(split.x), torch.as_tensor(u), torch.as_tensor(s))
    return DataLoader(
        data, batch_size=batch, shuffle=True, drop_last=True, generator=torch.Generator().manual_seed(seed)
    )


def forever(dl: DataLoader) -> Iterator[tuple[torch.Tensor, ...]]:
    """Random minibatches without end (GPP's k classifier steps draw fresh batches)."""
    while True:
        yield from dl


def adam_step(loss: torch.Tensor, opt: torch.optim.Optimizer) -> float:
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()


def uniform_ce(logits: torch.Tensor) -> torch.Tensor:
    return -F.log_softmax(logits, dim=1).mean(dim=1).mean()


def eigan(method: Method, split: Split, epochs: int, device: str = "cpu") -> int:
    """EIGAN Alg. A1: encoder step on eq. 4, then the ally and the adversary each on the encoder's z, re-encoded.
    `device`: where the nets live; each minibatch is copied there as it is drawn (``x.to(device)``, as papers do)."""
    c: Any = method.config
    m: Any = method
    enc, ally, adv = (copy.deepcopy(net).to(device) for net in (m.encoder, m.allies.heads[0], m.adversaries.heads[0]))
    opt_e = torch.optim.Adam(enc.parameters(), lr=c.lr_encoder)
    opt_a = torch.optim.Adam(ally.parameters(), lr=c.lr_ally)
    opt_v = torch.optim.Adam(adv.parameters(), lr=c.lr_adversary)
    alpha = c.alpha
    rows = 0
    for _ in range(epochs):
        for batch in loader(split, c.batch_size, c.seed):
            x, u, s = (t.to(device) for t in batch)
            z = enc(x)
            privacy = uniform_ce(adv(z)) if c.privacy_loss == "uniform" else -F.cross_entropy(adv(z), s)
            adam_step(alpha * F.cross_entropy(ally(z), u) + (1 - alpha) * privacy, opt_e)
            adam_step(F.cross_entropy(ally(enc(x).detach()), u), opt_a)
            adam_step(F.cross_entropy(adv(enc(x).detach()), s), opt_v)
            rows += len(x)
    return rows


def gpp(method: Method, split: Split, epochs: int) -> int:
    """GPP Alg. 1: k steps of the utility classifier and the adversary on fresh batches, then one encoder step."""
    c: Any = method.config
    m: Any = method
    enc, util, adv = (copy.deepcopy(net) for net in (m.encoder, m.utility.heads[0], m.adversaries.heads[0]))
    opt_e, opt_u, opt_s = (torch.optim.Adam(net.parameters(), lr=c.lr) for net in (enc, util, adv))
    fresh = forever(loader(split, c.batch_size, c.seed + 1))

    def sample(mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
        return mu + torch.exp(0.5 * logvar) * torch.randn_like(mu)

    rows = 0
    for _ in range(epochs):
        for x, u, s in loader(split, c.batch_size, c.seed):
            for _ in range(c.k):
                xb, ub, sb = next(fresh)
                adam_step(F.cross_entropy(util(sample(*enc(xb)).detach()), ub), opt_u)
                adam_step(F.cross_entropy(adv(sample(*enc(xb)).detach()), sb), opt_s)
            mu, logvar = enc(x)
            z = sample(mu, logvar)
            kl = 0.5 * (mu.pow(2) + logvar.exp() - logvar - 1).sum(dim=-1).mean()
            privacy = uniform_ce(adv(z)) if c.privacy_loss == "uniform" else -F.cross_entropy(adv(z), s)
            adam_step(c.beta * F.cross_entropy(util(z), u) + privacy + c.lambda_kl * kl, opt_e)
            rows += len(x)
    return rows


def ldp_frl(method: Method, split: Split, epochs: int) -> int:
    """LDP-FRL Alg. 1: one optimizer over extractor and decoders on CE(y) + beta * MSE(x, side decoder(z, s))."""
    c: Any = method.config
    m: Any = method
    enc, mech, util = copy.deepcopy(m.encoder), m.mechanism, copy.deepcopy(m.utility.heads[0])
    side = copy.deepcopy(m.side.decoders[0])
    opt = torch.optim.Adam([*enc.parameters(), *util.parameters(), *side.parameters()], lr=c.lr)
    rows = 0
    for _ in range(epochs):
        for x, u, s in loader(split, c.batch_size, c.seed):
            z = mech(enc(x))
            x_hat = side(torch.cat([z, s.float().unsqueeze(1)], dim=1))
            adam_step(F.cross_entropy(util(z), u) + c.beta * F.mse_loss(x_hat, x), opt)
            rows += len(x)
    return rows


def adjustable_ae(method: Method, split: Split, epochs: int) -> int:
    """Adjustable AE Alg. 1: the autoencoder on the reconstruction, then encoder and classifier on the NLL."""
    c: Any = method.config
    nets: dict[str, Any] = {r: copy.deepcopy(net) for r, net in method.modules().items()}
    nets["scaler"].fit(np.asarray(split.x, dtype=np.float64))
    enc, cls, rest, dec, scaler = (nets[r] for r in ("encoder", "classifier", "rest", "decoder", "scaler"))
    opt_ae = torch.optim.Adam(
        [p for r in ("encoder", "classifier", "rest", "decoder") for p in nets[r].parameters()], lr=c.lr
    )
    opt_c = torch.optim.Adam([*enc.parameters(), *cls.parameters()], lr=c.lr)
    rows = 0
    for _ in range(epochs):
        for x, u, _s in loader(split, c.batch_size, c.seed):
            xs = scaler(x)
            v = enc(xs)
            adam_step(F.mse_loss(dec(torch.cat([*cls(v), rest(v)], dim=1)), xs), opt_ae)
            adam_step(F.nll_loss(cls(enc(xs))[0], u), opt_c)
            rows += len(x)
    return rows


LOOPS: dict[str, Loop] = {"eigan": eigan, "gpp": gpp, "ldp-frl": ldp_frl, "adjustable-ae": adjustable_ae}
