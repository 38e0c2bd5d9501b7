"""A language model: token embedding, any recurrent core, a linear read-out over the vocabulary.

``z_t = W_hy h_t + b_y`` with ``h_t = core(E[w_t], h_{t-1})``: the word-level PTB model of
Zaremba et al. and the Part II chapters (one layer, embedding 100-128;
Chapters 5-7), and Karpathy's char-rnn when the tokens are characters. The state is an input
and an output of ``forward``, so a caller can carry it from one BPTT window to the next
(``rnnbook.train.fit_lm``) and sample one token at a time (``rnnbook.train.sample``).
"""

from __future__ import annotations

import torch
from torch import nn

from rnnbook._validate import check_positive_int, check_tensor
from rnnbook.models.recurrent import Recurrent, as_core


class LanguageModel(nn.Module):
    """Embedding -> recurrent core -> read-out: next-token logits at every step.

    Args:
        vocab_size: V, the number of tokens.
        core: one of the book's cells (``SRNCell``, ``LSTMCell``, ``GRUCell``, ...), looped by
            :class:`~rnnbook.models.recurrent.Recurrent`, or a batch-first one-layer
            ``nn.RNN``/``nn.LSTM``/``nn.GRU``. Its input size is the embedding size.
        tie_weights: share the embedding matrix with the read-out (Press & Wolf 2017; the
            SBA chapter's recipe); needs the core's hidden size to equal its input size.

    The embedding (and the read-out weight) start from U(-0.1, 0.1) and the read-out bias
    from 0, as in Zaremba et al.'s PTB models; the core keeps its own initialisation.

    ``forward(tokens, state=None)`` takes ids (B, L) and returns ``(logits, state_L)``:
    logits (B, L, V) before the softmax, and the core's final state in torch's form
    (``h`` (1, B, H), or ``(h, c)`` for an LSTM), which is also the form it accepts.
    """

    def __init__(self, vocab_size: int, core: nn.Module, tie_weights: bool = False):
        super().__init__()
        check_positive_int(vocab_size, "vocab_size")
        self.core = as_core(core)
        cell = self.cell
        d_e, H = cell.input_size, cell.hidden_size
        self.embedding = nn.Embedding(vocab_size, d_e)
        self.readout = nn.Linear(H, vocab_size)
        nn.init.uniform_(self.embedding.weight, -0.1, 0.1)
        nn.init.uniform_(self.readout.weight, -0.1, 0.1)
        nn.init.zeros_(self.readout.bias)
        if not isinstance(tie_weights, bool):
            raise TypeError(f"tie_weights must be True or False, got {tie_weights!r}")
        if tie_weights:
            if H != d_e:
                raise ValueError(
                    "tied weights need the hidden size to equal the embedding (input) size, "
                    f"got H = {H} and d_x = {d_e}"
                )
            self.readout.weight = self.embedding.weight  # (V, H), one matrix for both
        self.tie_weights = tie_weights

    @property
    def cell(self) -> nn.Module:
        """The book's cell, or the torch module, that computes the hidden states."""
        return self.core.cell if isinstance(self.core, Recurrent) else self.core

    @property
    def vocab_size(self) -> int:
        return self.embedding.num_embeddings

    def forward(self, tokens: torch.Tensor, state=None):
        check_tensor(tokens, "tokens", ndim=2)
        if tokens.dtype.is_floating_point or tokens.dtype.is_complex:
            raise ValueError(f"tokens must be integer ids (B, L), got {tokens.dtype}")
        h, state = self.core(self.embedding(tokens), state)  # (B, L, H)
        return self.readout(h), state  # (B, L, V)

    def extra_repr(self) -> str:
        return f"V={self.vocab_size}, tie_weights={self.tie_weights}"
