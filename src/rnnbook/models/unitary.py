"""An orthogonal (real unitary) RNN in the style of expRNN, for Chapter 10's long-term memory
benchmarks (Lezcano-Casado and Martinez-Rubio 2019).

* :func:`skew` and :func:`orthogonal` give the recurrent matrix ``W = expm(A - A^T)``
  (ltm-orthogonal): the exponential of a skew-symmetric matrix is orthogonal, whatever the
  unconstrained parameter ``A``, so plain gradient steps on ``A`` never leave the group.
* :func:`modrelu` is the nonlinearity ``modReLU(z, b) = sign(z) ReLU(|z| + b)``
  (ltm-modrelu).
* :func:`henaff_init` and :func:`cayley_init` are expRNN's two initialisations of ``A``.
* :class:`OrthogonalRNN` runs ``h_t = modReLU(W h_{t-1} + V x_t, b)`` (ltm-urnn-step) with
  the read-out ``y_t = U h_t + c``. With ``frozen=True`` the generator ``A`` is a buffer,
  not a parameter: a fixed random rotation (the "reservoir" variant, standing in for an
  EUNN whose angles are not trained).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from rnnbook._validate import check_choice, check_positive_int, check_size, check_tensor

INITS = ("henaff", "cayley")


def skew(A: torch.Tensor) -> torch.Tensor:
    """The skew-symmetric part ``A - A^T`` of a square matrix (or a batch of them)."""
    check_tensor(A, "A")
    if A.dim() < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"A must be a square matrix (..., n, n), got shape {tuple(A.shape)}")
    return A - A.transpose(-2, -1)


def orthogonal(A: torch.Tensor) -> torch.Tensor:
    """``W = expm(A - A^T)``, (ltm-orthogonal): orthogonal for every real square ``A``.

    ``(A - A^T)^T = -(A - A^T)``, so ``W^T W = expm(-(A - A^T)) expm(A - A^T) = I``.
    """
    return torch.matrix_exp(skew(A))


def modrelu(z: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``modReLU(z, b) = sign(z) ReLU(|z| + b)``, (ltm-modrelu), the real version.

    The modulus ``|z|`` is shifted by the bias ``b`` (broadcast against ``z``, usually one per
    unit) and clipped at zero; the sign is kept. So the output is ``0`` where
    ``|z| + b <= 0`` and ``z + sign(z) b`` elsewhere; ``sign(0) = 0`` maps ``z = 0`` to ``0``.
    """
    check_tensor(z, "z")
    check_tensor(b, "b")
    return torch.sign(z) * torch.relu(z.abs() + b)


def _block_generator(angles: torch.Tensor, n: int) -> torch.Tensor:
    """The ``A`` with ``A - A^T`` block-diagonal, blocks ``[[0, s], [-s, 0]]`` for ``s`` in
    ``angles`` (and a trailing 0 for odd ``n``). ``A`` itself holds ``s/2``: see
    :func:`henaff_init`."""
    A = torch.zeros(n, n, dtype=angles.dtype)
    idx = torch.arange(angles.numel()) * 2
    A[idx, idx + 1] = angles / 2
    A[idx + 1, idx] = -angles / 2
    return A


def henaff_init(
    d_h: int, generator: torch.Generator | None = None, dtype=torch.float32
) -> torch.Tensor:
    """expRNN's "henaff" initialisation of the generator ``A`` (d_h, d_h).

    The intended skew-symmetric matrix ``S = A - A^T`` is block-diagonal with 2x2 blocks
    ``[[0, s], [-s, 0]]``, one ``s ~ U[-pi, pi]`` per block, so ``W = expm(S)`` is a direct
    sum of plane rotations by the angles ``s`` (an odd ``d_h`` leaves the last unit with
    eigenvalue 1). The factor: since (ltm-orthogonal) takes ``A - A^T``, a skew ``A`` would
    count twice, so the returned ``A`` holds the blocks ``[[0, s/2], [-s/2, 0]]``; it is
    skew-symmetric, ``A - A^T = 2A = S``, and it stays skew under gradient steps (the gradient
    through ``A - A^T`` is skew). (expRNN itself stores ``S`` and reads its upper triangle;
    the rotation angles are the same.)
    """
    check_positive_int(d_h, "d_h")
    s = torch.empty(d_h // 2, dtype=torch.float64).uniform_(-math.pi, math.pi, generator=generator)
    return _block_generator(s, d_h).to(dtype)


def cayley_init(
    d_h: int, generator: torch.Generator | None = None, dtype=torch.float32
) -> torch.Tensor:
    """expRNN's "cayley" initialisation: as :func:`henaff_init` (same factor ``1/2``), with
    ``s = -sqrt((1 - cos u) / (1 + cos u)) = -tan(u/2)``, ``u ~ U[0, pi/2]``, so
    ``s`` lies in ``[-1, 0]``: small rotations, most eigenvalues of ``W`` near 1."""
    check_positive_int(d_h, "d_h")
    u = torch.empty(d_h // 2, dtype=torch.float64).uniform_(0, math.pi / 2, generator=generator)
    s = -torch.sqrt((1 - torch.cos(u)) / (1 + torch.cos(u)))
    return _block_generator(s, d_h).to(dtype)


class OrthogonalRNN(nn.Module):
    """expRNN-style orthogonal RNN, (ltm-orthogonal), (ltm-modrelu), (ltm-urnn-step).

    ``h_t = modReLU(W h_{t-1} + V x_t, b)`` with ``W = expm(A - A^T)``; ``y_t = U h_t + c``.

    Args:
        d_x, d_y: input and output sizes. d_h: hidden size (default 128).
        frozen: keep ``A`` (hence ``W``) fixed at its initial value. ``A`` is then a buffer,
            so it is saved with the model but not counted by ``count_parameters`` and never
            handed to an optimiser: ``d_h d_x + d_h + d_h d_y + d_y`` trainable numbers.
        init: ``"henaff"`` (default) or ``"cayley"``, see :func:`henaff_init`.
        seed: seeds a private generator for every initial value (``None``: torch's global
            generator).

    Initial values, as in expRNN: ``V`` (d_h, d_x) Kaiming-normal with ReLU gain,
    ``N(0, 2/d_x)``; the modReLU bias ``b`` from ``U(-0.01, 0.01)``; the read-out
    ``nn.Linear(d_h, d_y)`` torch's default, ``U(-1/sqrt(d_h), 1/sqrt(d_h))``.

    ``forward(x, h0=None)`` takes ``x`` (B, T, d_x) and ``h0`` (B, d_h) (zeros if ``None``)
    and returns ``(y, h_T)``: the read-outs (B, T, d_y) and the last hidden state (B, d_h).
    """

    def __init__(
        self,
        d_x: int,
        d_y: int,
        d_h: int = 128,
        frozen: bool = False,
        init: str = "henaff",
        seed: int | None = None,
    ):
        super().__init__()
        check_positive_int(d_x, "d_x")
        check_positive_int(d_y, "d_y")
        check_positive_int(d_h, "d_h")
        check_choice(init, "init", INITS)
        if not isinstance(frozen, bool):
            raise TypeError(f"frozen must be True or False, got {frozen!r}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise TypeError(f"seed must be an int or None, got {seed!r}")
        self.input_size, self.hidden_size, self.output_size = d_x, d_h, d_y
        self.frozen, self.init = frozen, init
        g = None if seed is None else torch.Generator().manual_seed(seed)

        A = (henaff_init if init == "henaff" else cayley_init)(d_h, generator=g)
        if frozen:
            self.register_buffer("A", A)
        else:
            self.A = nn.Parameter(A)
        self.V = nn.Parameter(torch.empty(d_h, d_x))
        self.b = nn.Parameter(torch.empty(d_h))
        self.readout = nn.Linear(d_h, d_y)
        with torch.no_grad():
            self.V.normal_(0.0, math.sqrt(2.0 / d_x), generator=g)  # kaiming_normal_, relu
            self.b.uniform_(-0.01, 0.01, generator=g)
            bound = 1 / math.sqrt(d_h)
            self.readout.weight.uniform_(-bound, bound, generator=g)
            self.readout.bias.uniform_(-bound, bound, generator=g)

    def recurrent_weight(self) -> torch.Tensor:
        """``W = expm(A - A^T)`` (d_h, d_h), (ltm-orthogonal)."""
        return orthogonal(self.A)

    def parameter_groups(self, lr: float) -> list[dict]:
        """Optimiser parameter groups: ``A`` at ``lr / 10`` (expRNN's advice: the orthogonal
        part learns ten times slower) and everything else at ``lr``; only the latter when
        ``frozen``. Use as ``torch.optim.Adam(model.parameter_groups(1e-3))``."""
        if isinstance(lr, bool) or not isinstance(lr, int | float) or not lr > 0:
            raise ValueError(f"lr must be a positive number, got {lr!r}")
        if not math.isfinite(lr):
            raise ValueError(f"lr must be finite, got {lr!r}")
        rest = [p for name, p in self.named_parameters() if name != "A"]
        groups = [{"params": rest, "lr": lr}]
        if not self.frozen:
            groups.append({"params": [self.A], "lr": lr / 10})
        return groups

    def forward(self, x: torch.Tensor, h0: torch.Tensor | None = None):
        check_tensor(x, "x", ndim=3)
        check_size(x, "x", 2, self.input_size, "the input size d_x")
        if not x.is_floating_point():
            raise TypeError(f"x must be a floating-point tensor, got {x.dtype}")
        B, T, _ = x.shape
        if T == 0:
            raise ValueError(f"x must have at least one time step, got shape {tuple(x.shape)}")
        if h0 is None:
            h = x.new_zeros(B, self.hidden_size)
        else:
            check_tensor(h0, "h0", ndim=2)
            if h0.shape != (B, self.hidden_size):
                raise ValueError(
                    f"h0 must have shape (B, d_h) = ({B}, {self.hidden_size}), "
                    f"got {tuple(h0.shape)}"
                )
            h = h0
        W_T = self.recurrent_weight().T  # once per forward, (ltm-orthogonal)
        x_proj = x @ self.V.T  # (B, T, d_h): V x_t for every step at once
        hs = []
        # unbind, not x_proj[:, t]: see rnnbook.models.recurrent.unroll
        for x_t in x_proj.unbind(dim=1):
            h = modrelu(h @ W_T + x_t, self.b)  # (ltm-urnn-step)
            hs.append(h)
        return self.readout(torch.stack(hs, dim=1)), h  # (B, T, d_y), (B, d_h)

    def extra_repr(self) -> str:
        return (
            f"d_x={self.input_size}, d_h={self.hidden_size}, d_y={self.output_size}, "
            f"init={self.init!r}, frozen={self.frozen}"
        )
