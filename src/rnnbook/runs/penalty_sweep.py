"""Chapter 7's update penalties trained: SBA language models on the PTB slice with R_CB, R_MSURE
or R_NS added to the loss, over each penalty's grid of lambda.

The runs are Chapter 6's long runs (:mod:`rnnbook.runs.wordlm`) with one change, the loss:
the same slice, the same 32 streams and windows of 35 words with the state carried between
windows, the same initial weights (``torch.manual_seed(seed)``, then the model), H = 128,
Adam at 3e-3, gradients clipped to global norm 10, 25 passes of 90 windows. Every window's
loss is

    L = L_CE + R                                                                 (pen-total)

with one penalty of :mod:`rnnbook.penalties`:

* ``cb``: R_CB = λ Σ_t ū_t (pen-cb), ū_t the share of modules that updated at step t;
* ``msure``: R_MSURE = λ (u_target − u)² (pen-msure), u the share over the window;
* ``ns``: R_NS = λ (1/T) Σ_t (‖h_t‖ − ‖h_{t−1}‖)² (pen-ns), with h_0 the state carried in
  (the zero state at a pass's start), averaged over the batch.

R_CB and R_MSURE count SBA's decisions through the straight-through surrogate (pen-ste) on
the decision margins ``m = s_t − s_ref − θ`` that the cell records (``cell.margins``), so
their gradient reaches the weights through the surprisals; the decisions the cell takes are
unchanged. R_NS is differentiable as it stands.

Models (``--model``): ``sba-ic`` (S_ic, M = H) and ``sba-c2`` (S_c, M = 2, max pooling), the
cells of Chapter 6's long runs, and ``sba-fc`` (S_fc, M = H, the forget-gate variant of
Chapter 6's full profile); theta = 1e-4, no decay.

Chapter 7's levers on the rate, beyond the source's penalties (:func:`levers`):

* ``--penalty none --theta θ``: no penalty, a larger threshold θ of (sba-decision), the same
  initial weights (θ is not a weight); with ``--theta-from k`` the run keeps the cell's θ = 1e-4
  for its first k passes and trains with θ from then on (a threshold of 0.1 or more stops
  every update of the untrained network, whose surprisals change by less than 0.08 a step);
* ``--tau τ`` with ``cb`` or ``msure``: the decisions through a tempered surrogate,
  ``[m > 0]`` forward and the derivative of ``sigmoid(m / τ)`` backward
  (:func:`tempered_straight_through`), which pushes the margins near the threshold hardest;
* ``margin``: R_margin = λ · mean over the window's steps, streams and modules of
  ``max(m, 0)``, a penalty on the margins themselves (:func:`margin_penalty`), whose gradient
  lowers the surprisal rise of every module that updates.

The learning curve, after every pass: ``valid_ppl`` (SBA+M), ``valid_ppl_plain`` (SBA+R) and
``valid_u`` on the validation text, as in Chapter 6's runs; and over the pass's 90 training
windows ``train_ce`` (the mean cross-entropy, nats per word), ``train_penalty`` (the mean R),
``train_penalty_raw`` (the mean of R / λ, the penalised quantity itself), ``train_u`` (the
share of modules that updated) and ``ri``, the regularisation influence (pen-ri) over the
pass: the mean of R_i / (L_CE,i + R_i) over its N = 90 iterations. (pen-ri) over the whole run
is the mean of the passes' ``ri``, every pass having 90 iterations. ``train_loss`` is the mean
total loss L. The training statistics travel with the weights, in the model's buffer
``penalty_tally``, so that a resumed run and a reloaded checkpoint report them as the run did.

``python -m rnnbook.runs penalty --help`` lists the options. The run's weights stay in its
folder (``<out-dir>/checkpoint/``, 1.6 MB); its learning curve is copied to the book's
``checkpoints/<name>.curve.csv``.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import shutil
import sys
from pathlib import Path

import torch

from rnnbook import longrun
from rnnbook.data.ptb import batchify
from rnnbook.models import LanguageModel
from rnnbook.models.sba import SBALSTMCell
from rnnbook.paths import checkpoint_dir
from rnnbook.penalties import (
    budget_penalty,
    msure_penalty,
    norm_stabiliser,
    regularisation_influence,
    straight_through,
)
from rnnbook.runs import wordlm
from rnnbook.runtime import seed_everything
from rnnbook.train import BPTTWindows, token_cross_entropy

SOURCE_PENALTIES = ("cb", "msure", "ns")  # the source's three, (pen-cb)-(pen-ns)
PENALTIES = SOURCE_PENALTIES + ("margin", "none")  # and Chapter 7's levers
# the lambda grids of the spec (zoneout.md, section 4.3); NS 0.05 is the source's edge
LAMBDAS = {
    "cb": (1e-4, 1e-3, 1e-2, 1e-1),
    "msure": (0.1, 1.0, 10.0, 100.0),
    "ns": (1e-3, 1e-2, 5e-2, 1e-1, 1.0, 10.0),
}
# Chapter 7's levers (see the module's text), chosen from the trained S_ic's margins on the
# validation text: s_t - s_ref has quartiles -0.31, 0.30 and 0.85, and a threshold of 1 would
# keep 18 % of its updates without retraining
LEVER_THETAS = {"sba-ic": (0.01, 0.03, 0.3, 1.0), "sba-c2": (0.01,)}  # from the first update
LEVER_WARM = {"sba-ic": ((0.1, 12), (0.3, 12))}  # (theta, the passes with 1e-4 before it)
LEVER_TAUS = (0.1, 0.3, 1.0)  # tempered surrogate, with R_MSURE (u_target 0.2, lambda 10)
LEVER_MARGIN_LAMBDAS = (0.1, 1.0, 10.0)
LEVER_SEEDS = (1, 2)  # the levers that moved S_ic's rate most, trained again with these seeds
U_TARGETS = (0.2, 0.5)
MODELS = {
    "sba-ic": wordlm.MODELS["sba-ic"],
    "sba-c2": wordlm.MODELS["sba-c2"],
    "sba-fc": lambda: SBALSTMCell(
        wordlm.HIDDEN, wordlm.HIDDEN, theta=wordlm.THETA, variant="fc", M=wordlm.HIDDEN
    ),
}
DESCRIPTIONS = {**{k: wordlm.DESCRIPTIONS[k] for k in ("sba-ic", "sba-c2")},
                "sba-fc": "S_fc, M = H, theta 1e-4"}  # fmt: skip
PASSES, PER_PASS = 25, -(-(wordlm.N_TRAIN // wordlm.STREAMS - 1) // wordlm.K)  # 90 windows
# the buffer of training statistics: windows, then sums of CE, R, R / (CE + R), u, R / lambda
TALLY = ("windows", "train_ce", "train_penalty", "ri", "train_u", "train_penalty_raw")


def _check_positive(label: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{label} must be a positive number, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{label} must be a positive number, got {value!r}")


def check_penalty(
    model: str,
    penalty: str,
    lam: float,
    u_target: float | None,
    theta: float | None = None,
    tau: float | None = None,
    theta_from: int | None = None,
) -> None:
    """Refuse a model, penalty, lambda, target, threshold, temperature or warm-up the runs do
    not know, saying what came."""
    if model not in MODELS:
        raise ValueError(f"model must be one of {sorted(MODELS)}, got {model!r}")
    if penalty not in PENALTIES:
        raise ValueError(f"penalty must be one of {list(PENALTIES)}, got {penalty!r}")
    if isinstance(lam, bool) or not isinstance(lam, int | float) or not math.isfinite(lam):
        raise ValueError(f"lam must be a finite number >= 0, got {lam!r}")
    if lam < 0:
        raise ValueError(f"lam must be a finite number >= 0, got {lam!r}")
    if penalty == "msure":
        if isinstance(u_target, bool) or not isinstance(u_target, int | float):
            raise ValueError(f"msure needs u_target, a number in [0, 1], got {u_target!r}")
        if not 0 <= u_target <= 1:
            raise ValueError(f"msure needs u_target, a number in [0, 1], got {u_target!r}")
    elif u_target is not None:
        raise ValueError(f"u_target belongs to msure only, got {u_target!r} for {penalty}")
    if penalty == "none" and lam != 0:
        raise ValueError(f"penalty 'none' takes lam = 0, got {lam!r}")
    for label, value in (("theta", theta), ("tau", tau)):
        if value is not None:
            _check_positive(label, value)
    if theta_from is not None:
        if theta is None:
            raise ValueError(f"theta_from needs theta, got theta_from={theta_from!r} alone")
        if isinstance(theta_from, bool) or not isinstance(theta_from, int) or theta_from < 1:
            raise ValueError(
                f"theta_from must be a whole number of passes >= 1, got {theta_from!r}"
            )
    if tau is not None and penalty not in ("cb", "msure"):
        raise ValueError(
            f"tau (the surrogate's temperature) belongs to cb and msure, got {penalty}"
        )


def run_name(
    model: str,
    penalty: str,
    lam: float,
    u_target: float | None = None,
    seed: int = 0,
    theta: float | None = None,
    tau: float | None = None,
    theta_from: int | None = None,
) -> str:
    """``ptb-slice-<model>-<penalty>[-ut<u_target>]-lam<lambda>[-tau<τ>][-theta<θ>[-from<k>]]
    [-seed<k>]``, e.g. ``ptb-slice-sba-ic-msure-ut0.5-lam10``; without a penalty
    ``ptb-slice-<model>-theta<θ>[-from<k>][-seed<k>]``."""
    check_penalty(model, penalty, lam, u_target, theta, tau, theta_from)
    end = (
        (f"-theta{theta:g}" if theta is not None else "")
        + (f"-from{theta_from}" if theta_from is not None else "")
        + (f"-seed{seed}" if seed else "")
    )
    if penalty == "none":
        return f"ptb-slice-{model}{end}"
    target = f"-ut{u_target:g}" if penalty == "msure" else ""
    temperature = f"-tau{tau:g}" if tau is not None else ""
    return f"ptb-slice-{model}-{penalty}{target}-lam{lam:g}{temperature}{end}"


class _TemperedStraightThrough(torch.autograd.Function):
    """``[m > 0]`` forward; backward the derivative of ``sigmoid(m / τ)``."""

    @staticmethod
    def forward(margin: torch.Tensor, tau: float) -> torch.Tensor:
        return (margin > 0).to(margin.dtype)  # exactly 0 or 1, as (pen-ste)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        margin, tau = inputs
        ctx.save_for_backward(margin)
        ctx.tau = tau

    @staticmethod
    def backward(ctx, grad_b: torch.Tensor):
        (margin,) = ctx.saved_tensors
        s = torch.sigmoid(margin / ctx.tau)
        return grad_b * s * (1 - s) / ctx.tau, None


def tempered_straight_through(margin: torch.Tensor, tau: float) -> torch.Tensor:
    """The decisions ``[m > 0]`` (exactly 0 or 1) with the derivative of ``sigmoid(m / τ)``,
    ``σ(m/τ)(1 − σ(m/τ))/τ``, in place of (pen-ste)'s 1: at most ``1/(4τ)``, at ``m = 0``, and
    small for margins far from the threshold."""
    if not isinstance(margin, torch.Tensor) or not margin.is_floating_point():
        raise TypeError(f"margin must be a floating-point tensor, got {type(margin).__name__}")
    _check_positive("tau", tau)
    return _TemperedStraightThrough.apply(margin, float(tau))


def margin_penalty(margins: torch.Tensor, lam: float) -> torch.Tensor:
    """R_margin = λ · mean(max(m, 0)) over the window's margins (T, B, M): zero for a module
    that keeps, and for one that updates the amount by which its surprisal rose past θ."""
    if not isinstance(margins, torch.Tensor) or margins.dim() != 3:
        shape = tuple(margins.shape) if isinstance(margins, torch.Tensor) else type(margins)
        raise ValueError(f"margins must be a (T, B, M) tensor, got {shape}")
    return float(lam) * torch.relu(margins).mean()  # relu: no gradient at m = 0, a keep


class PenalisedLoss:
    """The ``loss_fn`` of a penalised run: CE plus the penalty over one window, the state
    carried from the previous window (detached) and the zero state at a pass's start, as
    :class:`rnnbook.train.CarriedState` does; each window's statistics are added to the
    model's buffer ``penalty_tally``, which the first window of every pass sets to zero.

    The batch is ``(step, (index, x, y))``: the run's step and the window.
    """

    def __init__(
        self,
        penalty: str,
        lam: float,
        u_target: float | None,
        per_pass: int,
        tau: float | None = None,
        theta_from: tuple[float, int] | None = None,
    ):
        self.penalty, self.lam, self.u_target, self.per_pass = penalty, lam, u_target, per_pass
        self.tau = tau
        self.theta_from = theta_from  # (theta, the first step that uses it), or None
        self.state = None

    def decisions(self, margins: torch.Tensor) -> torch.Tensor:
        """The 0/1 decisions with the surrogate's derivative: (pen-ste), or tempered."""
        if self.tau is None:
            return straight_through(margins)  # (pen-ste): 0/1 forward, d/dm = 1
        return tempered_straight_through(margins, self.tau)

    def penalty_of(self, margins, h, h0) -> torch.Tensor:
        """R of one window: margins (T, B, M) (CB, MSURE, margin), states h (B, T, H) and
        h0 (B, H) (NS); zero for ``none``."""
        if self.penalty == "cb":
            return budget_penalty(self.decisions(margins), self.lam)  # (pen-cb)
        if self.penalty == "msure":
            return msure_penalty(self.decisions(margins), self.u_target, self.lam)  # (pen-msure)
        if self.penalty == "margin":
            return margin_penalty(margins, self.lam)
        if self.penalty == "none":
            return h.new_zeros(())
        return norm_stabiliser(h, h0, self.lam)  # (pen-ns)

    def __call__(self, model: LanguageModel, batch) -> torch.Tensor:
        step, (index, x, y) = batch
        cell, tally = model.cell, model.penalty_tally
        if self.theta_from is not None:  # the warm-up: the cell's own threshold until then
            theta, first = self.theta_from
            cell.theta = theta if step >= first else wordlm.THETA
            model.threshold.fill_(cell.theta)  # saved with the weights
        if step % self.per_pass == 0:  # a new pass: a new row of the curve
            tally.zero_()
        state_in = None if index == 0 else self.state
        if state_in is None:
            h0 = torch.zeros(x.shape[0], cell.hidden_size)  # (B, H): the zero state
        else:
            h0 = state_in[0][0]  # (B, H), detached when it was carried
        cell.margins = [] if self.penalty in ("cb", "msure", "margin") else None
        cell.reset_tally()
        try:
            h, state = model.core(model.embedding(x), state_in)  # h (B, T, H)
            margins = torch.stack(cell.margins) if cell.margins is not None else None  # (T,B,M)
        finally:
            cell.margins = None
        ce = token_cross_entropy(model.readout(h), y)
        r = self.penalty_of(margins, h, h0)
        self.state = tuple(s.detach() for s in state)
        with torch.no_grad():
            ce_, r_ = float(ce.detach()), float(r.detach())
            raw = r_ / self.lam if self.lam > 0 else 0.0
            ratio = regularisation_influence([r_], [ce_])  # (pen-ri) of this iteration
            window = (1.0, ce_, r_, ratio, cell.update_rate(), raw)
            tally += torch.tensor(window, dtype=tally.dtype)
        return ce + r  # (pen-total)


def tally_columns(model: LanguageModel) -> dict[str, float]:
    """The curve's training columns: the means over the windows since the tally was zeroed
    (none before the first window)."""
    tally = model.penalty_tally.tolist()
    if tally[0] == 0:
        return {}
    return {key: value / tally[0] for key, value in zip(TALLY[1:], tally[1:])}


def build_penalised_lm(model: str, theta: float | None = None, warm: bool = False) -> LanguageModel:
    """Chapter 6's language model around the cell ``model``, with the empty tally buffer;
    ``theta`` replaces the cell's threshold (the weights are the same for every θ). With
    ``warm``, the threshold in use travels with the weights in the buffer ``threshold``
    (the cell's own at first), so that a reloaded checkpoint decides as the run did."""
    if model not in MODELS:
        raise ValueError(f"model must be one of {sorted(MODELS)}, got {model!r}")
    lm = LanguageModel(wordlm.VOCAB, MODELS[model](), tie_weights=True)
    if theta is not None:
        _check_positive("theta", theta)
        lm.cell.theta = float(theta)
    lm.register_buffer("penalty_tally", torch.zeros(len(TALLY), dtype=torch.float64))
    if warm:
        lm.register_buffer("threshold", torch.tensor(lm.cell.theta, dtype=torch.float64))
    return lm


def slice_config(model_text: str, cell: str, seed: int, passes: int, lr: float) -> dict:
    """The config keys of Chapter 6 and 7's long runs (:func:`rnnbook.runs.wordlm.wordlm_run`)."""
    return {
        "task": "ptb-slice-words",
        "model": f"LanguageModel(tied embeddings, H = {wordlm.HIDDEN}, {model_text})",
        "cell": cell,
        "hidden": wordlm.HIDDEN,
        "data": f"PTB slice: first {wordlm.N_TRAIN:,} training and {wordlm.N_VALID:,} "
        f"validation words, vocabulary {wordlm.VOCAB:,}; {wordlm.STREAMS} streams, windows of "
        f"{wordlm.K}, state carried between windows, zero at each pass's start",
        "eval": "PTB slice validation, 32 streams, windows of 35; stochastic passes seeded "
        f"with {wordlm.EVAL_SEED}",
        "passes": passes,
        "optimizer": "adam",
        "lr": lr,
        "grad_clip_norm": wordlm.CLIP,
        "seed": seed,
    }


@functools.cache
def slice_windows() -> BPTTWindows:
    """The training windows of the slice: 32 streams, windows of 35 words, 90 a pass."""
    streams = batchify(wordlm.slice_data().train, wordlm.STREAMS)
    return BPTTWindows(streams[:, :-1], streams[:, 1:], wordlm.K)


@functools.cache
def valid_streams() -> torch.Tensor:
    """The validation text as 32 streams."""
    return batchify(wordlm.slice_data().valid, wordlm.STREAMS)


def penalty_run(
    *,
    model: str = "sba-ic",
    penalty: str = "ns",
    lam: float = 1e-2,
    u_target: float | None = None,
    seed: int = 0,
    passes: int = PASSES,
    lr: float = 3e-3,
    name: str | None = None,
    theta: float | None = None,
    tau: float | None = None,
    theta_from: int | None = None,
) -> longrun.LongRun:
    """The long run of ``model`` trained with ``penalty`` at ``lam`` (see the module's text);
    ``theta`` replaces the threshold (from pass ``theta_from`` on, if given), ``tau`` tempers
    the surrogate."""
    check_penalty(model, penalty, lam, u_target, theta, tau, theta_from)
    lam = float(lam)
    u_target = None if u_target is None else float(u_target)

    def build_model() -> LanguageModel:
        seed_everything(seed)  # the chapters' initial weights: torch.manual_seed(seed) first
        if theta_from is None:
            return build_penalised_lm(model, theta)
        return build_penalised_lm(model, warm=True)  # theta from pass theta_from on

    def evaluate(lm: LanguageModel) -> dict[str, float]:
        if hasattr(lm, "threshold"):  # a warm threshold: the one the run uses now
            lm.cell.theta = float(lm.threshold)
        return {**wordlm.evaluate_word_lm(lm, valid_streams()), **tally_columns(lm)}

    described = {"cb": "R_CB (pen-cb)", "msure": "R_MSURE (pen-msure)", "ns": "R_NS (pen-ns)",
                 "margin": "R_margin = lambda mean(max(m, 0))", "none": None}  # fmt: skip
    surrogate = "straight-through surrogate on the margins (pen-ste)"
    if tau is not None:
        surrogate = f"[m > 0] forward, the derivative of sigmoid(m / {tau:g}) backward"
    config = slice_config(DESCRIPTIONS[model], model, seed, passes, lr)
    config["penalty"] = {
        "name": penalty,
        "lambda": lam,
        "u_target": u_target,
        "decisions": surrogate if penalty in ("cb", "msure") else None,
        "equation": described[penalty],
    }
    if tau is not None:
        config["penalty"]["tau"] = float(tau)
    if theta is not None:
        config["theta"] = float(theta)
    if theta_from is not None:
        config["theta_from_pass"] = theta_from
    return longrun.LongRun(
        name=name or run_name(model, penalty, lam, u_target, seed, theta, tau, theta_from),
        config=config,
        build_model=build_model,
        batch=lambda step: (step, slice_windows()(step)),
        loss_fn=PenalisedLoss(
            penalty,
            lam,
            u_target,
            PER_PASS,
            tau,
            None if theta_from is None else (float(theta), theta_from * PER_PASS),
        ),
        evaluate=evaluate,
        optimizer=lambda parameters: torch.optim.Adam(parameters, lr=lr),
        steps=passes * PER_PASS,
        eval_every=PER_PASS,
        clip_mode="norm",
        clip_at=wordlm.CLIP,
        train_column="train_loss",
        recent=PER_PASS,
        rel_tol=1e-3,  # SBA: a flipped decision elsewhere
    )


def curve_summary(rows: list[dict]) -> dict[str, float]:
    """A finished run's learning curve in a few numbers, read at its best validation pass.

    ``best_ppl`` and ``at``: the lowest ``valid_ppl`` (SBA+M) after training and its pass;
    ``plain_ppl`` (SBA+R) and ``valid_u`` at that pass; for a penalised run also ``train_u``
    at that pass and ``ri``, the influence (pen-ri) over the whole run (the mean of the
    passes' values, every pass having 90 iterations); for an unpenalised run those two are
    None. ``plain_ppl`` is ``valid_ppl`` for a curve that has no plain column.
    """
    trained = [
        (row["valid_ppl"], k) for k, row in enumerate(rows) if k > 0 and row.get("valid_ppl")
    ]
    if not trained:
        raise ValueError("the curve has no trained row with 'valid_ppl'")
    best_ppl, at = min(trained)
    row = rows[at]
    passes = [r["ri"] for r in rows[1:] if r.get("ri") is not None]
    return {
        "best_ppl": best_ppl,
        "at": at,
        "plain_ppl": row.get("valid_ppl_plain") or best_ppl,
        "valid_u": row.get("valid_u"),
        "train_u": row.get("train_u"),
        "ri": sum(passes) / len(passes) if passes else None,
    }


def grid(models=("sba-ic", "sba-c2"), seed: int = 0) -> list[dict]:
    """Every run of the sweep for ``models``: each penalty over its lambdas, MSURE with both
    targets; as keyword arguments of :func:`penalty_run`."""
    runs = []
    for model in models:
        for penalty in SOURCE_PENALTIES:
            for target in U_TARGETS if penalty == "msure" else (None,):
                for lam in LAMBDAS[penalty]:
                    runs.append(dict(model=model, penalty=penalty, lam=lam, u_target=target,
                                     seed=seed))  # fmt: skip
    return runs


def levers() -> list[dict]:
    """Chapter 7's levers on the rate (see the module's text), as keyword arguments of
    :func:`penalty_run`: the threshold without a penalty (from the first update, and after a
    warm-up with the cell's own), the tempered surrogate under R_MSURE
    (u_target 0.2, lambda 10: inside the source's window of RI, where the plain surrogate left
    S_ic's rate near 0.5), and the margin penalty, all on S_ic; the threshold also on S_c."""
    runs = []
    for model, thetas in LEVER_THETAS.items():
        runs += [dict(model=model, penalty="none", lam=0.0, theta=theta) for theta in thetas]
    for model, settings in LEVER_WARM.items():
        runs += [dict(model=model, penalty="none", lam=0.0, theta=theta, theta_from=k)
                 for theta, k in settings]  # fmt: skip
    runs += [dict(model="sba-ic", penalty="msure", lam=10.0, u_target=0.2, tau=tau)
             for tau in LEVER_TAUS]  # fmt: skip
    runs += [dict(model="sba-ic", penalty="margin", lam=lam) for lam in LEVER_MARGIN_LAMBDAS]
    return runs


def lever_seeds() -> list[dict]:
    """The levers that moved S_ic's rate furthest at a small cost (the tempered surrogate at
    tau = 0.1 and 0.3, the threshold 0.3 after 12 passes), with the seeds ``LEVER_SEEDS``."""
    chosen = [dict(model="sba-ic", penalty="msure", lam=10.0, u_target=0.2, tau=tau)
              for tau in (0.1, 0.3)]  # fmt: skip
    chosen.append(dict(model="sba-ic", penalty="none", lam=0.0, theta=0.3, theta_from=12))
    return [{**kw, "seed": seed} for seed in LEVER_SEEDS for kw in chosen]


# --- the command line ------------------------------------------------------------------------


def publish_curve_only(run: longrun.LongRun, out_dir: Path, *, resume: bool, threads: int,
                       extra) -> int:  # fmt: skip
    """:func:`rnnbook.longrun.run_and_publish` with the checkpoint (weights and record) kept in
    ``<out_dir>/checkpoint/`` and only the learning curve copied to the book's checkpoint
    folder, as ``<name>.curve.csv``. Returns run_and_publish's exit code."""
    book = checkpoint_dir()
    staging = (Path(out_dir) / "checkpoint").resolve()
    previous = os.environ.get("RNNBOOK_CHECKPOINTS")
    os.environ["RNNBOOK_CHECKPOINTS"] = str(staging)
    try:
        code = longrun.run_and_publish(run, out_dir, resume=resume, threads=threads, extra=extra)
    finally:
        if previous is None:
            del os.environ["RNNBOOK_CHECKPOINTS"]
        else:
            os.environ["RNNBOOK_CHECKPOINTS"] = previous
    if code == 0:
        book.mkdir(parents=True, exist_ok=True)
        curve = f"{run.name}.curve.csv"
        shutil.copyfile(staging / curve, book / curve)
        longrun.log(f"copied the learning curve to {longrun.portable(book / curve)}")
    return code


def parse_args(argv=None) -> argparse.Namespace:
    parser = longrun.run_parser(
        "penalty",
        "Train an SBA language model of Chapter 6 on the PTB slice with one of Chapter 7's "
        "update penalties",
        "--model sba-ic --penalty msure --u-target 0.5 --lam 10 --out-dir runs/pen",
    )
    parser.add_argument("--model", choices=sorted(MODELS), default="sba-ic")
    parser.add_argument("--penalty", choices=PENALTIES, required=True)
    parser.add_argument("--lam", type=float, default=0.0, help="the penalty's weight lambda")
    parser.add_argument(
        "--theta",
        type=float,
        default=None,
        help="the decision's threshold (default the cell's, 1e-4)",
    )
    parser.add_argument("--tau", type=float, default=None,
                        help="cb, msure: the tempered surrogate's temperature")  # fmt: skip
    parser.add_argument("--theta-from", type=int, default=None,
                        help="passes with theta 1e-4 before --theta")  # fmt: skip
    parser.add_argument("--u-target", type=float, default=None, help="msure's target rate")
    parser.add_argument("--passes", type=int, default=PASSES)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--name", help="the run's name (default from its settings)")
    args = parser.parse_args(argv)
    longrun.check_run_arguments(parser, args, ("passes", "threads"), positive=("lr",))
    try:
        check_penalty(
            args.model, args.penalty, args.lam, args.u_target, args.theta, args.tau, args.theta_from
        )
    except ValueError as error:
        parser.error(str(error))
    return args


def main(argv=None) -> int:
    """Exit 0 when the run is published, 1 when it is refused, 2 on a NaN or inf."""
    args = parse_args(argv)
    run = penalty_run(
        model=args.model,
        penalty=args.penalty,
        lam=args.lam,
        u_target=args.u_target,
        seed=args.seed,
        passes=args.passes,
        lr=args.lr,
        name=args.name,
        theta=args.theta,
        tau=args.tau,
        theta_from=args.theta_from,
    )
    return publish_curve_only(
        run, args.out_dir, resume=args.resume, threads=args.threads,
        extra=lambda result: {"seed": args.seed},
    )  # fmt: skip


# The sweep's curves are committed (checkpoints/ptb-slice-<model>-<penalty>...curve.csv), its
# weights stay in the runs' folders, except three final S_c models whose modules' shares
# Chapter 7 measures (1.6 MB each): R_CB at lambda = 0.1 and R_MSURE at lambda = 10 asking for
# 0.2 and, as the control, for 0.5.
_SHARE_RUNS = (
    dict(model="sba-c2", penalty="cb", lam=0.1),
    dict(model="sba-c2", penalty="msure", lam=10.0, u_target=0.2),
    dict(model="sba-c2", penalty="msure", lam=10.0, u_target=0.5),
)
BOOK_RUNS = {run_name(**kw): functools.partial(penalty_run, **kw) for kw in _SHARE_RUNS}

if __name__ == "__main__":
    sys.exit(main())
