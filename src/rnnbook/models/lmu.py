"""The Legendre Memory Unit of Chapter 4: the delay network, the LMU cell, the parallel LMU.

Equation labels are Chapter 4's; the model follows Chilkuri's thesis (2021).

* :func:`dn_matrices` builds the delay network's continuous ``(A, B, C)`` (lmu-ABC), with
  ``C`` all ones (a typo in the thesis's printed ``C`` corrected).
* :func:`discretize` turns them into ``(A_bar, B_bar)`` for a step of ``dt`` (zero-order hold,
  or Euler for the exercise); :func:`impulse_response` gives ``H = [B_bar, A_bar B_bar, ...]``.
* :func:`legendre_decoder` reads the input ``r * theta`` steps ago out of the memory
  (lmu-legendre), (lmu-decode).
* :class:`DelayNetwork` runs the linear memory (lmu-parallel) in any of four ways that
  compute the same numbers (lmu-solution): the loop, the Toeplitz matrix form, the final
  state only and the FFT.
* :class:`LMUCell` is the original LMU (lmu-cell); :class:`ParallelLMU` the parallelisable
  variant (lmu-parallel), whose only recurrence is the delay network.

The matrices are computed in float64 with NumPy and only then cast to the model's dtype.
Multi-channel memories are flattened channel-major: ``m_flat[k*d + i] = M[i, k]`` for
channel ``k`` and Legendre coefficient ``i`` (the layout of keras-lmu).
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch
from scipy.linalg import expm
from torch import nn

from rnnbook._validate import check_choice, check_positive_int, check_size, check_tensor
from rnnbook.models.recurrent import check_state

MODES = ("recurrent", "matrix", "fft", "final")
ACTIVATIONS = {"identity": lambda z: z, "relu": torch.relu, "tanh": torch.tanh}


def _check_theta(theta, name: str = "theta") -> float:
    """A window (or time step) in time steps: a positive, finite number."""
    if isinstance(theta, bool) or not isinstance(theta, numbers.Real) or not theta > 0:
        raise ValueError(f"{name} must be a positive number of time steps, got {theta!r}")
    if not math.isfinite(theta):
        raise ValueError(f"{name} must be finite, got {theta!r}")
    return float(theta)


def _check_floating(x: torch.Tensor, name: str) -> None:
    # an integer input would cast A_bar, B_bar and H to integers (all zeros): reject it
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")


def dn_matrices(d: int, theta: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The delay network's ``A`` (d, d), ``B`` (d,) and ``C`` (d,) in float64, (lmu-ABC).

    ``A[i, j] = (2i+1)/theta * (-1 if i < j else (-1)**(i-j+1))``,
    ``B[i] = (2i+1) (-1)**i / theta`` and ``C[i] = 1`` (corrected; ``D = 0``).
    """
    check_positive_int(d, "d")
    theta = _check_theta(theta)
    i = np.arange(d)[:, None]
    j = np.arange(d)[None, :]
    sign = np.where(i < j, -1.0, (-1.0) ** (i - j + 1))
    A = (2 * i + 1) / theta * sign
    B = (2 * np.arange(d) + 1) * (-1.0) ** np.arange(d) / theta
    C = legendre_decoder(d, 1.0)
    return A, B, C


def legendre_decoder(d: int, r) -> np.ndarray:
    """Shifted Legendre polynomials ``P~_i(r)``, i < d, (lmu-legendre): the read-out of
    ``u(t - r theta)``.

    ``r`` is a number in [0, 1] (returns shape (d,)) or an array of them (returns
    ``r.shape + (d,)``). (lmu-legendre) writes ``P~_i(r) = (-1)^i sum_l binom(i, l) binom(i+l, l)
    (-r)^l``; its terms overflow float64 for large i, so this evaluates the same polynomials
    as ``P_i(2r - 1)`` with Bonnet's recursion ``(i+1) P_{i+1} = (2i+1) x P_i - i P_{i-1}``.
    ``P~_i(1) = 1`` and ``P~_i(0) = (-1)^i``.
    """
    check_positive_int(d, "d")
    r = np.asarray(r, dtype=np.float64)
    if not np.all(np.isfinite(r)) or np.any(r < 0) or np.any(r > 1):
        raise ValueError(f"r must lie in [0, 1] (a fraction of the window theta), got {r!r}")
    x = 2 * r - 1
    polys = np.empty(r.shape + (d,))
    polys[..., 0] = 1.0
    if d > 1:
        polys[..., 1] = x
    for i in range(1, d - 1):
        polys[..., i + 1] = ((2 * i + 1) * x * polys[..., i] - i * polys[..., i - 1]) / (i + 1)
    return polys


def _as_system(A, B, name_A: str, name_B: str) -> tuple[np.ndarray, np.ndarray]:
    """``A`` (d, d) and ``B`` (d,) as float64 arrays, or an error naming the wrong shape."""
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"{name_A} must be a square (d, d) matrix, got shape {A.shape}")
    if B.shape != (A.shape[0],):
        raise ValueError(f"{name_B} must have shape (d,) = ({A.shape[0]},), got {B.shape}")
    return A, B


def discretize(
    A: np.ndarray, B: np.ndarray, dt: float = 1.0, method: str = "zoh"
) -> tuple[np.ndarray, np.ndarray]:
    """``(A_bar, B_bar)`` of ``m_t = A_bar m_{t-1} + B_bar u_t`` for a time step ``dt``.

    ``"zoh"`` (zero-order hold, the book's choice): ``A_bar = e^{A dt}`` and
    ``B_bar = A^{-1}(e^{A dt} - I) B``, both read from one block exponential
    ``expm([[A, B], [0, 0]] dt)``. ``"euler"``: ``A_bar = I + A dt``, ``B_bar = B dt``, which
    is unstable unless theta is many times d (an exercise).
    """
    check_choice(method, "method", ("zoh", "euler"))
    A, B = _as_system(A, B, "A", "B")
    _check_theta(dt, "dt")
    d = A.shape[0]
    if method == "euler":
        return np.eye(d) + A * dt, B * dt
    block = np.zeros((d + 1, d + 1))
    block[:d, :d] = A
    block[:d, d] = B
    exp_block = expm(block * dt)
    return exp_block[:d, :d], exp_block[:d, d]


def impulse_response(A_bar: np.ndarray, B_bar: np.ndarray, n: int) -> np.ndarray:
    """``H = [A_bar^0 B_bar, A_bar^1 B_bar, ..., A_bar^(n-1) B_bar]``, shape (d, n), float64.

    Column ``k`` is the memory ``k`` steps after a unit impulse, so ``m_t = sum_k H[:, k]
    u_{t-k}`` (lmu-solution).
    """
    check_positive_int(n, "n")
    A_bar, column = _as_system(A_bar, B_bar, "A_bar", "B_bar")
    H = np.empty((column.shape[0], n))
    for k in range(n):
        H[:, k] = column
        column = A_bar @ column
    return H


class DelayNetwork(nn.Module):
    """The linear memory ``M_t = A_bar M_{t-1} + B_bar u_t^T`` (lmu-parallel), every channel.

    ``forward(u)`` takes ``u`` of shape (B, n, c) and, starting from ``m_0 = 0``, returns the
    memories of every step (B, n, c*d), or only the last one (B, c*d) in mode ``"final"``:

    * ``"recurrent"``: the loop (lmu-parallel), O(n d^2) per channel;
    * ``"matrix"``: ``m_{1:n} = H U`` with the Toeplitz matrix of the inputs (lmu-solution),
      O(n^2 d);
    * ``"fft"``: the same causal convolution through the FFT, zero-padded to 2n;
    * ``"final"``: ``m_n = H u_reversed``, O(n d), when only the last state is needed.

    ``step(u_t, m)`` advances one step of the loop, for streaming.

    The network has no trainable parameters: ``A_bar``, ``B_bar`` and ``H`` are computed once
    in float64 and cast to the dtype of the input they meet (cached per dtype and device).
    They are deliberately not buffers: ``.double()`` would then upcast float32-rounded
    matrices, and the loop would differ from the float64 ``H`` by 1e-6 instead of 1e-15.
    """

    def __init__(self, d: int, theta: float, mode: str = "recurrent"):
        super().__init__()
        check_positive_int(d, "d")
        check_choice(mode, "mode", MODES)
        self.d, self.theta, self.mode = d, _check_theta(theta), mode
        A, B, _ = dn_matrices(d, self.theta)
        self.A_bar64, self.B_bar64 = discretize(A, B)  # float64 NumPy, the masters
        self._cache: dict[tuple, torch.Tensor] = {}

    def _cached(self, name: str, make, dtype, device) -> torch.Tensor:
        key = (name, dtype, torch.device(device) if device is not None else torch.device("cpu"))
        if key not in self._cache:
            self._cache[key] = torch.tensor(make(), dtype=dtype, device=key[2])
        return self._cache[key]

    def matrices(self, dtype=torch.float32, device=None) -> tuple[torch.Tensor, torch.Tensor]:
        """``(A_bar, B_bar)`` as tensors of ``dtype`` on ``device``."""
        A_bar = self._cached("A_bar", lambda: self.A_bar64, dtype, device)
        B_bar = self._cached("B_bar", lambda: self.B_bar64, dtype, device)
        return A_bar, B_bar

    def impulse_response(self, n: int, dtype=torch.float32, device=None) -> torch.Tensor:
        """``H`` (d, n) as a tensor of ``dtype`` on ``device``, computed in float64."""
        check_positive_int(n, "n")
        make = lambda: impulse_response(self.A_bar64, self.B_bar64, n)  # noqa: E731
        return self._cached(f"H{n}", make, dtype, device)

    def initial_state(self, B: int, channels: int, dtype=None, device=None) -> torch.Tensor:
        """``m_0 = 0`` of shape (B, channels*d)."""
        return torch.zeros(B, channels * self.d, dtype=dtype or torch.float32, device=device)

    def step(self, u_t: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        """One step of the loop: ``u_t`` (B, c) and ``m_{t-1}`` (B, c*d) give ``m_t`` (B, c*d)."""
        check_tensor(u_t, "u_t", ndim=2)
        check_tensor(m, "m", ndim=2)
        _check_floating(u_t, "u_t")
        B, c = u_t.shape
        if m.shape != (B, c * self.d):
            raise ValueError(
                f"m must have shape (B, c*d) = ({B}, {c * self.d}) for u_t of shape "
                f"{tuple(u_t.shape)}, got {tuple(m.shape)}"
            )
        M = m.view(B, c, self.d)  # channel-major: M[b, k] is channel k's memory
        A_bar, B_bar = self.matrices(u_t.dtype, u_t.device)
        M = M @ A_bar.T + u_t.unsqueeze(-1) * B_bar
        return M.reshape(B, c * self.d)

    def forward(self, u: torch.Tensor, mode: str | None = None) -> torch.Tensor:
        check_tensor(u, "u", ndim=3)
        _check_floating(u, "u")
        mode = self.mode if mode is None else mode
        check_choice(mode, "mode", MODES)
        B, n, c = u.shape
        if n == 0 or c == 0:
            raise ValueError(f"u must have at least one step and one channel, got {tuple(u.shape)}")
        if mode == "recurrent":
            m = self.initial_state(B, c, dtype=u.dtype, device=u.device)
            memories = []
            for u_t in u.unbind(dim=1):
                m = self.step(u_t, m)
                memories.append(m)
            return torch.stack(memories, dim=1)
        H = self.impulse_response(n, u.dtype, u.device)
        if mode == "final":
            # m_n = sum_k H[:, k] u_{n-k}: H against the time-reversed input (lmu-solution)
            M = torch.einsum("dk,bkc->bcd", H, u.flip(1))
            return M.reshape(B, c * self.d)
        if mode == "matrix":
            # U[b, c, i, j] = u_{j-i} for j >= i (0-based), else 0; m_{1:n} = H U (lmu-solution)
            lag = torch.arange(n).view(1, n) - torch.arange(n).view(n, 1)
            U = u.transpose(1, 2)[:, :, lag.clamp(min=0)] * (lag >= 0).to(u.dtype)
            M = torch.einsum("dk,bckt->btcd", H, U)
        else:
            # causal convolution of u with H by FFT, padded to 2n against wrap-around
            u_f = torch.fft.rfft(u.transpose(1, 2), n=2 * n)  # (B, c, n+1)
            H_f = torch.fft.rfft(H, n=2 * n)  # (d, n+1)
            M = torch.fft.irfft(u_f.unsqueeze(2) * H_f, n=2 * n)[..., :n]  # (B, c, d, n)
            M = M.permute(0, 3, 1, 2)
        return M.reshape(B, n, c * self.d)

    def extra_repr(self) -> str:
        return f"d={self.d}, theta={self.theta:g}, mode={self.mode!r}"


def _glorot_normal_(weight: torch.Tensor) -> None:
    fan_out, fan_in = weight.shape
    nn.init.normal_(weight, std=math.sqrt(2.0 / (fan_in + fan_out)))


class LMUCell(nn.Module):
    """The original LMU, (lmu-cell), one step at a time.

    ``u_t = e_x . x_t + e_h . h_{t-1} + e_m . m_{t-1}`` (a scalar per example),
    ``m_t = A_bar m_{t-1} + B_bar u_t`` and ``h_t = tanh(W_x x_t + W_h h_{t-1} + W_m m_t)``.

    Args:
        d_x: input size. d_h: hidden size. d: the memory's order. theta: its window, in steps.
        init: ``"psmnist"``, the initialisation of Voelker et al. for psMNIST (e_x = 1,
            e_h = e_m = 0, W_x = W_h = 0, W_m Glorot-normal), or ``"uniform"``: every weight
            from U(-1/sqrt(d_h), 1/sqrt(d_h)) as in ``nn.RNN``.
    State: ``(h, m)`` of shapes (B, d_h) and (B, d). Like the other cells it offers
    ``project_inputs``/``step`` so that :class:`~rnnbook.models.recurrent.Recurrent` runs it.
    """

    def __init__(self, d_x: int, d_h: int, d: int, theta: float, init: str = "psmnist"):
        super().__init__()
        for value, name in ((d_x, "d_x"), (d_h, "d_h"), (d, "d")):
            check_positive_int(value, name)
        check_choice(init, "init", ("psmnist", "uniform"))
        self.input_size, self.hidden_size, self.d, self.theta = d_x, d_h, d, _check_theta(theta)
        self.e_x = nn.Parameter(torch.empty(d_x))
        self.e_h = nn.Parameter(torch.empty(d_h))
        self.e_m = nn.Parameter(torch.empty(d))
        self.W_x = nn.Parameter(torch.empty(d_h, d_x))
        self.W_h = nn.Parameter(torch.empty(d_h, d_h))
        self.W_m = nn.Parameter(torch.empty(d_h, d))
        self.memory = DelayNetwork(d, self.theta)  # frozen A_bar, B_bar (lmu-cell)
        self.init = init
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.init == "psmnist":
            nn.init.ones_(self.e_x)
            for weight in (self.e_h, self.e_m, self.W_x, self.W_h):
                nn.init.zeros_(weight)
            _glorot_normal_(self.W_m)
        else:
            bound = 1 / math.sqrt(self.hidden_size)
            for weight in (self.e_x, self.e_h, self.e_m, self.W_x, self.W_h, self.W_m):
                nn.init.uniform_(weight, -bound, bound)

    def initial_state(self, B: int, dtype=None, device=None) -> tuple[torch.Tensor, torch.Tensor]:
        dtype = dtype or self.W_h.dtype
        device = device or self.W_h.device
        return (
            torch.zeros(B, self.hidden_size, dtype=dtype, device=device),
            torch.zeros(B, self.d, dtype=dtype, device=device),
        )

    def project_inputs(self, x: torch.Tensor) -> torch.Tensor:
        """The input terms of every step at once: ``[e_x . x_t, W_x x_t]``, (..., 1 + d_h)."""
        return torch.cat([(x @ self.e_x).unsqueeze(-1), x @ self.W_x.T], dim=-1)

    def step(self, x_proj: torch.Tensor, state) -> tuple[torch.Tensor, torch.Tensor]:
        """(lmu-cell) from the projected input ``x_proj`` (B, 1 + d_h) and ``(h, m)``."""
        h_prev, m_prev = state
        u = x_proj[:, :1] + (h_prev @ self.e_h).unsqueeze(-1) + (m_prev @ self.e_m).unsqueeze(-1)
        m = self.memory.step(u, m_prev)  # (lmu-cell): m = A_bar m + B_bar u
        h = torch.tanh(x_proj[:, 1:] + h_prev @ self.W_h.T + m @ self.W_m.T)  # (lmu-cell)
        return h, m

    def forward(self, x_t: torch.Tensor, state=None) -> tuple[torch.Tensor, torch.Tensor]:
        """One step of raw input ``x_t`` (B, d_x); the state defaults to zeros."""
        check_tensor(x_t, "x_t", ndim=2)
        check_size(x_t, "x_t", 1, self.input_size, "the input size d_x")
        if state is None:
            state = self.initial_state(x_t.shape[0], dtype=x_t.dtype, device=x_t.device)
        check_state(self, state, x_t.shape[0])
        return self.step(self.project_inputs(x_t), state)

    def extra_repr(self) -> str:
        return (
            f"d_x={self.input_size}, d_h={self.hidden_size}, d={self.d}, "
            f"theta={self.theta:g}, init={self.init!r}"
        )


class ParallelLMU(nn.Module):
    """The parallelisable LMU (lmu-parallel): dense encoder, delay network, dense output.

    ``u_t = f1(U_x x_t + b_u)`` (d_u channels), ``m_t`` the delay network of every channel
    (lmu-parallel)/(lmu-solution), and ``o_t = f2(W_m m_t + W_x x_t + b_o)``. Only the delay
    network is
    recurrent, and it is linear, so training evaluates it without a loop.

    Args:
        d_x: input size. d_u: channels into the memory. d, theta: the memory's order and
            window. d_o: output size.
        f1, f2: ``"identity"``, ``"relu"`` or ``"tanh"``. The book's defaults (identity for a
            single channel: with ReLU a lone encoder unit can die at 0; ReLU for the output).
        return_sequences: return ``o_t`` for every step (B, n, d_o), else only the last
            (B, d_o).
        mode: how the delay network is evaluated (:class:`DelayNetwork`); ``"auto"`` picks
            ``"final"`` without sequences and ``"fft"`` with them.

    ``step(x_t, m)`` runs the same weights as an RNN, one step at a time.
    """

    def __init__(
        self,
        d_x: int,
        d_u: int,
        d: int,
        theta: float,
        d_o: int,
        f1: str = "identity",
        f2: str = "relu",
        return_sequences: bool = False,
        mode: str = "auto",
    ):
        super().__init__()
        for value, name in ((d_x, "d_x"), (d_u, "d_u"), (d_o, "d_o")):
            check_positive_int(value, name)
        check_choice(f1, "f1", tuple(ACTIVATIONS))
        check_choice(f2, "f2", tuple(ACTIVATIONS))
        check_choice(mode, "mode", ("auto", *MODES))
        if not isinstance(return_sequences, bool):
            raise TypeError(f"return_sequences must be True or False, got {return_sequences!r}")
        if mode == "final" and return_sequences:
            raise ValueError(
                'mode "final" computes only the last state: it cannot return sequences'
            )
        if mode == "auto":
            mode = "fft" if return_sequences else "final"
        self.input_size, self.d_u, self.d_o, self.f1, self.f2 = d_x, d_u, d_o, f1, f2
        self.return_sequences = return_sequences
        self.encoder = nn.Linear(d_x, d_u)  # U_x, b_u (lmu-parallel)
        self.memory = DelayNetwork(d, theta, mode)  # (lmu-parallel)
        self.memory_to_output = nn.Linear(d_u * d, d_o)  # W_m, b_o (lmu-parallel)
        self.input_to_output = nn.Linear(d_x, d_o, bias=False)  # W_x (lmu-parallel)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """(lmu-parallel) ``u = f1(U_x x + b_u)``, for one step or a whole sequence."""
        return ACTIVATIONS[self.f1](self.encoder(x))

    def output(self, m: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """(lmu-parallel) ``o = f2(W_m m + W_x x + b_o)``."""
        return ACTIVATIONS[self.f2](self.memory_to_output(m) + self.input_to_output(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_tensor(x, "x", ndim=3)
        check_size(x, "x", 2, self.input_size, "the input size d_x")
        m = self.memory(self.encode(x))
        if self.memory.mode == "final":
            return self.output(m, x[:, -1])
        if not self.return_sequences:
            return self.output(m[:, -1], x[:, -1])
        return self.output(m, x)

    def initial_state(self, B: int, dtype=None, device=None) -> torch.Tensor:
        """``m_0 = 0``, (B, d_u*d)."""
        return self.memory.initial_state(B, self.d_u, dtype=dtype, device=device)

    def step(self, x_t: torch.Tensor, m: torch.Tensor | None = None):
        """One step of streaming inference: ``x_t`` (B, d_x), ``m_{t-1}`` -> ``(o_t, m_t)``."""
        check_tensor(x_t, "x_t", ndim=2)
        check_size(x_t, "x_t", 1, self.input_size, "the input size d_x")
        if m is None:
            m = self.initial_state(x_t.shape[0], dtype=x_t.dtype, device=x_t.device)
        m = self.memory.step(self.encode(x_t), m)
        return self.output(m, x_t), m

    def extra_repr(self) -> str:
        return f"f1={self.f1!r}, f2={self.f2!r}, return_sequences={self.return_sequences}"


def frequency_response(A, B, C, omega) -> np.ndarray:
    """``H(i omega) = C^T (i omega I - A)^{-1} B`` of the continuous system (lmu-lti), D = 0.

    A sinusoid ``e^{i omega t}`` entering (lmu-lti) leaves it as ``H(i omega) e^{i omega t}``:
    ``|H|`` is the gain and ``angle(H)`` the phase shift at angular frequency ``omega`` (radians
    per unit of time, the unit of theta). The ideal delay of theta has ``H = e^{-i omega theta}``.

    Args:
        A: (d, d), B: (d,), C: (d,), for example from :func:`dn_matrices`.
        omega: a real number or array of them, any shape.

    Returns:
        complex128 array of ``omega``'s shape, computed in float64 by solving one linear
        system per frequency (never inverting ``i omega I - A``).
    """
    A, B = _as_system(A, B, "A", "B")
    C = np.asarray(C, dtype=np.float64)
    if C.shape != B.shape:
        raise ValueError(f"C must have shape (d,) = {B.shape}, got {C.shape}")
    omega = np.asarray(omega)
    if not np.isrealobj(omega) or not np.issubdtype(omega.dtype, np.number):
        raise TypeError(f"omega must be real frequencies, got dtype {omega.dtype}")
    omega = omega.astype(np.float64)
    if not np.all(np.isfinite(omega)):
        raise ValueError("omega must be finite")
    d = A.shape[0]
    system = 1j * omega.reshape(-1, 1, 1) * np.eye(d) - A  # (n, d, d)
    right = np.broadcast_to(B.astype(np.complex128), (system.shape[0], d))[..., None]
    state = np.linalg.solve(system, right)[..., 0]  # (n, d): (i omega I - A)^{-1} B
    return (state @ C).reshape(omega.shape)
