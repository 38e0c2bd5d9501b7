"""Zoneout (Chapter 7): units that keep their previous value at random.

Zoneout is the random member of the skip family (skip-bernoulli). At every step each unit of
each sequence keeps its previous value with probability z (the zoneout probability) and
updates with probability p = 1 − z (the update probability), independently:

    d_t^(j) ~ Bernoulli(z),  1 = keep                                             (zo-mask)
    h_t = d_t ⊙ h_{t−1} + (1 − d_t) ⊙ F(x_t, h_{t−1})                             (zo-train)

and at evaluation, as for dropout, the mask is replaced by its expectation:

    h_t = z h_{t−1} + (1 − z) F(x_t, h_{t−1})                                     (zo-expect)

Two families of LSTM cells:

* :class:`ZoneoutLSTMCell`, Krueger et al.'s zoneout: independent masks for the cell and
  the hidden state, and the hidden candidate built from the *un-zoned* cell,

      c̃_t = f_t ⊙ c_{t−1} + i_t ⊙ g_t,   c_t = d^c_t ⊙ c_{t−1} + (1 − d^c_t) ⊙ c̃_t   (zo-lstm-c)
      h_t = d^h_t ⊙ h_{t−1} + (1 − d^h_t) ⊙ (o_t ⊙ tanh(c̃_t))                    (zo-lstm-h)

* :class:`GateZoneoutLSTMCell`, Alpay's gate-level family: the SBA variants of Chapter 6
  with the surprisal test replaced by a coin, b_t ~ Bernoulli(p) per unit (1 = update):
  Z_ch (S_ch with one shared mask), Z_f (= S_ff = S_fh = S_fc: f := 1 where kept), Z_i
  (= S_ic: i := 0 where kept), Z_c (= S_c) and Z_h (= S_h), with the decay of Chapter 6.

Both count their unit updates for the update rate (skip-rate) and can trace their decisions
(1 = update, as SBA's rasters). Masks are drawn from torch's global generator, fresh for every
sequence, unit and step; nothing is shared over time.
"""

from __future__ import annotations

import torch

from rnnbook._validate import check_choice
from rnnbook.models.lstm import LSTMCell
from rnnbook.skip import DECAYS, UpdateTally, kept_factor

EVAL_MODES = ("expectation", "plain", "stochastic")
GATE_VARIANTS = ("ch", "f", "i", "c", "h")


def _check_probability(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")
    return float(value)


def zoneout_mask(like: torch.Tensor, z: float) -> torch.Tensor:
    """(zo-mask): ``d ~ Bernoulli(z)`` of the shape of ``like`` (B, H), 1 = keep."""
    return (torch.rand(like.shape, dtype=like.dtype, device=like.device) < z).to(like.dtype)


class ZoneoutLSTMCell(LSTMCell, UpdateTally):
    """Krueger et al.'s zoneout LSTM, (zo-lstm-c) and (zo-lstm-h).

    Args:
        d_x, d_h: input and hidden size.
        z_c, z_h: the zoneout (keep) probabilities of the cell and the hidden state; the
            authors' PTB setting is 0.5 and 0.05.
        shared_mask: one mask (with probability ``z_c``) for both states instead of two
            independent ones.
        forget_bias: added to the forget gate's bias at initialisation (1, as the authors').
        eval_mode: what the cell does in eval mode: ``"expectation"`` (zo-expect), the
            authors' rule; ``"plain"``, a plain LSTM; ``"stochastic"``, masks as in training.

    The update rate counts both states: u = 1 − (z_c + z_h) / 2 in expectation.
    """

    def __init__(self, d_x, d_h, z_c=0.5, z_h=0.05, shared_mask=False, forget_bias=1.0,
                 eval_mode="expectation"):  # fmt: skip
        LSTMCell.__init__(self, d_x, d_h, forget_bias=forget_bias)
        self.z_c, self.z_h = _check_probability(z_c, "z_c"), _check_probability(z_h, "z_h")
        check_choice(eval_mode, "eval_mode", EVAL_MODES)
        self.shared_mask, self.eval_mode = bool(shared_mask), eval_mode
        self.trace = None
        self.reset_tally()

    def masks(self, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The keep masks (d^c, d^h) of one step: sampled in training (and in eval mode with
        ``"stochastic"``), their expectations (z_c, z_h) or zeros (``"plain"``) otherwise."""
        mode = "stochastic" if self.training else self.eval_mode
        if mode == "plain":
            zero = torch.zeros_like(like)
            return zero, zero
        if mode == "expectation":
            return torch.full_like(like, self.z_c), torch.full_like(
                like, self.z_c if self.shared_mask else self.z_h
            )
        d_c = zoneout_mask(like, self.z_c)
        return d_c, d_c if self.shared_mask else zoneout_mask(like, self.z_h)

    def step(self, x_proj: torch.Tensor, state):
        h_prev, c_prev = state
        plain = LSTMCell.step_gates(self, x_proj, (h_prev, c_prev))  # c̃_t and o ⊙ tanh(c̃_t)
        d_c, d_h = self.masks(plain.c)
        c = d_c * c_prev + (1 - d_c) * plain.c  # (zo-lstm-c)
        h = d_h * h_prev + (1 - d_h) * plain.h  # (zo-lstm-h): from the un-zoned cell
        updates = torch.cat([1 - d_c, 1 - d_h], dim=1)
        self.count(updates)
        if self.trace is not None:
            self.trace.append(updates.detach())
        return h, c

    def extra_repr(self) -> str:
        return (f"z_c={self.z_c:g}, z_h={self.z_h:g}, shared_mask={self.shared_mask}, "
                f"eval_mode={self.eval_mode}, " + LSTMCell.extra_repr(self))  # fmt: skip


class GateZoneoutLSTMCell(LSTMCell, UpdateTally):
    """Alpay's gate-level zoneout: an SBA variant whose decision is a coin, one per unit.

    With ``b ~ Bernoulli(p)`` (B, H), 1 = update, ``ĉ = f ⊙ c_{t−1} + i ⊙ g``,
    ``ĥ = o ⊙ tanh(ĉ)`` and D the decay of a kept value:

    * ``"ch"`` (Z_ch): ``c = b ĉ + (1 − b) D(c_{t−1})`` and
      ``h = b ĥ + (1 − b) D(h_{t−1})``, one shared mask (where b = 1, c = ĉ, so
      ``o ⊙ tanh c = ĥ``; written with ĥ, the expectation mode is exact for h too);
    * ``"f"`` (Z_f): ``f' = b f + (1 − b) D(1)``, ``c = f' ⊙ c_{t−1} + i ⊙ g``;
    * ``"i"`` (Z_i): ``c = (b + (1 − b) D(1)) f ⊙ c_{t−1} + (b i) ⊙ g``;
    * ``"c"`` (Z_c): ``c = b ĉ + (1 − b) D(c_{t−1})``;
    * ``"h"`` (Z_h): ``c = ĉ``, ``h = b ĥ + (1 − b) D(h_{t−1})``;

    and ``h = o ⊙ tanh(c)`` where not given. ``eval_mode``: ``"stochastic"`` (ZO+M: the
    coins keep falling at test time), ``"plain"`` (ZO+R: a plain LSTM) or ``"expectation"``
    (b replaced by p, and D by its mean factor). The weights are those of
    :class:`~rnnbook.models.lstm.LSTMCell`, drawn the same way, so the cell with p = 1 is
    the LSTM.
    """

    def __init__(self, d_x, d_h, variant="c", p=0.5, decay="none", alpha=0.01, p_decay=0.2,
                 eval_mode="stochastic"):  # fmt: skip
        LSTMCell.__init__(self, d_x, d_h)
        check_choice(variant, "variant", GATE_VARIANTS)
        check_choice(decay, "decay", DECAYS)
        check_choice(eval_mode, "eval_mode", EVAL_MODES)
        self.variant, self.p = variant, _check_probability(p, "p")
        self.decay, self.eval_mode = decay, eval_mode
        self.alpha = _check_probability(alpha, "alpha")
        self.p_decay = _check_probability(p_decay, "p_decay")
        self.trace = None
        self.reset_tally()

    def decisions(self, like: torch.Tensor) -> torch.Tensor:
        """b (B, H): Bernoulli(p) in training and ``"stochastic"`` evaluation, p for
        ``"expectation"``, ones for ``"plain"``."""
        mode = "stochastic" if self.training else self.eval_mode
        if mode == "plain":
            return torch.ones_like(like)
        if mode == "expectation":
            return torch.full_like(like, self.p)
        return (torch.rand(like.shape, dtype=like.dtype, device=like.device) < self.p).to(
            like.dtype
        )

    def kept(self, like: torch.Tensor):
        """D as a factor: sampled in training and ``"stochastic"`` evaluation, its mean in
        ``"expectation"`` evaluation."""
        if not self.training and self.eval_mode == "expectation" and self.decay == "prob":
            return 1.0 - self.p_decay * self.alpha
        return kept_factor(like, self.decay, self.alpha, self.p_decay)

    def step(self, x_proj: torch.Tensor, state):
        h_prev, c_prev = state
        plain = LSTMCell.step_gates(self, x_proj, (h_prev, c_prev))
        i, f, g, o = plain.input_gate, plain.forget_gate, plain.candidate, plain.output_gate
        b = self.decisions(plain.c)
        keep = 1 - b
        if self.variant == "ch":  # one mask for both; where b = 1, c = ĉ and so h = ĥ
            c = b * plain.c + keep * self.kept(c_prev) * c_prev
            h = b * plain.h + keep * self.kept(h_prev) * h_prev
        elif self.variant == "c":
            c = b * plain.c + keep * self.kept(c_prev) * c_prev
            h = o * torch.tanh(c)
        elif self.variant == "f":
            forced = b * f + keep * self.kept(f)
            c = forced * c_prev + i * g
            h = o * torch.tanh(c)
        elif self.variant == "i":
            c = (b + keep * self.kept(c_prev)) * f * c_prev + (b * i) * g
            h = o * torch.tanh(c)
        else:  # "h"
            c = plain.c
            h = b * plain.h + keep * self.kept(h_prev) * h_prev
        self.count(b)
        if self.trace is not None:
            self.trace.append(b.detach())
        return h, c

    def extra_repr(self) -> str:
        return (f"variant={self.variant}, p={self.p:g}, decay={self.decay}, "
                f"eval_mode={self.eval_mode}, " + LSTMCell.extra_repr(self))  # fmt: skip
