"""Models, one module per family; ``recurrent`` holds the time loop they share."""

from rnnbook.models.abs import ABSHAN
from rnnbook.models.clockwork import CWLSTM, CWRNN, ClockworkLM
from rnnbook.models.dnc import DNC, DNCCell, DNCState
from rnnbook.models.gru import GRUCell
from rnnbook.models.han import HAN, RAN, BiGRU, ClozeOutput, cloze_loss, masked_softmax, pointer_sum
from rnnbook.models.language import LanguageModel
from rnnbook.models.lmu import DelayNetwork, LMUCell, ParallelLMU
from rnnbook.models.lstm import DCMCell, LSTMCell, StackedLSTM, record_gates, torch_lstm
from rnnbook.models.multiscale import RPN, SCRN, LeakySRN
from rnnbook.models.ntm import NTM, NTMCell, NTMState
from rnnbook.models.recurrent import (
    Recurrent,
    RecurrentModel,
    count_parameters,
    hidden_of,
    unroll,
)
from rnnbook.models.sba import SBAGRUCell
from rnnbook.models.srn import SRN, SRNCell, math_parameters

__all__ = [
    "ABSHAN",
    "BiGRU",
    "CWLSTM",
    "CWRNN",
    "ClockworkLM",
    "ClozeOutput",
    "DCMCell",
    "DNC",
    "DNCCell",
    "DNCState",
    "DelayNetwork",
    "GRUCell",
    "HAN",
    "LMUCell",
    "LSTMCell",
    "LanguageModel",
    "LeakySRN",
    "NTM",
    "NTMCell",
    "NTMState",
    "ParallelLMU",
    "RAN",
    "RPN",
    "Recurrent",
    "RecurrentModel",
    "SBAGRUCell",
    "SCRN",
    "SRN",
    "SRNCell",
    "StackedLSTM",
    "cloze_loss",
    "count_parameters",
    "hidden_of",
    "masked_softmax",
    "math_parameters",
    "pointer_sum",
    "record_gates",
    "torch_lstm",
    "unroll",
]
