"""Seeds, and where the noise of a release comes from.

Training randomness (initialisation, minibatch order, the reparameterisation or Laplace noise inside `fit`)
is derived from the method's `seed`, so a run trains reproducibly (D-GPP, whose aggregator trains on the
clients' released z, only with a release_seed). A release's noise must not be: `seed` is
in every run's params, so noise derived from it can be regenerated and subtracted, undoing the release.

A release's noise is permanent randomization, as in RAPPOR's permanent randomized response: it is derived from
a secret 32-byte key (`ReleaseKey`, drawn from OS entropy once per run and never recorded in MLflow) and the
row's content, so the same row released twice under one key gets the same z and averaging releases gains
nothing. Per row: row key = the first 8 bytes of HMAC-SHA256(key, the row's float32 bytes); each uniform is
splitmix64(row key + counter * golden gamma), the counter naming (draw, coordinate), so the noise of a row does
not depend on the batch it is released in, on row order or on batch size. Gaussian noise is Box-Muller of two
such uniforms, exponential noise -log(u). Only an explicit `release_seed` derives the key from a recorded
number, which makes releases reproducible and voids their privacy. Noise a method draws while training, and
the sanitized batches a D-GPP client uploads in training rounds, still come from torch generators."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Mapping, Union

import numpy as np
import torch

from veil.errors import VeilError

METHOD_STREAM = 0  # (release_seed, METHOD_STREAM, call): the n-th `encode` call of a method
NODE_STREAM = 1  # (release_seed, NODE_STREAM, node id): what a federated node sends out of itself
NODE_RELEASE_STREAM = 2  # (release_seed, NODE_RELEASE_STREAM, node id, n): a node's n-th release of its own rows


def derive_seed(*parts: int) -> int:
    """A 31-bit seed derived from integers (same parts, same seed, in every process)."""
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1, np.uint32)[0] >> 1)


# numpy's SeedSequence constants (numpy/random/bit_generator.pyx: O'Neill's seed_seq with a 4-word pool)
_POOL = 4
_INIT_A, _MULT_A = 0x43B0D7E5, 0x931E8875
_INIT_B, _MULT_B = 0x8B51F9DD, 0x58F38DED
_MIX_L, _MIX_R = 0xCA01F9DD, 0x4973F715
_WORD = np.uint32(0xFFFFFFFF)


def derive_seeds(*parts: int | np.ndarray) -> np.ndarray:
    """`derive_seed` of many part tuples at once: each part an int or an int array (broadcast together); an int64
    array of the same seeds. numpy's SeedSequence hashes one tuple in ~15 us of Python; a host deriving one
    upload seed per node for thousands of nodes a round does it here as array arithmetic. Parts outside one
    32-bit word each fall back to `derive_seed`."""
    cols = np.broadcast_arrays(*[np.asarray(p, dtype=np.int64) for p in parts])
    shape = cols[0].shape if cols else ()
    flat = [c.reshape(-1) for c in cols]
    if any(len(c) and (c.min() < 0 or c.max() > 0xFFFFFFFF) for c in flat):
        rows = zip(*[c.tolist() for c in flat])
        return np.array([derive_seed(*r) for r in rows], dtype=np.int64).reshape(shape)
    n = flat[0].shape[0] if flat else 1
    entropy = [c.astype(np.uint32) for c in flat]
    const = [np.uint32(_INIT_A)]

    def hashmix(value: np.ndarray) -> np.ndarray:
        value = value ^ const[0]
        const[0] = np.uint32((int(const[0]) * _MULT_A) & 0xFFFFFFFF)
        value = value * const[0]
        return value ^ (value >> np.uint32(16))

    def mix(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        r = np.uint32(_MIX_L) * x - np.uint32(_MIX_R) * y
        return r ^ (r >> np.uint32(16))

    with np.errstate(over="ignore"):
        zero = np.zeros(n, dtype=np.uint32)
        pool = [hashmix(entropy[i] if i < len(entropy) else zero) for i in range(_POOL)]
        for src in range(_POOL):
            for dst in range(_POOL):
                if src != dst:
                    pool[dst] = mix(pool[dst], hashmix(pool[src]))
        for src in range(_POOL, len(entropy)):
            for dst in range(_POOL):
                pool[dst] = mix(pool[dst], hashmix(entropy[src]))
        word = (pool[0] ^ np.uint32(_INIT_B)) * np.uint32((_INIT_B * _MULT_B) & 0xFFFFFFFF)
        word = word ^ (word >> np.uint32(16))
    return (word >> np.uint32(1)).astype(np.int64).reshape(shape)


def release_generator(release_seed: int | None, *stream: int, device: torch.device | str = "cpu") -> torch.Generator:
    """The generator of one release's noise: seeded from 63 bits of OS entropy, or, only when `release_seed`
    is set, from (release_seed, *stream) so that distinct streams still draw independent noise."""
    seed = secrets.randbits(63) if release_seed is None else derive_seed(release_seed, *stream)
    return torch.Generator(device=device).manual_seed(seed)


KEY_BYTES = 32
_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_DRAW_STRIDE = np.uint64(1 << 40)  # counters of one draw: 2^40 per row, far beyond any release's width


class MissingReleaseKey(VeilError):
    """A release needed noise and its key is missing (`MissingKey`); raised at the first draw."""


def row_keys(key: bytes, x: np.ndarray | torch.Tensor) -> np.ndarray:
    """One uint64 per row of `x`: the first 8 bytes of HMAC-SHA256(key, the row's float32 bytes) (-0.0 as 0.0)."""
    a = x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
    a = np.ascontiguousarray(a.reshape(len(a), -1), dtype=np.float32) + np.float32(0.0)  # -0.0 + 0.0 = +0.0
    out = np.empty(len(a), np.uint64)
    for i, row in enumerate(a):
        out[i] = int.from_bytes(hmac.digest(key, row.tobytes(), "sha256")[:8], "little")
    return out


def _splitmix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, elementwise on uint64 (wrapping)."""
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


class RowNoise:
    """The noise of one batch of rows under one key: uniforms per (row, draw, coordinate), counter-based, so a
    row gets the same noise in any batch. Each draw (`normal`, `exponential`) advances the draw counter, so two
    draws of one release are independent. Passed to `Method.release` where a torch.Generator was."""

    def __init__(self, keys: np.ndarray) -> None:
        self.keys = np.asarray(keys, np.uint64)
        self.draws = 0

    def uniform(self, per_row: int) -> np.ndarray:
        """(rows, per_row) uniforms in (0, 1), float64, from the next draw's counters."""
        base = np.uint64(self.draws) * _DRAW_STRIDE
        self.draws += 1
        counters = base + np.arange(1, per_row + 1, dtype=np.uint64)
        with np.errstate(over="ignore"):
            z = _splitmix(self.keys[:, None] + counters[None, :] * _GAMMA)
        return ((z >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53

    def _shaped(self, like: torch.Tensor, values: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(values.reshape(like.shape)).to(device=like.device, dtype=like.dtype)

    def _width(self, like: torch.Tensor) -> int:
        if like.ndim == 0 or like.shape[0] != len(self.keys):
            raise ValueError(f"noise shaped {tuple(like.shape)} for {len(self.keys)} keyed rows (first dim: rows)")
        return int(np.prod(like.shape[1:], dtype=np.int64))

    def normal(self, like: torch.Tensor) -> torch.Tensor:
        """Standard normal noise shaped like `like` (Box-Muller of two uniforms per value)."""
        w = self._width(like)
        u = self.uniform(2 * w)
        g = np.sqrt(-2.0 * np.log(u[:, :w])) * np.cos(2.0 * np.pi * u[:, w:])
        return self._shaped(like, g)

    def exponential(self, like: torch.Tensor) -> torch.Tensor:
        """Exp(1) noise shaped like `like` (-log u)."""
        return self._shaped(like, -np.log(self.uniform(self._width(like))))


def state_digest(state: Mapping[str, torch.Tensor]) -> bytes:
    """SHA-256 of a module's state (names, dtypes, shapes and values, in name order): names exactly these weights."""
    h = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().cpu().contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        h.update(t.numpy().tobytes())
    return h.digest()


class ReleaseKey:
    """A release's secret key: `rows(x)` is the noise source of a batch `x`. Its bytes are never printed
    (`id` is a one-way fingerprint, safe to record)."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) != KEY_BYTES:
            raise ValueError(f"a release key has {KEY_BYTES} bytes, got {len(secret)}")
        self.secret = bytes(secret)

    @classmethod
    def new(cls) -> "ReleaseKey":
        """A fresh key from OS entropy."""
        return cls(secrets.token_bytes(KEY_BYTES))

    @classmethod
    def from_seed(cls, release_seed: int, *stream: int) -> "ReleaseKey":
        """The key a set `release_seed` stands for (reproducible from the run's params: voids the guarantee)."""
        parts = ",".join(str(int(p)) for p in (release_seed, *stream))
        return cls(hashlib.sha256(f"veil.release_seed:{parts}".encode()).digest())

    @property
    def id(self) -> str:
        """A fingerprint of the key (16 hex digits of a SHA-256 of it): names the key, cannot rebuild it."""
        return hashlib.sha256(b"veil.release_key.id:" + self.secret).hexdigest()[:16]

    def rows(self, x: np.ndarray | torch.Tensor) -> RowNoise:
        return RowNoise(row_keys(self.secret, x))

    def derive(self, label: bytes) -> "ReleaseKey":
        """The subkey of this key for `label` (HMAC-SHA256): independent of the key and of every other label's
        subkey to whoever lacks the key, the same for the same label."""
        return ReleaseKey(hmac.digest(self.secret, b"veil.release_key.derive:" + label, "sha256"))

    def __repr__(self) -> str:
        return f"ReleaseKey(id={self.id})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ReleaseKey) and hmac.compare_digest(self.secret, other.secret)

    def __hash__(self) -> int:
        return hash(self.id)


class MissingKey:
    """Stands for a key that could not be found: fine for a release that draws no noise, an error
    (`MissingReleaseKey`, with `message`) at its first draw. Never replaced by a new key."""

    def __init__(self, message: str) -> None:
        self.message = message

    def rows(self, x: np.ndarray | torch.Tensor) -> "_NoNoise":
        return _NoNoise(self.message)


class _NoNoise:
    def __init__(self, message: str) -> None:
        self.message = message

    def normal(self, like: torch.Tensor) -> torch.Tensor:
        raise MissingReleaseKey(self.message)

    exponential = normal


Noise = Union[torch.Generator, RowNoise, _NoNoise]
"""Where a release draws its noise: a batch's keyed rows (`ReleaseKey.rows`), or a torch generator (training)."""


def for_rows(source: "torch.Generator | ReleaseKey | MissingKey", x: np.ndarray | torch.Tensor) -> Noise:
    """The noise of batch `x` from `source`: its keyed rows for a key, the generator itself otherwise."""
    return source.rows(x) if isinstance(source, (ReleaseKey, MissingKey)) else source


def gaussian_like(t: torch.Tensor, generator: Noise) -> torch.Tensor:
    """Standard normal noise shaped like `t` (same device and dtype), drawn from `generator` (a torch generator
    or a batch's keyed rows)."""
    if isinstance(generator, torch.Generator):
        return torch.randn(t.shape, generator=generator, device=t.device, dtype=t.dtype)
    return generator.normal(t)


def exponential_like(t: torch.Tensor, generator: Noise | None) -> torch.Tensor:
    """Exp(1) noise shaped like `t`, drawn from `generator` (None: torch's global generator)."""
    if generator is None or isinstance(generator, torch.Generator):
        return torch.empty_like(t).exponential_(1.0, generator=generator)
    return generator.exponential(t)
