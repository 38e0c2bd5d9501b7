"""Surprisal-based activation (SBA): modules that update only when their surprisal rises
(Chapter 6).

A layer's candidate activation ``v̂_t`` (B, H) is split into M modules of K = H/M
neighbouring units. Each module is pooled to one number, the M numbers go through a softmax,
and each module's surprisal is minus the log of its share:

    p_t^(m) = pool(v̂_t^(m)),  pool ∈ {max, mean}                               (sba-pool)
    s_t^(m) = −log softmax(p_t)_m                                          (sba-surprisal)

A module updates when its surprisal rose by more than θ since the previous step, and
otherwise keeps its value, possibly decayed:

    b_t^(m) = [s_t^(m) > s_{t−1}^(m) + θ]                                   (sba-decision)
    v_t = B_t ⊙ v̂_t + (1 − B_t) ⊙ D(v_{t−1}),  B_t = b_t spread over the units (sba-select)

with v_0 = 0 and s_0 = log M. At most M − 1 modules update per step (sba-bound). The
decision is detached: no gradient reaches the surprisal; a kept unit passes its gradient
to v_{t−1} unchanged (or times the decay factor).

:func:`module_surprisal` and :func:`sba_decision` are the two equations;
:class:`SBALSTMCell` puts them into an LSTM in one of seven ways (and :class:`SBARNNCell`
into an SRN with sigmoid units). The cells count their updates for the update rate
(skip-rate) and can record every decision for a raster; the chapter's word-level model is
:class:`~rnnbook.models.language.LanguageModel` with an SBA cell as its core.

Chapter 8 puts the same core into a GRU (:class:`SBAGRUCell`): the **SGRU** lets each
module keep or take its part of the GRU's proposal ``ĥ_t`` (sba-select), and the
**SENS-GRU** turns the M module decisions into votes for one decision of the whole layer,

    p_t = (1/M) Σ_m [s_t^(m) > s_{t−1}^(m) + θ]                                 (sens-vote)
    h_t = b_t ĥ_t + (1 − b_t) h_{t−1},  b_t = [p_t ≥ 0.5]                     (sens-select)

trained through the identity straight-through estimator on both steps, so the surprisal
gets a gradient.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from rnnbook._validate import check_choice, check_positive_int, check_tensor
from rnnbook.models.gru import GRUCell
from rnnbook.models.lstm import LSTMCell, check_step_inputs
from rnnbook.models.srn import SRNCell
from rnnbook.skip import DECAYS, UpdateTally, expand_modules, kept_factor

POOLINGS = ("max", "mean")
REFERENCES = ("candidate", "final", "last_update")
EVAL_MODES = ("model", "plain")
MODES = ("module", "ensemble")  # SBAGRUCell: SGRU, SENS-GRU
# variant: (the vector it observes, what a kept module overrides)
VARIANTS = {
    "h": ("h", "h"),  # S_h: h_t = h_{t-1}
    "c": ("c", "c"),  # S_c: c_t = c_{t-1}, h from the kept cell
    "ch": ("c", "ch"),  # S_ch: S_c, then a second decision on h
    "ff": ("f", "f"),  # S_ff: f_t := 1, triggered by f_t
    "fh": ("h", "f"),  # S_fh: f_t := 1, triggered by h_t
    "fc": ("c", "f"),  # S_fc: f_t := 1, triggered by c_t
    "ic": ("c", "i"),  # S_ic: i_t := 0, triggered by c_t
}


def module_surprisal(v: torch.Tensor, M: int, pooling: str = "max") -> torch.Tensor:
    """(sba-pool), (sba-surprisal): the surprisal (B, M) of the M modules of ``v`` (B, H).

    Module m holds the units ``m K .. (m + 1) K − 1`` (K = H / M); it is pooled by its max
    or mean, and ``s = −log softmax(p)`` over the modules, in nats. With M = H pooling does
    nothing; with M = 1 the surprisal is 0.
    """
    check_tensor(v, "v", ndim=2)
    check_choice(pooling, "pooling", POOLINGS)
    B, H = v.shape
    _check_modules(H, M)
    modules = v.reshape(B, M, H // M)
    p = modules.amax(-1) if pooling == "max" else modules.mean(-1)  # (B, M)
    return -torch.log_softmax(p, dim=-1)


def sba_decision(s: torch.Tensor, s_prev: torch.Tensor, theta: float) -> torch.Tensor:
    """(sba-decision): ``b = [s > s_prev + θ]`` (B, M) as floats, 1 = update, detached.

    The comparison is made in the surprisal's dtype; in float32 ``s + 1e-7 == s`` for every
    s >= 2, so θ = 1e-7 acts as θ = 0 there.
    """
    if s.shape != s_prev.shape:
        raise ValueError(
            f"s and s_prev must have the same shape (B, M), got {tuple(s.shape)} and "
            f"{tuple(s_prev.shape)}"
        )
    return (s > s_prev + theta).to(s.dtype).detach()


def _check_modules(H: int, M: int) -> None:
    check_positive_int(M, "M")
    if H % M:
        raise ValueError(f"the number of modules M must divide the layer size H = {H}, got {M}")


class _SBA(nn.Module, UpdateTally):
    """What the SBA cells share: the settings, the decay, the counters and the trace."""

    def _setup(self, H, M, pooling, theta, decay, alpha, p_decay, reference, eval_mode):
        _check_modules(H, M)
        check_choice(pooling, "pooling", POOLINGS)
        check_choice(decay, "decay", DECAYS)
        check_choice(reference, "reference", REFERENCES)
        check_choice(eval_mode, "eval_mode", EVAL_MODES)
        for name, value in (("theta", theta), ("alpha", alpha), ("p_decay", p_decay)):
            if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
                raise ValueError(f"{name} must be a number, got {value!r}")
        if not 0 <= alpha <= 1 or not 0 <= p_decay <= 1:
            raise ValueError(f"alpha and p_decay must lie in [0, 1], got {alpha} and {p_decay}")
        self.M, self.pooling, self.theta = M, pooling, float(theta)
        self.decay, self.alpha, self.p_decay = decay, float(alpha), float(p_decay)
        self.reference, self.eval_mode = reference, eval_mode
        self.trace: list | None = None  # a list to record every step's decisions into
        self.margins: list | None = None  # a list to record every step's margins into
        self.reset_tally()

    @property
    def plain(self) -> bool:
        """Skipping is off: evaluation of an SBA+R model (eval mode, ``eval_mode="plain"``)."""
        return not self.training and self.eval_mode == "plain"

    def _decay_factor(self, like: torch.Tensor) -> torch.Tensor | float:
        """What a kept unit is multiplied by: 1, 1 − α, or 1 − α with probability p_d."""
        return kept_factor(like, self.decay, self.alpha, self.p_decay)

    def _decide(self, observed: torch.Tensor, s_ref: torch.Tensor):
        """Surprisal of the observed candidate, decisions (B, M) and their units (B, H).

        With ``margins`` a list, the margin ``s_t − s_ref − θ`` of every step is appended to
        it *with* its gradient with respect to the observed vector (the reference stays
        detached), for the update penalties of Chapter 7; the decision itself is unchanged.
        """
        if self.margins is not None:
            live = module_surprisal(observed, self.M, self.pooling)
            self.margins.append(live - s_ref.detach() - self.theta)
        with torch.no_grad():
            s = module_surprisal(observed.detach(), self.M, self.pooling)
            b = sba_decision(s, s_ref, self.theta)
        return s, b, expand_modules(b, observed.shape[1] // self.M)

    def _next_reference(self, s, b, s_ref, selected):
        """The reference for the next step (sba-decision's s_{t−1})."""
        if self.reference == "candidate":
            return s
        if self.reference == "final":
            with torch.no_grad():
                return module_surprisal(selected.detach(), self.M, self.pooling)
        return torch.where(b.bool(), s, s_ref)  # last_update

    def _initial_reference(self, B, dtype, device) -> torch.Tensor:
        """s_0 = log M: the surprisal of a uniform softmax, which v_0 = 0 gives."""
        return torch.full((B, self.M), math.log(self.M), dtype=dtype, device=device)


class SBALSTMCell(LSTMCell, _SBA):
    """An LSTM step with surprisal-based activation, one of the seven variants.

    Args:
        d_x, d_h: input and hidden size H (the weights are those of
            :class:`~rnnbook.models.lstm.LSTMCell`, drawn the same way, so an SBA cell and
            an LSTM cell built after the same seed start equal).
        variant: ``"h"``, ``"c"``, ``"ch"``, ``"ff"``, ``"fh"``, ``"fc"`` or ``"ic"`` (S_h ...
            S_ic): what is observed and what a kept module overrides, see ``VARIANTS``.
        M: the number of modules, dividing H. pooling: ``"max"`` or ``"mean"``.
        theta: the threshold θ of (sba-decision); ``-inf`` updates every module.
        decay: ``"none"``, ``"const"`` (kept values times 1 − α) or ``"prob"`` (each kept
            unit times 1 − α with probability ``p_decay``), with ``alpha``.
        reference: the s_{t−1} of (sba-decision): ``"candidate"`` (the surprisal computed at
            t − 1, the book's reading), ``"final"`` (of the value kept at t − 1) or
            ``"last_update"`` (of the module's last update).
        eval_mode: ``"model"`` (SBA+M: skip in evaluation too) or ``"plain"`` (SBA+R: in
            eval mode the cell is the plain LSTM).

    State: ``(h, c, s_ref, s_ref_h)``: (B, H), (B, H) and two references (B, M); the second
    is S_ch's reference for h, carried but unused by the other variants.
    """

    def __init__(self, d_x, d_h, variant="c", M=1, pooling="max", theta=1e-4, decay="none",
                 alpha=0.01, p_decay=0.2, reference="candidate", eval_mode="model"):  # fmt: skip
        LSTMCell.__init__(self, d_x, d_h)
        check_choice(variant, "variant", tuple(VARIANTS))
        self.variant = variant
        self._setup(d_h, M, pooling, theta, decay, alpha, p_decay, reference, eval_mode)

    def initial_state(self, B: int, dtype=None, device=None):
        h, c = LSTMCell.initial_state(self, B, dtype, device)
        s0 = self._initial_reference(B, h.dtype, h.device)
        return h, c, s0, s0.clone()

    def step(self, x_proj: torch.Tensor, state):
        h_prev, c_prev, s_ref, s_ref_h = state
        plain = LSTMCell.step_gates(self, x_proj, (h_prev, c_prev))  # the candidate step
        i, f, g, o = plain.input_gate, plain.forget_gate, plain.candidate, plain.output_gate
        if self.plain:
            self.count(torch.ones_like(plain.h))
            return plain.h, plain.c, s_ref, s_ref_h
        observes, overrides = VARIANTS[self.variant]
        observed = {"h": plain.h, "c": plain.c, "f": f}[observes]
        s, b, B_units = self._decide(observed, s_ref)
        keep = 1 - B_units
        if overrides in ("c", "ch"):  # S_c, S_ch: c_t = c_{t−1} in kept modules
            c = B_units * plain.c + keep * self._decay_factor(c_prev) * c_prev
            h = o * torch.tanh(c)
            selected = c
        elif overrides == "h":  # S_h: the cell updates, h_t = h_{t−1} in kept modules
            c = plain.c
            h = B_units * plain.h + keep * self._decay_factor(h_prev) * h_prev
            selected = h
        elif overrides == "f":  # S_f*: f_t := 1 (or the decay factor) in kept modules
            forced = B_units * f + keep * self._decay_factor(f)
            c = forced * c_prev + i * g
            h = o * torch.tanh(c)
            selected = {"h": h, "c": c, "f": forced}[observes]
        else:  # S_ic: i_t := 0 in kept modules; the carried term may decay
            carried = B_units + keep * self._decay_factor(c_prev)
            c = carried * f * c_prev + (B_units * i) * g
            h = o * torch.tanh(c)
            selected = c
        s_ref = self._next_reference(s, b, s_ref, selected)
        if overrides == "ch":  # the second decision, on h computed from the selected cell
            s_h, b_h, B_h = self._decide(h, s_ref_h)
            h = B_h * h + (1 - B_h) * self._decay_factor(h_prev) * h_prev
            s_ref_h = self._next_reference(s_h, b_h, s_ref_h, h)
            self.count(torch.cat([B_units, B_h], dim=1))  # u = (u_c + u_h) / 2
            if self.trace is not None:
                self.trace.append(torch.stack([b, b_h], dim=0).detach())
        else:
            self.count(B_units)
            if self.trace is not None:
                self.trace.append(b.detach())
        return h, c, s_ref, s_ref_h

    def extra_repr(self) -> str:
        return (f"variant={self.variant}, M={self.M}, pooling={self.pooling}, "
                f"theta={self.theta:g}, decay={self.decay}, reference={self.reference}, "
                f"eval_mode={self.eval_mode}, " + LSTMCell.extra_repr(self))  # fmt: skip


class SBARNNCell(SRNCell, _SBA):
    """RNN+S: an SRN with logistic sigmoid units (as the source's RNN experiments) whose
    candidate ``ĥ_t = σ(W_xh x_t + W_hh h_{t−1} + b_h)`` goes through (sba-select).

    Arguments as :class:`SBALSTMCell`, without ``variant``. State: ``(h, s_ref)``.
    """

    def __init__(self, d_x, d_h, M=1, pooling="max", theta=1e-4, decay="none", alpha=0.01,
                 p_decay=0.2, reference="candidate", eval_mode="model"):  # fmt: skip
        SRNCell.__init__(self, d_x, d_h)
        self._setup(d_h, M, pooling, theta, decay, alpha, p_decay, reference, eval_mode)

    def initial_state(self, B: int, dtype=None, device=None):
        h = SRNCell.initial_state(self, B, dtype, device)
        return h, self._initial_reference(B, h.dtype, h.device)

    def step(self, x_proj: torch.Tensor, state):
        h_prev, s_ref = state
        candidate = torch.sigmoid(x_proj + h_prev @ self.weight_hh.T)
        if self.plain:
            self.count(torch.ones_like(candidate))
            return candidate, s_ref
        s, b, B_units = self._decide(candidate, s_ref)
        h = B_units * candidate + (1 - B_units) * self._decay_factor(h_prev) * h_prev
        self.count(B_units)
        if self.trace is not None:
            self.trace.append(b.detach())
        return h, self._next_reference(s, b, s_ref, h)


class SBAGRUCell(GRUCell, _SBA):
    """SGRU and SENS-GRU: a GRU step whose proposal goes through SBA (Chapter 8).

    The GRU of (lstm-G1)-(lstm-G4) in Chapter 2 (:class:`~rnnbook.models.gru.GRUCell` with
    ``variant="seed"``: reset before the product, ``ĥ_t = (1 − z_t) h_{t−1} + z_t h̃_t``)
    proposes ``ĥ_t``; its M modules are pooled, (sba-pool), and turned into surprisal,
    (sba-surprisal). Pooling acts on the gated proposal ``ĥ_t``, not on the tanh candidate
    ``h̃_t``, as the dissertation's equations have it (one sentence of its prose says the
    candidate). Then

    - ``mode="module"`` (SGRU): each module keeps or takes its proposal, (sba-decision) and
      (sba-select); the decision is detached, as in Chapter 6;
    - ``mode="ensemble"`` (SENS-GRU): the module decisions are votes, ``p_t`` is their mean,
      (sens-vote), and the whole state takes ``ĥ_t`` when ``p_t ≥ 0.5`` (a tie updates), else
      keeps ``h_{t−1}``, (sens-select). Both discrete steps pass the gradient straight
      through (identity), so the loss reaches ``ĥ_t`` through the surprisal as well.

    Args:
        d_x, d_h: input and hidden size H (the weights are those of a ``GRUCell``, drawn the
            same way, so an SBA cell and a ``GRUCell(variant="seed")`` built after the same
            seed start equal).
        M: the number of modules, dividing H.
        theta: the threshold θ of (sba-decision); −1e9 updates every module, +1e9 none.
        mode: ``"module"`` (SGRU) or ``"ensemble"`` (SENS-GRU).
        reference: the ``s_{t−1}`` of (sba-decision), as in :class:`SBALSTMCell`:
            ``"candidate"`` (the book's default), ``"final"`` or ``"last_update"``.
        pooling: ``"max"`` (Chapter 8) or ``"mean"``.

    State: ``(h, s_ref)``, (B, H) and (B, M); ``h_0 = 0`` and ``s_0 = log M``, as in Chapter 6.
    ``step(x_proj, state, valid)`` takes an optional mask ``valid`` (B,) of booleans: where it
    is False (padding) the state and the reference are kept exactly and nothing is counted,
    so ``update_rate()`` is the rate per real token, as Chapter 8 counts it: the share of modules
    that updated (SGRU) or of tokens on which the layer updated (SENS). With ``trace`` a list,
    every step appends its module decisions (SGRU) or votes (SENS), (B, M), 0 on padding.

    Notes:
        The SENS reference ``s_{t−1}`` is detached, as in the margins of Chapter 7's
        penalties: the straight-through gradient reaches the surprisal of the current
        proposal only. Setting ``straight_through = False`` detaches the estimator's terms
        too, which leaves the gradient of a constant mask (for comparison).
    """

    def __init__(self, d_x, d_h, M, theta, mode="module", reference="candidate", pooling="max"):
        GRUCell.__init__(self, d_x, d_h, variant="seed")
        check_choice(mode, "mode", MODES)
        self.mode = mode
        self.straight_through = True
        self._setup(d_h, M, pooling, theta, "none", 0.0, 0.0, reference, "model")

    def initial_state(self, B: int, dtype=None, device=None):
        h = GRUCell.initial_state(self, B, dtype, device)
        return h, self._initial_reference(B, h.dtype, h.device)

    def forward(self, x_t: torch.Tensor, state, valid: torch.Tensor | None = None):
        check_step_inputs(self, x_t, state)
        if valid is not None:
            check_tensor(valid, "valid", ndim=1)
            if valid.dtype != torch.bool or valid.shape[0] != x_t.shape[0]:
                raise ValueError(
                    f"valid must be a boolean mask of shape (B,) = ({x_t.shape[0]},), "
                    f"got {valid.dtype} of shape {tuple(valid.shape)}"
                )
        return self.step(self.project_inputs(x_t), state, valid)

    def step(self, x_proj: torch.Tensor, state, valid: torch.Tensor | None = None):
        h_prev, s_ref = state
        h_hat = GRUCell.step(self, x_proj, h_prev)  # (lstm-G1)-(lstm-G4): ĥ_t, (B, H)
        real = None if valid is None else valid.to(h_hat.dtype).unsqueeze(1)  # (B, 1)
        if self.mode == "module":  # SGRU
            # (sba-pool), (sba-surprisal), (sba-decision): s (B, M), b (B, M), B_units (B, H)
            s, b, B_units = self._decide(h_hat, s_ref)
            if real is not None:
                b, B_units = b * real, B_units * real  # padding never updates
            h = B_units * h_hat + (1 - B_units) * h_prev  # (sba-select)
            recorded, updated = b, b  # per module
        else:  # SENS-GRU
            s_live = module_surprisal(h_hat, self.M, self.pooling)  # (B, M), with its gradient
            s = s_live.detach()
            votes = sba_decision(s, s_ref, self.theta)  # (B, M): the 0/1 votes, detached
            if self.margins is not None:  # the margin d = s_t − s_{t−1} − θ of each vote
                self.margins.append(s_live - s_ref.detach() - self.theta)
            # (sens-vote), identity STE: vote = votes + (d − d.detach()), 0 forward, ∂vote/∂d = 1
            # backward. With s_{t−1} detached and θ constant, d − d.detach() equals
            # s_t − s_t.detach(), which stays finite for θ = ±inf. It is formed first and
            # then added: (votes + d) − d would lose the 0/1 in float32 when |d| ~ 1e9.
            vote = votes + (s_live - s) if self.straight_through else votes
            p = vote.mean(-1, keepdim=True)  # (sens-vote): (B, 1)
            # [p ≥ 0.5] counted in integers, 2 Σ votes ≥ M, so that a tie is exact for any M
            b_hard = (2 * votes.sum(-1, keepdim=True) >= self.M).to(h_hat.dtype)  # (B, 1)
            b = b_hard + (p - p.detach()) if self.straight_through else b_hard  # (sens-vote), STE
            if real is not None:
                b, b_hard, votes = b * real, b_hard * real, votes * real
            h = b * h_hat + (1 - b) * h_prev  # (sens-select)
            B_units = b_hard.expand_as(h)  # (B, H)
            recorded, updated = votes, b_hard.expand_as(s)  # every module follows the layer
        s_next = self._next_reference(s, updated, s_ref, h)
        if valid is None:
            self.count(B_units)
        else:
            s_next = torch.where(valid.unsqueeze(1), s_next, s_ref)  # padding: keep s_{t−1}
            self.count(B_units[valid])  # real tokens only
        if self.trace is not None:
            self.trace.append(recorded.detach())
        return h, s_next

    def extra_repr(self) -> str:
        return (f"mode={self.mode}, M={self.M}, pooling={self.pooling}, theta={self.theta:g}, "
                f"reference={self.reference}, " + GRUCell.extra_repr(self))  # fmt: skip
