"""Models, one module per family; ``recurrent`` holds the time loop they share."""

from rnnbook.models.recurrent import hidden_of, unroll
from rnnbook.models.srn import SRN, SRNCell, math_parameters

__all__ = ["SRN", "SRNCell", "hidden_of", "math_parameters", "unroll"]
