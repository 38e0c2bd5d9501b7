"""rnnbook.checks.lstm_gru: each checker passes a right answer and explains typical wrong ones.

The right answers below are written from the equations, (lstm-L1)-(lstm-L6),
(lstm-P1)-(lstm-P5) and (lstm-G1)-(lstm-G4) with torch's GRU conventions, not by calling
the book's cells, and are themselves checked against ``nn.LSTM``/``nn.GRU``.
"""

from __future__ import annotations

import copy
import inspect
import re
import warnings

import pytest
import torch
from torch import nn

from rnnbook.checks import CheckFailed, lstm_gru
from rnnbook.models.gru import GRUCell
from rnnbook.models.lstm import LSTMCell

# cho_to_seed warns on every right answer; test_a_right_answer_raises_no_warning records it.
pytestmark = pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad=True")

# --- reference answers -----------------------------------------------------------------------


def gru_step_right(x_t, h_prev, weight_ih, weight_hh, bias_ih, bias_hh):
    """nn.GRU: rows (r, z, n), reset after the recurrent product, z keeps the old state."""
    i_r, i_z, i_n = (x_t @ weight_ih.T + bias_ih).chunk(3, dim=1)
    h_r, h_z, h_n = (h_prev @ weight_hh.T + bias_hh).chunk(3, dim=1)
    r = torch.sigmoid(i_r + h_r)
    z = torch.sigmoid(i_z + h_z)
    n = torch.tanh(i_n + r * h_n)
    return (1 - z) * n + z * h_prev


def _lstm_slices(cell):
    """(W, U, b) of each gate i, f, g, o; b is the sum of torch's two bias vectors."""
    W = cell.weight_ih.chunk(4, dim=0)
    U = cell.weight_hh.chunk(4, dim=0)
    b = (cell.bias_ih + cell.bias_hh).chunk(4)
    return dict(zip("ifgo", zip(W, U, b)))


def _affine(x_t, h_prev, gate):
    W, U, b = gate
    return x_t @ W.T + h_prev @ U.T + b


def peephole_right(x_t, h_prev, c_prev, cell):
    """(lstm-P1)-(lstm-P5) with sigma_h = tanh."""
    gates = _lstm_slices(cell)
    f = torch.sigmoid(_affine(x_t, h_prev, gates["f"]) + cell.peephole_f * c_prev)  # (lstm-P1)
    i = torch.sigmoid(_affine(x_t, h_prev, gates["i"]) + cell.peephole_i * c_prev)  # (lstm-P2)
    c = f * c_prev + i * torch.tanh(_affine(x_t, h_prev, gates["g"]))  # (lstm-P3)
    o = torch.sigmoid(_affine(x_t, h_prev, gates["o"]) + cell.peephole_o * c)  # (lstm-P4)
    return o * torch.tanh(c), c  # (lstm-P5)


def parameter_count_right(kind, d_x, d_h, biases):
    gates = {"lstm": 4, "gru": 3}[kind]
    return gates * (d_h * d_x + d_h * d_h + biases * d_h)


def _z_rows(H):
    return slice(H, 2 * H)  # rows stacked (r, z, n)


def cho_to_seed_right(cell):
    """sigma(-a) = 1 - sigma(a): negate every parameter that feeds the pre-activation of z."""
    H = cell.hidden_size
    state = {k: v.detach().clone() for k, v in cell.state_dict().items()}
    for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
        state[name][_z_rows(H)] *= -1
    seed = GRUCell(cell.input_size, H, variant="seed").to(cell.weight_ih.dtype)
    seed.load_state_dict(state)
    return seed


def not_implemented(*args):
    raise NotImplementedError


# --- the reference answers are right, independently of the book's cells -----------------------


def test_gru_step_right_matches_nn_gru():
    torch.manual_seed(0)
    gru = nn.GRU(3, 4, batch_first=True).double()
    x, h0 = torch.randn(5, 1, 3, dtype=torch.float64), torch.randn(1, 5, 4, dtype=torch.float64)
    _, h_n = gru(x, h0)
    weights = (gru.weight_ih_l0, gru.weight_hh_l0, gru.bias_ih_l0, gru.bias_hh_l0)
    got = gru_step_right(x[:, 0], h0[0], *weights)
    torch.testing.assert_close(got, h_n[0], rtol=0, atol=1e-12)


def test_peephole_right_without_peepholes_matches_nn_lstm():
    torch.manual_seed(0)
    lstm = nn.LSTM(3, 4, batch_first=True).double()
    cell = LSTMCell(3, 4, peephole=True).double()  # peepholes start at 0
    with torch.no_grad():
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(cell, name).copy_(getattr(lstm, f"{name}_l0"))
    x = torch.randn(5, 1, 3, dtype=torch.float64)
    h0, c0 = torch.randn(1, 5, 4, dtype=torch.float64), torch.randn(1, 5, 4, dtype=torch.float64)
    _, (h_n, c_n) = lstm(x, (h0, c0))
    h, c = peephole_right(x[:, 0], h0[0], c0[0], cell)
    torch.testing.assert_close(h, h_n[0], rtol=0, atol=1e-12)
    torch.testing.assert_close(c, c_n[0], rtol=0, atol=1e-12)


@pytest.mark.parametrize("kind, module", [("lstm", nn.LSTM), ("gru", nn.GRU)])
def test_parameter_count_right_matches_torch(kind, module):
    for d_x, d_h in ((1, 40), (5, 3)):
        torch_count = sum(p.numel() for p in module(d_x, d_h).parameters())
        assert parameter_count_right(kind, d_x, d_h, 2) == torch_count


def test_parameter_count_right_gives_the_appendix_numbers():
    """Exercise ex-lstm-count: 7,130 with one bias per gate, 7,290 with PyTorch's two."""
    assert parameter_count_right("lstm", 1, 40, 1) + 410 == 7130
    assert parameter_count_right("lstm", 1, 40, 2) + 410 == 7290


# --- typical wrong answers: gru_step ---------------------------------------------------------


def _gru_parts(x_t, h_prev, weight_ih, weight_hh, bias_ih, bias_hh):
    """r, z and the pieces of n, from the rows (r, z, n)."""
    W_r, W_z, W_n = weight_ih.chunk(3)
    U_r, U_z, U_n = weight_hh.chunk(3)
    b_ir, b_iz, b_in = bias_ih.chunk(3)
    b_hr, b_hz, b_hn = bias_hh.chunk(3)
    r = torch.sigmoid(x_t @ W_r.T + b_ir + h_prev @ U_r.T + b_hr)
    z = torch.sigmoid(x_t @ W_z.T + b_iz + h_prev @ U_z.T + b_hz)
    n_before = torch.tanh(x_t @ W_n.T + b_in + (r * h_prev) @ U_n.T + b_hn)
    return z, n_before


def gru_step_seed(x_t, h_prev, *weights):
    """(G1)-(G4): reset before the product, z gates the new candidate."""
    z, n = _gru_parts(x_t, h_prev, *weights)
    return (1 - z) * h_prev + z * n


def gru_step_cho(x_t, h_prev, *weights):
    """Cho et al. 2014: reset before the product, z keeps the old state."""
    z, n = _gru_parts(x_t, h_prev, *weights)
    return z * h_prev + (1 - z) * n


def gru_step_gate_order_swapped(x_t, h_prev, weight_ih, weight_hh, bias_ih, bias_hh):
    """Reads the rows as (z, r, n)."""
    H = h_prev.shape[1]

    def swap(w):
        return torch.cat([w[H : 2 * H], w[:H], w[2 * H :]])

    return gru_step_right(
        x_t, h_prev, swap(weight_ih), swap(weight_hh), swap(bias_ih), swap(bias_hh)
    )


def gru_step_z_swapped_reset_after(x_t, h_prev, weight_ih, weight_hh, bias_ih, bias_hh):
    """Reset after the product (right) but z gating the new candidate (wrong)."""
    i_r, i_z, i_n = (x_t @ weight_ih.T + bias_ih).chunk(3, dim=1)
    h_r, h_z, h_n = (h_prev @ weight_hh.T + bias_hh).chunk(3, dim=1)
    r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
    n = torch.tanh(i_n + r * h_n)
    return (1 - z) * h_prev + z * n


def gru_step_detached(*args):
    return gru_step_right(*args).detach()


def gru_step_transposed(*args):
    return gru_step_right(*args).T


def gru_step_squeezed(*args):
    return gru_step_right(*args).squeeze()  # right for a batch of 5, (H,) for a batch of 1


def gru_step_returns_numpy(*args):
    return gru_step_right(*args).detach().numpy()


def gru_step_untransposed(x_t, h_prev, weight_ih, weight_hh, bias_ih, bias_hh):
    return x_t @ weight_ih  # a shape error: it crashes


# --- typical wrong answers: peephole_lstm_step -----------------------------------------------


def _peephole_with(x_t, h_prev, c_prev, cell, *, p_i, p_f, p_o, c_for_o="current", act=torch.tanh):
    gates = _lstm_slices(cell)
    f = torch.sigmoid(_affine(x_t, h_prev, gates["f"]) + p_f * c_prev)
    i = torch.sigmoid(_affine(x_t, h_prev, gates["i"]) + p_i * c_prev)
    c = f * c_prev + i * torch.tanh(_affine(x_t, h_prev, gates["g"]))
    seen = c if c_for_o == "current" else c_prev
    o = torch.sigmoid(_affine(x_t, h_prev, gates["o"]) + p_o * seen)
    return o * act(c), c


def peephole_ignored(x_t, h_prev, c_prev, cell):
    return _peephole_with(x_t, h_prev, c_prev, cell, p_i=0, p_f=0, p_o=0)


def peephole_output_reads_c_prev(x_t, h_prev, c_prev, cell):
    p = dict(p_i=cell.peephole_i, p_f=cell.peephole_f, p_o=cell.peephole_o)
    return _peephole_with(x_t, h_prev, c_prev, cell, **p, c_for_o="previous")


def peephole_i_f_swapped(x_t, h_prev, c_prev, cell):
    p = dict(p_i=cell.peephole_f, p_f=cell.peephole_i, p_o=cell.peephole_o)
    return _peephole_with(x_t, h_prev, c_prev, cell, **p)


def peephole_identity_output(x_t, h_prev, c_prev, cell):
    """Gers & Schmidhuber's sigma_h = identity, but the exercise asks for tanh."""
    p = dict(p_i=cell.peephole_i, p_f=cell.peephole_f, p_o=cell.peephole_o)
    return _peephole_with(x_t, h_prev, c_prev, cell, **p, act=lambda c: c)


def peephole_returns_only_h(*args):
    return peephole_right(*args)[0]


def peephole_returns_three(*args):
    h, c = peephole_right(*args)
    return h, c, h


def peephole_returns_c_h(*args):
    h, c = peephole_right(*args)
    return c, h


def peephole_flattened(*args):
    h, c = peephole_right(*args)
    return h.reshape(-1), c


def peephole_under_no_grad(*args):
    with torch.no_grad():
        return peephole_right(*args)


def peephole_copied_weights(x_t, h_prev, c_prev, cell):
    """The right numbers from detached copies of the peepholes: no gradient reaches them."""
    p = {f"p_{g}": getattr(cell, f"peephole_{g}").detach().clone() for g in "ifo"}
    return _peephole_with(x_t, h_prev, c_prev, cell, **p)


def peephole_crashes(x_t, h_prev, c_prev, cell):
    return x_t @ cell.weight_ih, c_prev  # (B, 3) @ (4H, 3): a shape error


# --- typical wrong answers: parameter_counts -------------------------------------------------


def count_always_two_biases(kind, d_x, d_h, biases):
    return parameter_count_right(kind, d_x, d_h, 2)


def count_without_biases(kind, d_x, d_h, biases):
    return parameter_count_right(kind, d_x, d_h, 0)


def count_one_bias_per_layer(kind, d_x, d_h, biases):
    return parameter_count_right(kind, d_x, d_h, 0) + biases * d_h


def count_gru_as_lstm(kind, d_x, d_h, biases):
    return parameter_count_right("lstm", d_x, d_h, biases)


def count_without_recurrent_matrix(kind, d_x, d_h, biases):
    return parameter_count_right(kind, d_x, d_h, biases) - {"lstm": 4, "gru": 3}[kind] * d_h**2


def count_as_string(kind, d_x, d_h, biases):
    return str(parameter_count_right(kind, d_x, d_h, biases))


# --- typical wrong answers: cho_to_seed ------------------------------------------------------


def cho_returns_a_cho_cell(cell):
    return copy.deepcopy(cell)


def cho_returns_state_dict(cell):
    return cho_to_seed_right(cell).state_dict()


def cho_copies_without_negating(cell):
    seed = GRUCell(cell.input_size, cell.hidden_size, variant="seed").double()
    seed.load_state_dict(cell.state_dict())
    return seed


def cho_negates_in_place(cell):
    """Right weights, but taken by negating the given cell's own parameters."""
    H = cell.hidden_size
    with torch.no_grad():
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(cell, name)[_z_rows(H)] *= -1
    return cho_copies_without_negating(cell)


def cho_relabels_the_given_cell(cell):
    """Negates in place and returns the same object, relabelled."""
    H = cell.hidden_size
    with torch.no_grad():
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(cell, name)[_z_rows(H)] *= -1
    cell.variant = "seed"
    return cell


def cho_forgets_bias_hh(cell):
    seed = cho_to_seed_right(cell)
    with torch.no_grad():
        seed.bias_hh[_z_rows(cell.hidden_size)] *= -1  # undo: b_hz keeps the cho sign
    return seed


def cho_negates_only_weights(cell):
    seed = cho_to_seed_right(cell)
    with torch.no_grad():
        for name in ("bias_ih", "bias_hh"):
            getattr(seed, name)[_z_rows(cell.hidden_size)] *= -1  # both z-biases un-negated
    return seed


def cho_negates_the_reset_gate(cell):
    H = cell.hidden_size
    seed = cho_copies_without_negating(cell)
    with torch.no_grad():
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(seed, name)[:H] *= -1  # r instead of z
    return seed


def cho_swaps_sizes(cell):
    seed = GRUCell(cell.hidden_size, cell.input_size, variant="seed")
    seed.load_state_dict(cell.state_dict())  # size mismatch: raises
    return seed


def cho_returns_wrong_size(cell):
    return GRUCell(cell.hidden_size, cell.input_size, variant="seed")  # (4, 3), not (3, 4)


# --- helpers ---------------------------------------------------------------------------------


def _fails(checker, answer, match: str, hint: str = "") -> str:
    """The checker raises CheckFailed matching ``match``, with ``hint`` after "Hint: "."""
    with pytest.raises(CheckFailed, match=match) as info:
        checker(answer)
    message = str(info.value)
    assert "\nHint: " in message
    assert re.search(hint, message.split("\nHint: ", 1)[1]), message
    return message


# --- gru_step --------------------------------------------------------------------------------


def test_gru_step_accepts_the_right_answer(capsys):
    message = lstm_gru.gru_step(gru_step_right)
    assert message.startswith("✓ gru_step: all 2 checks passed")
    assert capsys.readouterr().out == message + "\n"  # one line, nothing else


GRU_STEP_WRONG = {
    "seed": (gru_step_seed, "follows the 'seed' convention", r"z keep the \*old\* state"),
    "cho": (gru_step_cho, "follows the 'cho' convention", "applies r after the recurrent"),
    "gate-order": (
        gru_step_gate_order_swapped,
        r"reads the gates in the order \(z, r, n\)",
        r"\(r, z, n\)",
    ),
    # Right reset placement, wrong z: neither 'seed' nor 'cho', but named all the same.
    "z-swapped": (gru_step_z_swapped_reset_after, "z gate the new candidate", r"\*old\* state"),
    "minus-h": (
        lambda x, h, *w: gru_step_right(x, -h, *w),
        "differs from nn.GRU for a batch of 5",
        "term by term",
    ),
    "detached": (gru_step_detached, "no gradient flows from h_t back to weight_hh", r"\.detach"),
    "transposed": (gru_step_transposed, r"h_t should have shape \(5, 4\), got \(4, 5\)", "x @ W.T"),
    "squeezed": (gru_step_squeezed, r"h_t should have shape \(1, 4\), got \(4,\)", "batch"),
    "numpy": (gru_step_returns_numpy, "h_t should be a torch.Tensor, got ndarray", "a tensor"),
    "crash": (
        gru_step_untransposed,
        "gru_step raised RuntimeError",
        "call it yourself on a small input",
    ),
}


@pytest.mark.parametrize("answer, match, hint", GRU_STEP_WRONG.values(), ids=GRU_STEP_WRONG)
def test_gru_step_rejects_wrong_answers(answer, match, hint, capsys):
    _fails(lstm_gru.gru_step, answer, match, hint)
    assert capsys.readouterr().out == ""  # nothing printed as if it had passed


# --- peephole_lstm_step ----------------------------------------------------------------------


def test_peephole_lstm_step_accepts_the_right_answer(capsys):
    message = lstm_gru.peephole_lstm_step(peephole_right)
    assert message.startswith("✓ peephole_lstm_step: all 4 checks passed")
    assert capsys.readouterr().out == message + "\n"


PEEPHOLE_WRONG = {
    "no-peepholes": (peephole_ignored, "c_t ignores the peepholes", r"p ⊙ c_\{t-1\} inside σ"),
    "o-reads-c_prev": (
        peephole_output_reads_c_prev,
        r"h_t differs from \(lstm-P4\)-\(lstm-P5\)",
        r"the output gate peeks at the \*new\* cell state c_t",
    ),
    "p_i-p_f-swapped": (
        peephole_i_f_swapped,
        r"c_t differs from \(lstm-P3\)",
        r"\*previous\* cell",
    ),
    "identity-output": (
        peephole_identity_output,
        r"h_t differs from \(lstm-P4\)-\(lstm-P5\)",
        "output gate",
    ),
    "only-h": (peephole_returns_only_h, r"return the pair \(h_t, c_t\)", "new cell state"),
    "three-values": (peephole_returns_three, r"return the pair \(h_t, c_t\)", "next step"),
    "c-h-swapped": (
        peephole_returns_c_h,
        r"c_t differs from \(lstm-P3\)",
        "forget and input gates",
    ),
    "shape": (peephole_flattened, r"h_t should have shape \(5, 4\), got \(20,\)", "batch"),
    "crash": (peephole_crashes, "peephole_lstm_step raised RuntimeError", "read the traceback"),
    "no-grad": (peephole_under_no_grad, "computed outside autograd", "torch.no_grad"),
    "copied-peepholes": (peephole_copied_weights, "no gradient reaches", "peephole parameters"),
}


@pytest.mark.parametrize("answer, match, hint", PEEPHOLE_WRONG.values(), ids=PEEPHOLE_WRONG)
def test_peephole_lstm_step_rejects_wrong_answers(answer, match, hint, capsys):
    _fails(lstm_gru.peephole_lstm_step, answer, match, hint)
    assert capsys.readouterr().out == ""


def test_peephole_transposed_h_is_rejected():
    """A transposed h is caught by the shape check (the first batch, B = 5, is not square)."""

    def transposed(*args):
        h, c = peephole_right(*args)
        return h.T, c

    _fails(lstm_gru.peephole_lstm_step, transposed, r"h_t should have shape \(5, 4\), got \(4, 5\)")


# --- parameter_counts ------------------------------------------------------------------------


def test_parameter_counts_accepts_the_right_answer(capsys):
    message = lstm_gru.parameter_counts(parameter_count_right)
    assert message.startswith("✓ parameter_counts: all 2 checks passed (12 cases of LSTM and GRU")
    assert "7,130" in message
    assert capsys.readouterr().out == message + "\n"


def test_parameter_counts_accepts_a_float_answer():
    lstm_gru.parameter_counts(lambda *args: float(parameter_count_right(*args)))


PARAMETER_COUNTS_WRONG = {
    "always-two-biases": (
        count_always_two_biases,
        r"LSTM with d_x=1, d_h=40 and 1 bias vector\(s\): expected 6720 parameters, got 6880\.",
    ),
    "no-biases": (
        count_without_biases,
        r"LSTM with d_x=1, d_h=40 and 2 bias vector\(s\): expected 6880 parameters, got 6560\.",
    ),
    "one-bias-per-layer": (
        count_one_bias_per_layer,
        r"LSTM with d_x=1, d_h=40 and 2 bias vector\(s\): expected 6880 parameters, got 6640\.",
    ),
    "gru-as-lstm": (
        count_gru_as_lstm,
        r"GRU with d_x=1, d_h=40 and 2 bias vector\(s\): expected 5160 parameters, got 6880\.",
    ),
    "no-recurrent-matrix": (count_without_recurrent_matrix, "expected 6880 parameters, got 480"),
    "string": (count_as_string, "expected 6880 parameters, got '6880'"),
}


@pytest.mark.parametrize(
    "answer, match", PARAMETER_COUNTS_WRONG.values(), ids=PARAMETER_COUNTS_WRONG
)
def test_parameter_counts_rejects_wrong_answers(answer, match):
    hint = "raise NotImplementedError" if answer is not_implemented else "bias vector"
    _fails(lstm_gru.parameter_counts, answer, match, hint)


def test_parameter_counts_checks_the_appendix_total():
    """Only an answer that changes between calls reaches the final 7,130 check."""
    seen = set()

    def right_only_once(*args):
        wrong = args in seen
        seen.add(args)
        return parameter_count_right(*args) + wrong

    _fails(lstm_gru.parameter_counts, right_only_once, "LSTM\\(40\\).*should total 7,130")


# --- cho_to_seed -----------------------------------------------------------------------------


def test_cho_to_seed_right_answer_is_exact():
    """The right answer itself: same hidden states as the cho cell, to rounding."""
    torch.manual_seed(0)
    cho = GRUCell(3, 4, variant="cho").double()
    seed = cho_to_seed_right(cho)
    x = torch.randn(2, 6, 3, dtype=torch.float64)
    h_cho = h_seed = torch.zeros(2, 4, dtype=torch.float64)
    with torch.no_grad():
        for t in range(6):
            h_cho, h_seed = cho(x[:, t], h_cho), seed(x[:, t], h_seed)
    torch.testing.assert_close(h_seed, h_cho, rtol=0, atol=1e-14)


def test_cho_to_seed_accepts_the_right_answer(capsys):
    message = lstm_gru.cho_to_seed(cho_to_seed_right)
    assert message.startswith("✓ cho_to_seed: all 2 checks passed")
    assert capsys.readouterr().out == message + "\n"


def cho_to_seed_default_dtype(cell):
    """The right transformation, loaded into a cell built as the hint says: GRUCell(3, 4, "seed")
    in torch's default float32, so load_state_dict rounds the float64 weights."""
    seed = GRUCell(3, 4, "seed")
    seed.load_state_dict(cho_to_seed_right(cell).state_dict())
    return seed


def test_cho_to_seed_accepts_a_right_answer_in_the_default_dtype():
    lstm_gru.cho_to_seed(cho_to_seed_default_dtype)


SIGMA_HINT = r"σ\(-a\) = 1 - σ\(a\): which parameters feed the pre-activation of z\?"
CHO_TO_SEED_WRONG = {
    "returns-cho": (cho_returns_a_cho_cell, "return a GRUCell with variant='seed'", "GRUCell"),
    "returns-dict": (cho_returns_state_dict, "return a GRUCell with variant='seed'", "GRUCell"),
    "mutates-input": (cho_negates_in_place, "the given cell was modified", "state_dict"),
    "relabels-input": (cho_relabels_the_given_cell, "the given cell was modified", "copy"),
    "not-negated": (cho_copies_without_negating, "the two cells differ by up to", SIGMA_HINT),
    "b_hz-not-negated": (cho_forgets_bias_hh, "differ by up to .* over a 5-step", SIGMA_HINT),
    "biases-not-negated": (cho_negates_only_weights, "the two cells differ", SIGMA_HINT),
    "r-negated": (cho_negates_the_reset_gate, "the two cells differ", SIGMA_HINT),
    "crash": (cho_swaps_sizes, "cho_to_seed raised RuntimeError", "read the traceback"),
}


@pytest.mark.parametrize("answer, match, hint", CHO_TO_SEED_WRONG.values(), ids=CHO_TO_SEED_WRONG)
def test_cho_to_seed_rejects_wrong_answers(answer, match, hint, capsys):
    _fails(lstm_gru.cho_to_seed, answer, match, hint)
    assert capsys.readouterr().out == ""


def test_cho_to_seed_rejects_a_cell_of_the_wrong_size():
    _fails(lstm_gru.cho_to_seed, cho_returns_wrong_size, "d_x")


# --- all checkers ----------------------------------------------------------------------------

CHECKERS = {
    "gru_step": (lstm_gru.gru_step, gru_step_right, gru_step_gate_order_swapped),
    "peephole_lstm_step": (lstm_gru.peephole_lstm_step, peephole_right, peephole_i_f_swapped),
    "parameter_counts": (lstm_gru.parameter_counts, parameter_count_right, count_without_biases),
    "cho_to_seed": (lstm_gru.cho_to_seed, cho_to_seed_right, cho_forgets_bias_hh),
}
WRONG = {
    lstm_gru.gru_step: [answer for answer, *_ in GRU_STEP_WRONG.values()],
    lstm_gru.peephole_lstm_step: [answer for answer, *_ in PEEPHOLE_WRONG.values()],
    lstm_gru.parameter_counts: [answer for answer, _ in PARAMETER_COUNTS_WRONG.values()],
    lstm_gru.cho_to_seed: [answer for answer, *_ in CHO_TO_SEED_WRONG.values()],
}


def _code_lines(*functions) -> list[str]:
    """The statements of the book's reference cells, without comments and docstrings."""
    lines = []
    for fn in functions:
        for line in inspect.getsource(fn).splitlines():
            code = line.split("#", 1)[0].strip()
            if len(code) >= 12 and not code.startswith(('"""', "def ", "@")) and code[0] != '"':
                lines.append(code)
    return lines


REFERENCE_CODE = _code_lines(GRUCell.gates, GRUCell.step, LSTMCell.step_gates)


def _message(checker, answer) -> str:
    try:
        return checker(answer)
    except CheckFailed as error:
        return str(error)


@pytest.mark.parametrize("checker", WRONG, ids=lambda c: c.__name__)
def test_messages_never_contain_the_reference_code(checker):
    assert len(REFERENCE_CODE) > 15  # the filter above kept the statements
    right = next(r for c, r, _ in CHECKERS.values() if c is checker)
    for answer in [right, *WRONG[checker]]:
        message = _message(checker, answer)
        leaked = [line for line in REFERENCE_CODE if line in message]
        assert not leaked, f"{answer.__name__}: {leaked}"


@pytest.mark.parametrize("checker, right, wrong", CHECKERS.values(), ids=CHECKERS)
def test_checkers_are_deterministic(checker, right, wrong):
    """Same verdict and message, whatever the global seed (the cases use their own)."""
    passes, failures = set(), set()
    for seed in (0, 1234):
        torch.manual_seed(seed)
        passes.add(checker(right))
        failures.add(_message(checker, wrong))
    assert len(passes) == 1 and next(iter(passes)).startswith("✓")
    assert len(failures) == 1 and not next(iter(failures)).startswith("✓")


@pytest.mark.parametrize(
    "checker, right",
    [pytest.param(c, r, id=name) for name, (c, r, _) in CHECKERS.items()],
)
def test_checkers_leave_the_global_rng_alone(checker, right):
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    checker(right)
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize(
    "checker, right",
    [
        pytest.param(
            c,
            r,
            id=name,
        )
        for name, (c, r, _) in CHECKERS.items()
    ],
)
def test_a_right_answer_raises_no_warning(checker, right):
    warn_always = torch.is_warn_always_enabled()
    torch.set_warn_always(True)  # torch's once-per-process warnings, every time
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            checker(right)
    finally:
        torch.set_warn_always(warn_always)


def test_check_failed_is_an_assertion_error():
    assert issubclass(CheckFailed, AssertionError)
