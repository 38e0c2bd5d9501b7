"""rnnbook.checks.rnn_bptt: each checker passes a right answer and explains typical wrong ones."""

from __future__ import annotations

import pytest
import torch

from rnnbook.checks import CheckFailed, rnn_bptt

# --- reference answers -----------------------------------------------------------------------


def srn_step_right(x_t, h_prev, W_xh, W_hh, b_h):
    return torch.tanh(x_t @ W_xh.T + h_prev @ W_hh.T + b_h)


def clip_right(grads, c):
    norm = torch.sqrt(sum((g**2).sum() for g in grads))
    scale = min(1.0, c / float(norm))
    return [g * scale for g in grads]


def lag_jacobian_right(W_hh, a, k, t):
    J = torch.eye(W_hh.shape[0], dtype=W_hh.dtype)
    for i in range(k + 1, t + 1):  # later factors on the left, (rnn-R10)
        J = torch.diag(1 - torch.tanh(a[i - 1]) ** 2) @ W_hh @ J
    return J


# W_hh has sigma_max = 2; the large constant input saturates tanh, so tanh'(a_t) ~ 1e-10.
VANISHING_W = [[2.0, 0.0], [0.0, 2.0]]
VANISHING_X = [[10.0, 10.0]] * 50


def not_implemented(*args):
    raise NotImplementedError


# --- typical wrong answers -------------------------------------------------------------------


def srn_step_ignores_state(x_t, h_prev, W_xh, W_hh, b_h):
    return torch.tanh(x_t @ W_xh.T + b_h)


def srn_step_linear(x_t, h_prev, W_xh, W_hh, b_h):
    return x_t @ W_xh.T + h_prev @ W_hh.T + b_h


def srn_step_transposed(x_t, h_prev, W_xh, W_hh, b_h):
    return torch.tanh(x_t @ W_xh.T + h_prev @ W_hh + b_h)


def srn_step_untransposed_input(x_t, h_prev, W_xh, W_hh, b_h):
    return torch.tanh(x_t @ W_xh + h_prev @ W_hh.T + b_h)  # a shape error: it crashes


def srn_step_detached(x_t, h_prev, W_xh, W_hh, b_h):
    return srn_step_right(x_t, h_prev, W_xh, W_hh.detach(), b_h)


def srn_step_returns_numpy(x_t, h_prev, W_xh, W_hh, b_h):
    return srn_step_right(x_t, h_prev, W_xh, W_hh, b_h).detach().numpy()


def clip_each_tensor(grads, c):
    return [g * min(1.0, c / float(g.norm())) for g in grads]


def clip_always_rescales(grads, c):
    norm = torch.sqrt(sum((g**2).sum() for g in grads))
    return [g * c / norm for g in grads]


def clip_by_value(grads, c):
    return [g.clamp(-c, c) for g in grads]


def clip_by_value_then_rescale(grads, c):
    """Clamps each component, then rescales to norm c: right norm, wrong direction."""
    norm = torch.sqrt(sum((g**2).sum() for g in grads))
    if norm <= c:
        return grads
    clamped = [g.clamp(-1.0, 1.0) for g in grads]
    clamped_norm = torch.sqrt(sum((g**2).sum() for g in clamped))
    return [g * c / clamped_norm for g in clamped]


def clip_drops_a_tensor(grads, c):
    return clip_right(grads, c)[:-1]


def lag_jacobian_reversed(W_hh, a, k, t):
    J = torch.eye(W_hh.shape[0], dtype=W_hh.dtype)
    for i in range(k + 1, t + 1):
        J = J @ torch.diag(1 - torch.tanh(a[i - 1]) ** 2) @ W_hh
    return J


def lag_jacobian_without_slope(W_hh, a, k, t):
    return torch.linalg.matrix_power(W_hh, t - k)


def lag_jacobian_off_by_one(W_hh, a, k, t):
    J = torch.eye(W_hh.shape[0], dtype=W_hh.dtype)
    for i in range(k + 1, t + 1):
        J = torch.diag(1 - torch.tanh(a[i]) ** 2) @ W_hh @ J if i < len(a) else W_hh @ J
    return J


def lag_jacobian_wrong_shape(W_hh, a, k, t):
    return lag_jacobian_right(W_hh, a, k, t)[0]


# --- helpers ---------------------------------------------------------------------------------


def _fails(checker, *answer, match: str) -> str:
    with pytest.raises(CheckFailed, match=match) as info:
        checker(*answer)
    message = str(info.value)
    assert "\nHint: " in message
    return message


# --- srn_step --------------------------------------------------------------------------------


def test_srn_step_accepts_the_right_answer(capsys):
    message = rnn_bptt.srn_step(srn_step_right)
    assert message.startswith("✓ srn_step: all 3 checks passed")
    assert capsys.readouterr().out == message + "\n"  # one line, nothing else


@pytest.mark.parametrize(
    "answer, match",
    [
        (srn_step_ignores_state, "ignores the previous state"),
        (srn_step_linear, "no nonlinearity"),
        (srn_step_transposed, "in the recurrent term"),
        (lambda x, h, Wx, Wh, b: torch.tanh(x @ Wx.T + h @ Wh.T), "in the bias"),
        (lambda x, h, Wx, Wh, b: torch.tanh(x @ Wx.T + h @ Wh.T) + b, "inside the tanh"),
        (lambda x, h, Wx, Wh, b: torch.relu(x @ Wx.T + h @ Wh.T + b), "uses tanh"),
        (lambda x, h, Wx, Wh, b: torch.tanh(x @ Wx.T - h @ Wh.T + b), "term by term"),
        (srn_step_untransposed_input, "srn_step raised RuntimeError"),
        (srn_step_detached, "no gradient flows"),
        (srn_step_returns_numpy, "should be a torch.Tensor, got ndarray"),
    ],
)
def test_srn_step_rejects_wrong_answers(answer, match, capsys):
    _fails(rnn_bptt.srn_step, answer, match=match)
    assert capsys.readouterr().out == ""  # nothing printed as if it had passed


# --- clip_by_global_norm ---------------------------------------------------------------------


def test_clip_by_global_norm_accepts_the_right_answer(capsys):
    message = rnn_bptt.clip_by_global_norm(clip_right)
    assert message.startswith("✓ clip_by_global_norm: all 3 checks passed")
    assert capsys.readouterr().out == message + "\n"


@pytest.mark.parametrize(
    "answer, match",
    [
        (clip_each_tensor, "each tensor was clipped on its own"),
        (clip_always_rescales, "below the threshold was changed"),
        (clip_by_value, "joint norm is 22.52, expected 13"),
        (clip_by_value_then_rescale, "changed the direction"),
        (clip_drops_a_tensor, "one tensor per gradient"),
    ],
)
def test_clip_by_global_norm_rejects_wrong_answers(answer, match):
    _fails(rnn_bptt.clip_by_global_norm, answer, match=match)


# --- lag_jacobian ----------------------------------------------------------------------------


def test_lag_jacobian_accepts_the_right_answer(capsys):
    message = rnn_bptt.lag_jacobian(lag_jacobian_right)
    assert message.startswith("✓ lag_jacobian: all 2 checks passed")
    assert capsys.readouterr().out == message + "\n"


@pytest.mark.parametrize(
    "answer, match",
    [
        (lag_jacobian_reversed, "multiplied in the wrong order"),
        (lag_jacobian_without_slope, "does not match autograd"),
        (lag_jacobian_off_by_one, "does not match autograd"),
        (lag_jacobian_wrong_shape, r"should have shape \(3, 3\), got \(3,\)"),
        (lambda W_hh, a, k, t: W_hh, "dh_t/dh_t should be the identity"),
    ],
    ids=["reversed", "no-slope", "off-by-one", "shape", "zero-lag"],
)
def test_lag_jacobian_rejects_wrong_answers(answer, match):
    _fails(rnn_bptt.lag_jacobian, answer, match=match)


# --- vanishing_despite_large_weights ---------------------------------------------------------


def test_vanishing_accepts_saturating_inputs(capsys):
    message = rnn_bptt.vanishing_despite_large_weights(VANISHING_W, VANISHING_X)
    assert message.startswith("✓ vanishing_despite_large_weights: all 2 checks passed")
    assert capsys.readouterr().out == message + "\n"


def test_vanishing_accepts_tensors():
    message = rnn_bptt.vanishing_despite_large_weights(
        torch.tensor(VANISHING_W), torch.tensor(VANISHING_X)
    )
    assert message.startswith("✓")


@pytest.mark.parametrize(
    "W_hh, x, match",
    [
        (VANISHING_W, [[0.0, 0.0]] * 50, "not below 1e-3"),  # no saturation: it explodes
        ([[1.0, 0.0], [0.0, 1.0]], VANISHING_X, "sigma_max\\(W_hh\\) = 1, the exercise asks"),
        (VANISHING_W, VANISHING_X[:10], r"shape \(T, 2\) with T >= 50, got \(10, 2\)"),
        (VANISHING_W, [10.0] * 50, r"shape \(T, 2\) with T >= 50, got \(50,\)"),
        ([[2.0, 0.0, 0.0]] * 3, VANISHING_X, r"W_hh should have shape \(2, 2\)"),
        # nilpotent: sigma_max = 2 but W^2 = 0, so even the template's zero input "works"
        ([[0.0, 2.0], [0.0, 0.0]], [[0.0, 0.0]] * 50, "vanishes on its own"),
        ([[0.5, 2.0], [0.0, 0.5]], [[0.0, 0.0]] * 50, "spectral radius is below 1"),
    ],
    ids=["no-saturation", "small-weights", "short", "1-D x", "3x3 W", "nilpotent", "contracting"],
)
def test_vanishing_rejects_wrong_answers(W_hh, x, match):
    _fails(rnn_bptt.vanishing_despite_large_weights, W_hh, x, match=match)


# --- unfinished answers ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "checker, name",
    [
        (rnn_bptt.srn_step, "srn_step"),
        (rnn_bptt.clip_by_global_norm, "clip_by_global_norm"),
        (rnn_bptt.lag_jacobian, "lag_jacobian"),
    ],
)
def test_not_implemented_answer_is_reported_as_such(checker, name):
    from rnnbook.checks.grading import NotAttemptedYet

    message = checker(not_implemented)  # reported, not raised: "Run all" goes on
    assert isinstance(message, NotAttemptedYet) and f"{name}: not attempted yet" in message
    assert "NotImplementedError" in message


def test_check_failed_is_an_assertion_error():
    assert issubclass(CheckFailed, AssertionError)  # notebooks treat it like a failed assert
