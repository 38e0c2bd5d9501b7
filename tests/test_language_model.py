"""Language models: LanguageModel, and fit_lm, lm_loss, perplexity, bits_per_char,
unigram_perplexity and sample in rnnbook.train."""

import math

import pytest
import torch
from torch import nn

from rnnbook.data.ptb import batchify, bptt_windows
from rnnbook.models import GRUCell, LanguageModel, LSTMCell, SRNCell
from rnnbook.models.clockwork import ClockworkLM
from rnnbook.testing import assert_close_ulps
from rnnbook.train import (
    NonFiniteError,
    bits_per_char,
    fit_lm,
    lm_loss,
    perplexity,
    sample,
    token_cross_entropy,
    unigram_perplexity,
)

V, D, H = 7, 4, 5
F64 = torch.float64

CORES = {
    "srn": lambda: SRNCell(D, H),
    "lstm": lambda: LSTMCell(D, H),
    "gru": lambda: GRUCell(D, H),
    "nn.LSTM": lambda: nn.LSTM(D, H, batch_first=True),
}


def _model(kind: str = "lstm", seed: int = 0, dtype=F64) -> LanguageModel:
    torch.manual_seed(seed)
    return LanguageModel(V, CORES[kind]()).to(dtype)


def _stream(B: int = 3, N: int = 12, seed: int = 1) -> torch.Tensor:
    return torch.randint(V, (B, N), generator=torch.Generator().manual_seed(seed))


# --- LanguageModel ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(CORES))
@pytest.mark.parametrize("B, L", [(1, 1), (3, 7)])
def test_language_model_returns_logits_and_a_state_it_accepts_back(kind, B, L):
    model = _model(kind)
    tokens = torch.randint(V, (B, L))
    logits, state = model(tokens)
    assert logits.shape == (B, L, V) and logits.dtype == F64
    hidden = state[0] if isinstance(state, tuple) else state
    assert hidden.shape == (1, B, H)  # torch's layer axis, as nn.LSTM
    logits_2, _ = model(tokens, state)
    assert logits_2.shape == (B, L, V)


@pytest.mark.parametrize("kind", list(CORES))
def test_the_state_after_window_1_is_the_initial_state_of_window_2(kind):
    """Two windows with the state carried compute what one pass over both computes."""
    model, tokens = _model(kind), _stream(N=10)
    whole, state_whole = model(tokens)
    first, state_1 = model(tokens[:, :4])
    second, state_2 = model(tokens[:, 4:], state_1)
    assert_close_ulps(torch.cat([first, second], dim=1), whole)
    for a, b in zip(state_2 if isinstance(state_2, tuple) else (state_2,),
                    state_whole if isinstance(state_whole, tuple) else (state_whole,),
                    strict=True):  # fmt: skip
        assert_close_ulps(a, b)


def test_tied_weights_share_one_matrix():
    model = LanguageModel(V, LSTMCell(H, H), tie_weights=True)
    assert model.readout.weight is model.embedding.weight
    assert len(list(model.parameters())) == 1 + 4 + 1  # embedding, the cell's 4, read-out bias
    with pytest.raises(ValueError, match="hidden size to equal the embedding .* H = 5 and d_x = 4"):
        LanguageModel(V, LSTMCell(D, H), tie_weights=True)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: LanguageModel(0, SRNCell(D, H)), ValueError, "vocab_size must be a positive"),
        (lambda: LanguageModel(V, nn.Linear(D, H)), TypeError, "core must be a cell"),
        (lambda: LanguageModel(V, nn.GRU(D, H)), ValueError, "must be batch-first"),
        (lambda: _model()(torch.zeros(2, 3)), ValueError, "tokens must be integer ids"),
        (lambda: _model()(torch.zeros(3, dtype=torch.long)), ValueError, "2 dimensions"),
    ],
)
def test_language_model_rejects_bad_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call()


# --- the loss, perplexity and bits per character --------------------------------------------


class Uniform(nn.Module):
    """Every next token has probability 1/V: all logits are 0."""

    def __init__(self, vocab_size: int, dtype=F64):
        super().__init__()
        self.vocab_size, self.dtype = vocab_size, dtype

    def forward(self, tokens, state=None):
        return torch.zeros(*tokens.shape, self.vocab_size, dtype=self.dtype), state


@pytest.mark.parametrize("dtype", [torch.float32, F64])
@pytest.mark.parametrize("vocab_size", [2, 50, 2000])
def test_a_uniform_model_has_the_vocabulary_size_as_perplexity(dtype, vocab_size):
    stream = batchify(torch.arange(300) % vocab_size, 4)
    model = Uniform(vocab_size, dtype)
    eps = torch.finfo(dtype).eps
    # ln V is rounded once in the dtype; exp turns that into a relative error of ln V * eps
    rel = 8 * eps * math.log(vocab_size)
    assert perplexity(model, stream, k=7) == pytest.approx(vocab_size, rel=rel)
    assert bits_per_char(model, stream, k=7) == pytest.approx(math.log2(vocab_size), rel=8 * eps)


def test_token_cross_entropy_is_the_mean_negative_log_probability_of_the_targets():
    logits = torch.randn(2, 3, V, dtype=F64, generator=torch.Generator().manual_seed(0))
    targets = torch.tensor([[0, 6, 2], [3, 3, 1]])
    log_p = torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1))  # (2, 3, 1)
    assert_close_ulps(token_cross_entropy(logits, targets), -log_p.mean())


@pytest.mark.parametrize("kind", ["srn", "lstm"])
def test_the_loss_of_a_stream_does_not_depend_on_the_window_length(kind):
    """The state is carried, and windows count by their tokens: any k gives the loss of one
    pass over the whole stream."""
    model, stream = _model(kind), _stream(N=12)
    with torch.no_grad():
        logits, _ = model(stream[:, :-1])
        whole = token_cross_entropy(logits, stream[:, 1:]).item()
    for k in (1, 4, 5, 11, 35):
        assert_close_ulps(torch.tensor(lm_loss(model, stream, k)), torch.tensor(whole))
    assert perplexity(model, stream, 5) == math.exp(lm_loss(model, stream, 5))


def test_unigram_perplexity_by_hand():
    train = torch.tensor([0, 0, 1, 2])  # p = 1/2, 1/4, 1/4
    assert unigram_perplexity(train, torch.tensor([0, 1]), 3) == pytest.approx(math.sqrt(8))
    assert unigram_perplexity(train, train, 3) == pytest.approx(2**1.5)
    assert unigram_perplexity(train, torch.tensor([3]), 4) == math.inf
    with pytest.raises(ValueError, match=r"ids must hold ids in \[0, 3\), got 0..3"):
        unigram_perplexity(train, torch.tensor([0, 3]), 3)


# --- fit_lm --------------------------------------------------------------------------------------


class Recording(nn.Module):
    """Wraps a language model and records the windows and states it is given."""

    def __init__(self, model):
        super().__init__()
        self.model, self.calls = model, []

    def forward(self, tokens, state=None):
        logits, new_state = self.model(tokens, state)
        self.calls.append((tokens, state, new_state))
        return logits, new_state


def test_fit_lm_walks_the_windows_and_carries_the_detached_state():
    stream = _stream(B=2, N=12)  # 11 predictions: windows of 4, 4 and 3
    model = Recording(_model("srn"))
    history = fit_lm(model, stream, epochs=2, k=4, progress=False)
    windows = bptt_windows(stream, 4)
    assert history.steps == len(model.calls) == 2 * len(windows)
    for step, (tokens, state, _) in enumerate(model.calls):
        assert torch.equal(tokens, windows[step % 3][0])
        if step % 3 == 0:
            assert state is None  # every epoch starts from the zero state
        else:
            previous = model.calls[step - 1][2]
            assert torch.equal(state, previous) and not state.requires_grad


def test_fit_lm_reports_the_token_weighted_train_metric_and_the_validation_metric():
    """With a zero learning rate the epoch's train perplexity is that of the stream."""
    stream, valid = _stream(B=2, N=12), _stream(B=2, N=9, seed=2)
    model = _model("lstm")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    history = fit_lm(model, stream, epochs=2, k=5, optimizer=optimizer, valid=valid, progress=False)
    assert sorted(history.evals) == ["train_ppl", "valid_ppl"]
    assert [step for step, _ in history.evals["train_ppl"]] == [2, 5]  # 3 windows per epoch
    expected = perplexity(model, stream, 5)
    for _, value in history.evals["train_ppl"]:
        assert_close_ulps(torch.tensor(value), torch.tensor(expected))
    assert history.last("valid_ppl") == perplexity(model, valid, 5)
    bpc = fit_lm(model, stream, epochs=1, k=5, optimizer=optimizer, report="bpc", progress=False)
    assert_close_ulps(torch.tensor(bpc.last("train_bpc")), torch.tensor(math.log2(expected)))


def test_fit_lm_learns_a_periodic_text():
    torch.manual_seed(0)
    stream = batchify(torch.arange(640) % V, 8)  # 0 1 2 ... 6 0 1 ...: one right answer
    model = LanguageModel(V, SRNCell(8, 16))
    history = fit_lm(model, stream, epochs=4, k=10, lr=1e-2, valid=stream[:2], progress=False)
    assert history.evals["train_ppl"][0][1] > 2.0
    assert history.last("valid_ppl") < 1.5  # measured 1.12; a uniform guess scores 7


def test_fit_lm_trains_a_clockwork_language_model():
    """ClockworkLM's state (h without a layer axis) is carried as it comes."""
    torch.manual_seed(0)
    model = ClockworkLM(V, 4, (1, 2))
    history = fit_lm(model, _stream(B=2, N=20), epochs=1, k=6, valid=_stream(), progress=False)
    assert history.steps == 4 and math.isfinite(history.last("valid_ppl"))


def test_fit_lm_stops_on_a_non_finite_loss():
    class NaNAtThirdWindow(Recording):
        def forward(self, tokens, state=None):
            logits, state = super().forward(tokens, state)
            return (logits * math.nan if len(self.calls) == 3 else logits), state

    model = NaNAtThirdWindow(_model("srn"))
    with pytest.raises(NonFiniteError, match="loss became nan at step 2"):
        fit_lm(model, _stream(N=20), epochs=1, k=3, progress=False)
    model.calls.clear()
    history = fit_lm(model, _stream(N=20), epochs=1, k=3, on_nonfinite="stop", progress=False)
    assert history.steps == 2 and history.stopped == "loss became nan at step 2"


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(train=torch.zeros(2, 5)), r"train must hold integer ids .* got torch.float32"),
        (dict(train=torch.zeros(5, dtype=torch.long)), r"shape \(B, N\) .* of shape \(5,\)"),
        (dict(valid=torch.zeros(2, 1, dtype=torch.long)), r"valid must .* N >= 2"),
        (dict(epochs=0), "epochs must be a positive integer, got 0"),
        (dict(k=0), "k must be a positive integer, got 0"),
        (dict(report="nats"), r"report must be one of \('ppl', 'bpc'\), got 'nats'"),
    ],
)
def test_fit_lm_rejects_bad_arguments(kwargs, match):
    args = dict(train=_stream(), epochs=1) | kwargs
    with pytest.raises(ValueError, match=match):
        fit_lm(_model(), args.pop("train"), **args, progress=False)


# --- sample ----------------------------------------------------------------------------------


class Fixed(nn.Module):
    """Logits ``z`` whatever the input; the state counts the tokens read."""

    def __init__(self, z):
        super().__init__()
        self.z = torch.as_tensor(z, dtype=F64)

    def forward(self, tokens, state=None):
        B, L = tokens.shape
        return self.z.expand(B, L, -1), (0 if state is None else state) + L


class Successor(nn.Module):
    """Puts almost all probability on (last token + 1) mod V."""

    def forward(self, tokens, state=None):
        return 20.0 * nn.functional.one_hot((tokens + 1) % V, V).double(), state


def test_sampling_is_reproducible_with_a_seeded_generator():
    model = _model("lstm")
    prompt = torch.tensor([1, 2])
    draws = [
        sample(model, prompt, 40, generator=torch.Generator().manual_seed(s)) for s in (0, 0, 1)
    ]
    assert draws[0].shape == (40,) and draws[0].dtype == torch.long
    assert torch.equal(draws[0], draws[1])
    assert not torch.equal(draws[0], draws[2])
    assert model.training  # put back in the mode it came in


def test_sampling_reads_back_every_sampled_token():
    out = sample(Successor(), torch.tensor([3]), 6, temperature=0)
    assert out.tolist() == [4, 5, 6, 0, 1, 2]
    out = sample(Successor(), torch.tensor([3]), 6, generator=torch.Generator().manual_seed(0))
    assert out.tolist() == [4, 5, 6, 0, 1, 2]  # p = 1 - 6 e^-20: the same with sampling


def test_temperature_sharpens_or_flattens_the_distribution():
    z = torch.tensor([0.0, 1.0, 2.0])
    n = 4000
    for T in (0.5, 1.0, 2.0):
        draws = sample(Fixed(z), torch.tensor([0]), n, temperature=T,
                       generator=torch.Generator().manual_seed(0))  # fmt: skip
        share = torch.bincount(draws, minlength=3).double() / n
        p = torch.softmax(z.double() / T, dim=0)
        assert torch.all((share - p).abs() < 4 * torch.sqrt(p * (1 - p) / n))  # 4 sigma
    assert sample(Fixed(z), torch.tensor([0]), 5, temperature=0).tolist() == [2] * 5


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(n=0), "n must be a positive integer, got 0"),
        (dict(temperature=-1.0), "temperature must be a finite number >= 0, got -1.0"),
        (dict(temperature=math.nan), "temperature must be a finite number >= 0, got nan"),
        (dict(prompt=torch.tensor([], dtype=torch.long)), r"non-empty 1-d tensor .* got \(0,\)"),
        (
            dict(prompt=torch.zeros(1, 2, dtype=torch.long)),
            r"1-d tensor of ids \(L,\), got \(1, 2\)",
        ),
        (dict(prompt=torch.zeros(2)), "prompt must hold integer ids, got torch.float32"),
    ],
)
def test_sample_rejects_bad_arguments(kwargs, match):
    args = dict(prompt=torch.tensor([0]), n=3) | kwargs
    with pytest.raises(ValueError, match=match):
        sample(Fixed([0.0, 1.0]), args.pop("prompt"), args.pop("n"), **args)
