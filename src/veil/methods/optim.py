"""The optimizers of a method's modules: torch's own Adam and SGD updates (`torch.optim.adam.adam`,
`torch.optim.sgd.sgd`) over a fixed list of tensors.

Why not `torch.optim.Adam` itself: its constructor, `step`, `zero_grad` and `state_dict` import `torch._dynamo` on
first use (about 2.5 s of CPU on these machines), a cost every fresh process that trains would pay (a `veil run`, a
sweep's trial actor, a Ray Train worker, a federation's node host) for a compiler Veil never calls. The update
functions are the same kernels `torch.optim.Adam(fused=...)` and `torch.optim.SGD` call, with the state they
keep, so the weights come out the same bit for bit (`tests/methods/test_make_optimizer.py`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.optim.adam import adam
from torch.optim.sgd import sgd


class Optimizer:
    """A fixed list of tensors stepped together at one learning rate; `step` updates those with a gradient."""

    kind = ""

    def __init__(self, params: Sequence[torch.Tensor], lr: float) -> None:
        self.params = list(params)
        if not self.params:
            raise ValueError("an optimizer needs at least one tensor to step")
        self.lr = float(lr)
        self.state: list[dict[str, torch.Tensor]] = [{} for _ in self.params]
        self.capturable = False
        """Whether `step` may run inside a CUDA graph capture (`veil.methods.cuda_graph.GraphedStep` sets it)."""

    def step(self) -> None:
        raise NotImplementedError

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                p.grad.detach_().zero_()

    def with_grad(self) -> list[int]:
        """Indices of the tensors that have a gradient now (torch's optimizers skip the others)."""
        return [i for i, p in enumerate(self.params) if p.grad is not None]

    def state_dict(self) -> dict[str, Any]:
        """The learning rate and each tensor's state, in the order of `params`."""
        return {"kind": self.kind, "lr": self.lr, "state": [dict(s) for s in self.state]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("kind") != self.kind or len(state.get("state", ())) != len(self.params):
            raise ValueError(
                f"optimizer state for {state.get('kind')!r} over {len(state.get('state', ()))} tensors does not fit "
                f"this {self.kind} optimizer over {len(self.params)}"
            )
        self.lr = float(state["lr"])
        self.state = [{k: self._place(k, v, p) for k, v in s.items()} for s, p in zip(state["state"], self.params)]

    def _place(self, key: str, value: torch.Tensor, param: torch.Tensor) -> torch.Tensor:
        """A loaded state tensor where `step` expects it (beside its parameter)."""
        return value.to(param.device)


class Adam(Optimizer):
    """torch's Adam (betas 0.9, 0.999, eps 1e-8, no weight decay); `fused` as `torch.optim.Adam` takes it (None:
    torch's default kernel for the device)."""

    kind = "adam"

    def __init__(self, params: Sequence[torch.Tensor], lr: float, fused: bool | None = None) -> None:
        super().__init__(params, lr)
        self.fused = fused

    def _step_device(self, param: torch.Tensor) -> torch.device:
        # as torch.optim.Adam: the fused and capturable kernels read the step count on the parameter's device,
        # the others as a CPU scalar (no device sync per step)
        return param.device if self.fused or self.capturable else torch.device("cpu")

    def _place(self, key: str, value: torch.Tensor, param: torch.Tensor) -> torch.Tensor:
        return value.to(self._step_device(param)) if key == "step" else value.to(param.device)

    def _state(self, i: int) -> dict[str, torch.Tensor]:
        s, p = self.state[i], self.params[i]
        if not s:
            dtype = torch.float32 if self.fused else torch.get_default_dtype()
            s["step"] = torch.zeros((), dtype=dtype, device=self._step_device(p))
            s["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            s["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        return s

    @torch.no_grad()
    def step(self) -> None:
        live = self.with_grad()
        if not live:
            return
        states = [self._state(i) for i in live]
        adam(
            [self.params[i] for i in live],
            [self.params[i].grad for i in live],  # type: ignore[misc]
            [s["exp_avg"] for s in states],
            [s["exp_avg_sq"] for s in states],
            [],
            [s["step"] for s in states],
            foreach=None,
            capturable=self.capturable,
            fused=self.fused,
            amsgrad=False,
            has_complex=False,
            beta1=0.9,
            beta2=0.999,
            lr=self.lr,
            weight_decay=0.0,
            eps=1e-8,
            maximize=False,
        )


class SGD(Optimizer):
    """torch's plain SGD (no momentum, no weight decay)."""

    kind = "sgd"

    @torch.no_grad()
    def step(self) -> None:
        live = self.with_grad()
        if not live:
            return
        sgd(
            [self.params[i] for i in live],
            [self.params[i].grad for i in live],  # type: ignore[misc]
            [None] * len(live),
            weight_decay=0.0,
            momentum=0.0,
            lr=self.lr,
            dampening=0.0,
            nesterov=False,
            maximize=False,
        )
