"""Chapter 4: the parallel LMU's memory as a lower-triangular Toeplitz matrix."""

from __future__ import annotations

from .canvas import (
    ACCENT,
    BLUE,
    GREEN,
    GREY,
    INK,
    ORANGE,
    PINK,
    SIZE,
    SKY,
    SMALL,
    VERMILLION,
    Canvas,
    Diagram,
)

TOP = 70  # the top of the matrix and of the two vectors
MATRIX_X = 124  # the left edge of the matrix
DIAGONAL_COLOURS = [BLUE, VERMILLION, GREEN, PINK, ORANGE, SKY, GREY, BLUE]

TITLE = "The LMU's memory as a causal convolution: a lower-triangular Toeplitz matrix"
# The notes right of the matrix: (text, size, colour); an empty text is a gap.
NOTES = [
    ("m_t = Σ_{j≤t} Ā^{t−j} B̄ u_j", SIZE, INK),
    ("", SMALL, INK),
    ("the same block along each diagonal:", SMALL, INK),
    ("a Toeplitz matrix", SMALL, INK),
    ("zeros above the diagonal: causal,", SMALL, INK),
    ("m_t sees u_1, …, u_t only", SMALL, INK),
    ("", SMALL, INK),
    ("= a causal convolution of u", 15, ACCENT),
    ("with the impulse response H,", 15, ACCENT),
    ("computed by FFT", 15, ACCENT),
    ("in O(n log n · d), padded to 2n", SMALL, INK),
    ("", SMALL, INK),
    ("the last row alone gives m_n:", SMALL, INK),
    ("H applied to u read backwards", SMALL, INK),
]


def lmu_toeplitz(n: int = 6) -> Diagram:
    """The parallel LMU's memory as a lower-triangular Toeplitz matrix times the input.

    Stacking {eq}`lmu-solution`, ``m_t = Σ_{j≤t} Ā^{t−j} B̄ u_j``, for t = 1..n gives a
    block matrix whose entry (t, j) is ``Ā^{t−j} B̄ = H_{:,t−j+1}``: constant along each
    diagonal (Toeplitz) and zero above it (causal). Multiplying by it is a causal
    convolution of ``u`` with the impulse response ``H``, which the FFT evaluates in
    ``O(n log n d)`` ({eq}`lmu-modes`).

    Args:
        n: the number of steps drawn, 3 to 8.
    """
    if isinstance(n, bool) or not isinstance(n, int) or not 3 <= n <= 8:
        raise ValueError(f"n must be an integer from 3 to 8 (steps drawn), not {n!r}")
    c = Canvas("lmu-toeplitz", 860, 440)
    cell_w, cell_h = 312 / n, 270 / n
    _vector(c, 20, "m", "memory", n, cell_h)
    c.text(100, TOP + n * cell_h / 2, "=", size=26)
    _matrix(c, n, cell_w, cell_h)
    xu = MATRIX_X + n * cell_w + 40
    c.text(xu - 20, TOP + n * cell_h / 2, "×", size=24)
    _vector(c, xu, "u", "input", n, cell_h)
    _notes(c, xu + 84)
    c.text(
        20,
        424,
        f"n = {n} steps of one channel shown; each entry B̄, ĀB̄, … is a d-vector",
        size=SMALL,
        anchor="start",
        italic=True,
    )
    return c.finish(TITLE, _description(n))


def _vector(c: Canvas, x: float, name: str, label: str, n: int, cell_h: float) -> None:
    """A column of n entries name_1 … name_n, with its label above."""
    c.rect(x, TOP, 56, n * cell_h, colour=INK, radius=4)
    for t in range(1, n):
        c.line([(x, TOP + t * cell_h), (x + 56, TOP + t * cell_h)], width=1)
    for t in range(1, n + 1):
        c.text(x + 28, TOP + (t - 0.5) * cell_h, f"{name}_{{{t}}}", size=15)
    c.text(x + 28, TOP - 22, label, size=SMALL)


def _matrix(c: Canvas, n: int, cell_w: float, cell_h: float) -> None:
    """Entry (t, j) = Ā^{t−j} B̄ below the diagonal, one colour per diagonal, 0 above."""
    for t in range(1, n + 1):
        for j in range(1, t + 1):
            k = t - j
            x, y = MATRIX_X + (j - 1) * cell_w, TOP + (t - 1) * cell_h
            colour = DIAGONAL_COLOURS[k]
            c.rect(x, y, cell_w, cell_h, colour="none", fill=colour, opacity=0.16, radius=0)
            power = {0: "", 1: "Ā"}.get(k, f"Ā^{{{k}}}")
            c.text(x + cell_w / 2, y + cell_h / 2, f"{power}B̄", size=14)
    width, height = n * cell_w, n * cell_h
    c.rect(MATRIX_X, TOP, width, height, colour=INK, radius=2)
    c.text(MATRIX_X + width * 0.72, TOP + height * 0.3, "0", size=30)
    c.text(MATRIX_X + width / 2, TOP - 22, "entry (t, j) = Ā^{t−j} B̄ = H_{:,t−j+1}", size=SMALL)
    # Each diagonal is one column of the impulse response H; name them under the last row.
    for k in range(n):
        j = n - k
        x = MATRIX_X + (j - 0.5) * cell_w
        c.text(x, TOP + height + 16, f"H_{{:,{k + 1}}}", size=SMALL)
    c.text(
        MATRIX_X + width / 2, TOP + height + 46, "diagonal k holds H_{:,k+1} = Ā^k B̄", size=SMALL
    )


def _notes(c: Canvas, x: float) -> None:
    """The notes right of the input vector, one line each."""
    y = TOP + 6
    for text, size, colour in NOTES:
        if text:
            c.text(x, y, text, colour=colour, size=size, anchor="start")
        y += size + 7 if text else 10


def _description(n: int) -> str:
    return (
        f"The memories m_1 to m_{n}, stacked as a column, equal a {n}-by-{n} lower-triangular "
        f"matrix times the column of inputs u_1 to u_{n}. Entry (t, j) of the matrix is Ā "
        f"to the power t−j times B̄, which is column t−j+1 of the impulse response H: B̄ on "
        f"the main diagonal, ĀB̄ on the first diagonal below it, Ā²B̄ on the second, and so "
        f"on, each diagonal in its own colour and constant along its length, so the matrix "
        f"is Toeplitz. Above the diagonal every entry is zero, so m_t depends only on "
        f"u_1 to u_t: the product is a causal convolution of the input with H, which the "
        f"FFT computes in O(n log n · d) time after zero-padding to length 2n. The last row "
        f"alone gives the final memory m_n: H applied to the input read backwards."
    )
