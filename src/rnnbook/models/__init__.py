"""Models, one module per family; ``recurrent`` holds the time loop they share."""

from rnnbook.models.clockwork import CWLSTM, CWRNN, ClockworkLM
from rnnbook.models.gru import GRUCell
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
from rnnbook.models.srn import SRN, SRNCell, math_parameters

__all__ = [
    "CWLSTM",
    "CWRNN",
    "ClockworkLM",
    "DCMCell",
    "DelayNetwork",
    "GRUCell",
    "LMUCell",
    "LSTMCell",
    "LanguageModel",
    "LeakySRN",
    "NTM",
    "NTMCell",
    "NTMState",
    "ParallelLMU",
    "RPN",
    "Recurrent",
    "RecurrentModel",
    "SCRN",
    "SRN",
    "SRNCell",
    "StackedLSTM",
    "count_parameters",
    "hidden_of",
    "math_parameters",
    "record_gates",
    "torch_lstm",
    "unroll",
]
