"""Chapter 8: HAN-ptr, the hierarchical attention reader with its pointer read-out."""

from __future__ import annotations

from .canvas import ACCENT, BLUE, INK, SMALL, Canvas, Diagram

# Rows, from the top: the pointer, the sentence level, the word level, the words.
Y_PTR, Y_SENT, Y_S, Y_BLEND = 60, 212, 268, 324
Y_WORD, Y_W, Y_X = 432, 490, 552
Y_CAPTION = Y_X + 34
RNN = BLUE  # the bidirectional GRUs
PITCH, WORD_W, WORD_H = 46, 40, 30
BAR_WORD, BAR_SENT = 40, 44  # the height of an attention weight of 1
X_DOC, X_MID, X_RIGHT = 138, 335, 560  # the document's columns
X_Q = 700  # the query's column
Y_WIRE = Y_WORD - 24  # the word attention's wire to the pointer
# Sentence 1 and sentence S: the centre, the index, the word attention, the sentence attention
# (made-up weights).
SENTENCES = [(205, "1", [0.12, 0.22, 0.46], 0.14), (465, "S", [0.78, 0.08, 0.1], 0.74)]

TITLE = "HAN-ptr: the hierarchical attention reader with a pointer read-out"
DESCRIPTION = (
    "A layered diagram read from bottom to top. At the bottom left is the document, "
    "sentences 1 to S, of which sentence 1 and sentence S are drawn and the ones "
    "between are dots; each sentence is a row of word boxes x_(i,1), x_(i,2), …, "
    "x_(i,W). Above each sentence, a word biGRU, biGRU_w, with the same weights for "
    "every sentence, turns the words into vectors D^word_(i,j). On each vector sits a "
    "bar in an accent colour, its word attention α^word_(i,j), a softmax over the "
    "sentence of the scores q^T D^word_(i,j); arrows from the vectors converge on "
    "the blend D^blend_i, their sum weighted by the bars. A sentence biGRU, biGRU_s, "
    "reads the blends of all sentences and gives D^sent_i, on which sits the sentence "
    "attention α^sent_i, a softmax over sentences of q^T D^sent_i. At the bottom right "
    "is the query, xxxxx rel3 obj5, whose blank xxxxx stands for the answer; a query "
    "biGRU, biGRU_q, reads it and its final states make the query vector q, from which "
    "accent-coloured arrows go to the word attention and to the sentence attention. "
    "At the top, thick accent-coloured arrows bring both attentions into the pointer: "
    "α^doc_(i,j) = α^sent_i α^word_(i,j) is one attention over every token of the "
    "document, and P(c_k), the sum of α^doc_(i,j) over the positions where the "
    "candidate c_k occurs, leaves on the right. The pointer has no parameters. In the "
    "example bars, sentence S gets most of the sentence attention and its first word "
    "most of its word attention."
)


def han_reader() -> Diagram:
    """HAN-ptr: the hierarchical attention reader with its pointer read-out.

    Bottom to top: the words ``x_{i,j}`` of each sentence, read by one word biGRU (the same
    weights for every sentence) into ``D^{word}_{i,j}``; word attention with the query
    vector ``q`` ({eq}`han-word-attention`) and the blend ``D^{blend}_i`` ({eq}`han-blend`);
    the sentence biGRU and sentence attention ({eq}`han-sentence`); and the pointer
    ``α^{doc}_{i,j} = α^{sent}_i α^{word}_{i,j}``, summed over each candidate's positions
    into ``P(c_k)`` ({eq}`han-pointer`), which has no parameters. Right: the query biGRU
    whose final states make ``q``. The attention and pointer path is in the accent colour.
    """
    c = Canvas("han-reader", 820, 670)
    _row_labels(c)
    for cx, i, weights, weight_sent in SENTENCES:
        _sentence(c, cx, i, weights, weight_sent)
    for y in (Y_X, Y_W, Y_WORD, Y_BLEND, Y_SENT):
        c.text(X_MID, y, "⋯")
    c.box(X_MID, Y_S, 2 * (X_MID - X_DOC + 6), 34, "biGRU_s", colour=RNN)
    _pointer(c)
    _query(c)
    c.text(
        X_MID,
        Y_CAPTION + 26,
        "one word biGRU_w: the same weights read every sentence",
        size=SMALL,
        italic=True,
    )
    _legend(c)
    return c.finish(TITLE, DESCRIPTION)


def _row_labels(c: Canvas) -> None:
    """The rows' symbols on the left, in the chapter's notation."""
    rows = [
        (Y_PTR, "pointer", ACCENT),
        (Y_SENT - 36, "α^{sent}_i", ACCENT),
        (Y_SENT, "D^{sent}_i", INK),
        (Y_BLEND, "D^{blend}_i", INK),
        (Y_WORD - 30, "α^{word}_{i,j}", ACCENT),
        (Y_WORD, "D^{word}_{i,j}", INK),
        (Y_X, "x_{i,j}", INK),
    ]
    for y, label, colour in rows:
        c.text(104, y, label, colour=colour, anchor="end")


def _sentence(c: Canvas, cx: float, i: str, weights: list[float], weight_sent: float) -> None:
    """Sentence i from its words up to its sentence vector and sentence attention."""
    slots = [cx + (k - 1.5) * PITCH for k in range(4)]  # words 1, 2, …, W
    y_fan = Y_WORD - 14 - BAR_WORD - 4  # the blend's arrows start above the bars
    for x, j, weight in zip([slots[0], slots[1], slots[3]], "12W", weights):
        c.box(x, Y_X, WORD_W, WORD_H, f"x_{{{i},{j}}}", size=SMALL, tint=0.0)
        c.arrow([(x, Y_X - WORD_H / 2), (x, Y_W + 16)])
        c.arrow([(x, Y_W - 16), (x, Y_WORD + 12)])
        c.rect(x - 15, Y_WORD - 12, 30, 24, colour=INK, radius=3)
        # α^{word}_{i,j}: a bar on each word's vector.  (han-word-attention)
        h = max(2.0, BAR_WORD * weight)
        c.rect(x - 9, Y_WORD - 14 - h, 18, h, colour="none", fill=ACCENT, radius=1)
        # The blend: the vectors' sum, weighted by the bars.  (han-blend)
        c.arrow([(x, y_fan), (cx, Y_BLEND + 15)], width=1.2)
    for y in (Y_X, Y_WORD):
        c.text(slots[2], y, "⋯")
    c.box(cx, Y_W, 4 * PITCH - 6, 32, "biGRU_w", colour=RNN)
    c.text(cx, Y_CAPTION, f"sentence {i}", size=SMALL, italic=True)
    c.box(cx, Y_BLEND, 96, 30, f"D^{{blend}}_{{{i}}}", size=SMALL, tint=0.0)
    c.arrow([(cx, Y_BLEND - 15), (cx, Y_S + 17)])
    c.arrow([(cx, Y_S - 17), (cx, Y_SENT + 15)])
    c.box(cx, Y_SENT, 96, 30, f"D^{{sent}}_{{{i}}}", size=SMALL, tint=0.0)
    # α^{sent}_i: one bar per sentence, and on to the pointer.  (han-sentence)
    h = BAR_SENT * weight_sent
    c.rect(cx - 14, Y_SENT - 17 - h, 28, h, colour="none", fill=ACCENT, radius=1)
    c.arrow([(cx, Y_SENT - 21 - BAR_SENT), (cx, Y_PTR + 43)], colour=ACCENT, width=3)


def _pointer(c: Canvas) -> None:
    """The pointer: no parameters, a lookup of token identities.  (han-pointer)"""
    # α^{word}_{i,j} reaches the pointer along the left.
    x_wire = 116
    c.line(
        [(205 - 1.5 * PITCH - 13, Y_WIRE), (x_wire, Y_WIRE), (x_wire, Y_PTR)],
        colour=ACCENT,
        width=3,
    )
    c.arrow([(x_wire, Y_PTR), (X_DOC, Y_PTR)], colour=ACCENT, width=3)
    x_box = (X_DOC + X_RIGHT) / 2
    c.box(x_box, Y_PTR, X_RIGHT - X_DOC, 84, "", colour=ACCENT, tint=0.1)
    c.text(x_box, Y_PTR - 24, "α^{doc}_{i,j} = α^{sent}_i α^{word}_{i,j}")
    c.text(x_box, Y_PTR + 1, "P(c_k) = Σ α^{doc}_{i,j}")
    c.text(x_box, Y_PTR + 25, "over the positions (i, j) where D_{i,j} = c_k", size=SMALL)
    c.arrow([(X_RIGHT, Y_PTR), (700, Y_PTR)], colour=ACCENT, width=3)
    c.text(708, Y_PTR, "P(c_k)", anchor="start")
    c.text(630, Y_PTR + 22, "no parameters", colour=ACCENT, size=SMALL, italic=True)


def _query(c: Canvas) -> None:
    """The query on the right: its biGRU's final states make q, which scores q^⊤ D."""
    for x, word in ((640, "xxxxx"), (700, "rel3"), (760, "obj5")):
        c.box(x, Y_X, 56, WORD_H, word, size=SMALL, tint=0.0)
        c.arrow([(x, Y_X - WORD_H / 2), (x, Y_W + 16)])
    c.text(X_Q, Y_CAPTION, "query", size=SMALL, italic=True)
    c.box(X_Q, Y_W, 176, 32, "biGRU_q", colour=RNN)
    c.arrow([(X_Q, Y_W - 16), (X_Q, Y_WORD + 14)])
    c.box(X_Q, Y_WORD, 44, 28, "q", tint=0.0)
    c.text(X_Q + 30, Y_WORD, "final states", size=SMALL, anchor="start")
    # q scores the words and the sentences: q^⊤ D.
    x_last = 465 + 1.5 * PITCH + 9  # the right edge of sentence S's last bar
    c.arrow([(X_Q - 22, Y_WORD), (618, Y_WORD), (618, Y_WIRE), (x_last + 4, Y_WIRE)], colour=ACCENT)
    c.text(588, Y_WIRE - 16, "q^⊤D^{word}_{i,j}", colour=ACCENT, size=SMALL)
    y_score = Y_SENT - 17 - BAR_SENT / 2
    c.arrow([(X_Q, Y_WORD - 14), (X_Q, y_score), (465 + 18, y_score)], colour=ACCENT)
    c.text(590, y_score - 16, "q^⊤D^{sent}_i", colour=ACCENT, size=SMALL)


def _legend(c: Canvas) -> None:
    y_key = 646
    c.box(150, y_key, 40, 22, "", colour=RNN)
    c.text(178, y_key, "bidirectional GRU", size=SMALL, anchor="start")
    c.rect(370, y_key + 10 - 22, 12, 22, colour="none", fill=ACCENT, radius=1)
    c.text(390, y_key, "attention weight", size=SMALL, anchor="start")
    c.line([(540, y_key), (576, y_key)], colour=ACCENT, width=3)
    c.text(586, y_key, "attention and pointer", size=SMALL, anchor="start")
