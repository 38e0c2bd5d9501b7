"""The Children's Book Test (Hill et al. 2016) as cloze questions: read, build, encode.

A CBT question is 20 consecutive sentences of a children's book (the context) and the 21st
with one word blanked out as ``XXXXX`` (the query); the answer is one of 10 candidates.
This module reads the question files, reads the raw books, builds CBT-style questions
from the books where the question files are not at hand (the offline mirror holds the 5
test books and one real question per file), and turns questions into the padded id
tensors that Chapter 8's readers take: ``doc`` (n, S, W), ``query`` (n, Lq), ``cands``
(n, K) and ``answer`` (n,), with 0 = PAD. Every file comes from the registry (``cbt-books``,
``cbt-samples`` and the full archive ``cbt``).
"""

from __future__ import annotations

import re
import tarfile
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from rnnbook._validate import check_choice, check_positive_int
from rnnbook.data.ptb import vocabulary
from rnnbook.data.registry import fetch

BLANK = "XXXXX"  # the placeholder of the removed word in the query
KINDS = ("NE", "CN")  # named entities, common nouns: the two subsets of Chapter 8
SPLITS = ("train", "valid_2000ex", "test_2500ex")
BOOK_HEADER = "_BOOK_TITLE_ : "
PAD, UNK = "<pad>", "<unk>"

# --- questions and their file format --------------------------------------------------------


@dataclass
class ClozeQuestion:
    """One cloze question: 20 context sentences, a query with a blank, 10 candidates.

    Attributes:
        context: the context sentences, each a list of tokens (20 in CBT).
        query: the 21st sentence's tokens with the removed word replaced by ``XXXXX``.
        answer: the removed word; one of ``candidates``.
        candidates: the words to choose from (10 in CBT), in the file's order.
    """

    context: list[list[str]]
    query: list[str]
    answer: str
    candidates: list[str]

    def filled_query(self) -> list[str]:
        """The query with the answer in place of the blank: the book's 21st sentence."""
        return [self.answer if token == BLANK else token for token in self.query]


def parse_questions(text: str, *, K: int = 10, source: str = "<text>") -> list[ClozeQuestion]:
    """The questions of a CBT question file's text.

    Each question is 21 numbered lines, ``1`` to ``21``, each a number, a space and a
    tokenised sentence. Line 21 is ``query TAB answer TAB TAB candidates``, the
    candidates joined by ``|``. A blank line ends every question (after the last one it
    may be missing).

    Args:
        text: the file's text.
        K: the number of candidates each question must have (10 in CBT).
        source: the file's name in error messages.

    Raises:
        ValueError: naming ``source`` and the line, for a line out of numbering, a
            missing blank line, a query without ``XXXXX``, a malformed line 21, a wrong
            number of candidates, repeated candidates, or an answer that is not a candidate.
    """
    check_positive_int(K, "K")
    questions: list[ClozeQuestion] = []
    context: list[list[str]] = []
    expect_blank = False
    for number, line in enumerate(text.splitlines(), start=1):
        where = f"{source}, line {number}"
        if expect_blank:
            if line.strip():
                raise ValueError(
                    f"{where}: expected the blank line that ends a question, got {line[:40]!r}"
                )
            expect_blank = False
            continue
        if not line.strip() and not context:
            continue  # extra blank lines between questions are harmless
        index, _, sentence = line.partition(" ")
        wanted = len(context) + 1
        if index != str(wanted):
            raise ValueError(
                f"{where}: expected line {wanted} of a question (the number {wanted}, a "
                f"space, a sentence), got {line[:40]!r}"
            )
        if wanted <= 20:
            context.append(sentence.split())
            continue
        questions.append(_parse_query_line(sentence, context, K, where))
        context, expect_blank = [], True
    if context:
        raise ValueError(
            f"{source}: the text ends inside a question, after its line {len(context)} of 21"
        )
    return questions


def _parse_query_line(line: str, context: list[list[str]], K: int, where: str) -> ClozeQuestion:
    """Line 21: ``query TAB answer TAB TAB candidates``."""
    fields = line.split("\t")
    if len(fields) != 4 or fields[2] != "":
        raise ValueError(
            f"{where}: line 21 must be 'query TAB answer TAB TAB candidates', "
            f"got {len(fields)} tab-separated fields"
        )
    query, answer, _, joined = fields
    query_tokens = query.split()
    if BLANK not in query_tokens:
        raise ValueError(f"{where}: the query has no blank {BLANK}")
    candidates = joined.split("|")
    if len(candidates) != K:
        raise ValueError(f"{where}: expected {K} candidates, got {len(candidates)}: {joined!r}")
    if len(set(candidates)) != K:
        raise ValueError(f"{where}: the candidates repeat a word: {joined!r}")
    if answer not in candidates:
        raise ValueError(f"{where}: the answer {answer!r} is not among the candidates {joined!r}")
    return ClozeQuestion(context, query_tokens, answer, candidates)


def read_questions(path: str | Path, *, K: int = 10) -> list[ClozeQuestion]:
    """The questions of a CBT question file (see :func:`parse_questions`)."""
    path = Path(path)
    return parse_questions(path.read_text(encoding="utf-8"), K=K, source=str(path))


def format_questions(questions: Iterable[ClozeQuestion]) -> str:
    """The text of a question file, in CBT's format; :func:`parse_questions` reads it back."""
    lines = []
    for q in questions:
        lines += [f"{i} {' '.join(sentence)}" for i, sentence in enumerate(q.context, start=1)]
        query = " ".join(q.query)
        lines += [f"{len(q.context) + 1} {query}\t{q.answer}\t\t{'|'.join(q.candidates)}", ""]
    return "\n".join(lines) + "\n" if lines else ""


# --- the raw books -----------------------------------------------------------------------------

Book = tuple[str, list[list[str]]]  # (title, sentences as token lists)


def read_books(path: str | Path) -> list[Book]:
    """The books of a raw CBT book file: ``(title, sentences)`` pairs, in file order.

    A line ``_BOOK_TITLE_ : <name>.txt.out`` starts a book (its title is ``<name>``); every
    other line is one tokenised sentence, tokens separated by spaces.
    """
    path = Path(path)
    books: list[Book] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.startswith(BOOK_HEADER):
            books.append((line[len(BOOK_HEADER) :].removesuffix(".txt.out"), []))
        elif not books:
            raise ValueError(f"{path}, line {number}: expected a {BOOK_HEADER!r} line first")
        elif line.strip():
            books[-1][1].append(line.split())
    return books


def load_books() -> list[Book]:
    """The 5 CBT test books (registry ``cbt-books``), the books of CBT's test questions."""
    return read_books(fetch("cbt-books") / "cbt_test.txt")


def load_sample(kind: str, split: str) -> ClozeQuestion:
    """The one real CBT question of ``kind`` (NE or CN) and ``split`` (registry
    ``cbt-samples``): a format fixture, not a benchmark."""
    check_choice(kind, "kind", KINDS)
    check_choice(split, "split", SPLITS)
    (question,) = read_questions(fetch("cbt-samples") / f"cbtest_{kind}_{split}.sample1.txt")
    return question


def read_archive_member(name: str) -> str:
    """The text of file ``name`` of the CBT archive (registry ``cbt``, 120 MB), for example
    ``cbtest_NE_train.txt`` or ``cbt_test.txt`` (the archive's ``CBTest/data/``).

    ``fetch`` has checked the archive's SHA-256 before ``tarfile`` opens it. Offline and
    without the archive in the cache or the mirror, this raises the registry's
    ``DataUnavailableError``.
    """
    archive = fetch("cbt") / "CBTest.tgz"
    member = f"CBTest/data/{name}"
    with tarfile.open(archive, "r:gz") as tar:
        try:
            file = tar.extractfile(member)
        except KeyError:
            raise ValueError(f"the CBT archive {archive} has no file {member}") from None
        if file is None:
            raise ValueError(f"{member} in the CBT archive {archive} is not a regular file")
        return file.read().decode("utf-8")


def load_questions(kind: str, split: str) -> list[ClozeQuestion]:
    """The real CBT questions of ``kind`` (NE or CN) and ``split`` from the archive
    (registry ``cbt``): 2,000 valid, 2,500 test, 120,769 (CN) or 108,719 (NE) train."""
    check_choice(kind, "kind", KINDS)
    check_choice(split, "split", SPLITS)
    name = f"cbtest_{kind}_{split}.txt"
    return parse_questions(read_archive_member(name), source=f"CBTest.tgz:{name}")


# --- building CBT-style questions from the books ----------------------------------------------

DETERMINERS = frozenset("the a an his her their my your its this that these those".split())
# Words that follow a determiner without being common nouns: adjectives, numbers, quantifiers,
# pronouns and function words ("that he", "the other").
CN_STOP_WORDS = frozenset(
    """
    the a an his her their my your its this that these those our whose which what
    i me he him she it we us they them you who whom one two three four five six first second
    last next other another same own such only very more most much many few little all any
    some every each no not both either neither whole half
    old young new good bad great big small large long short high poor dear best
    least is was were be been are am had has have do did does will would could should shall
    may might must can of to in on at by for with from as and or but if so than then when
    while where there here into upon over under about after before up down out off again
    """.split()
)
_CAPITALISED = re.compile(r"[A-Z][A-Za-z'-]*[a-z][A-Za-z'-]*")  # Polly, McGregor; not SAHIB, I
_LOWER_WORD = re.compile(r"[a-z][a-z'-]*[a-z]")  # dog, lumber-room; not a, ', p9.jpg
_WORD = re.compile(r"[A-Za-z0-9]")


def kind_words(sentences: Sequence[Sequence[str]], kind: str) -> frozenset[str]:
    """The words of a book that count as named entities (NE) or common nouns (CN).

    CBT tagged words with Stanford CoreNLP's POS and NE taggers; we have neither, so the
    kinds are transparent heuristics over the whole book, counted per word:

    * **NE**: a capitalised word (a capital and at least one lower-case letter, so neither
      ``I`` nor an all-capitals heading) seen capitalised in mid-sentence, right after a
      token holding a letter or digit, at least once and at least as often as the book
      writes it in lower case. Words capitalised only at the start of a sentence or after
      a quote mark are not names, and neither is "The" after a run-on heading.
    * **CN**: a lower-case word of two or more letters that is not in ``CN_STOP_WORDS``
      (adjectives, numbers, pronouns and function words) and follows a determiner (the a
      an his her their my your its this that these those, in any case) in at least a
      quarter of its occurrences: "came" after a relative "that" does not qualify.

    Every occurrence of such a word then counts as one of the kind. Both are cruder than
    the taggers: some adjectives pass as nouns, and a common word used as a character's
    name ("Old Mr. Toad") passes as a name, as it often does in CBT's NE files.
    """
    check_choice(kind, "kind", KINDS)
    total = Counter(token for sentence in sentences for token in sentence)
    hits: Counter[str] = Counter()  # mid-sentence capitals (NE) or words after determiners (CN)
    for sentence in sentences:
        for previous, token in zip(sentence, sentence[1:]):
            if kind == "NE" and _CAPITALISED.fullmatch(token) and _WORD.search(previous):
                hits[token] += 1
            elif kind == "CN" and previous.lower() in DETERMINERS and _LOWER_WORD.fullmatch(token):
                hits[token] += token not in CN_STOP_WORDS
    if kind == "NE":
        return frozenset(w for w, count in hits.items() if count >= max(1, total[w.lower()]))
    return frozenset(w for w, count in hits.items() if count >= max(1, 0.25 * total[w]))


def build_questions(
    books: Sequence[Book], kind: str, n: int, seed: int, *, S: int = 20, K: int = 10
) -> list[ClozeQuestion]:
    """``n`` CBT-style questions of ``kind`` (NE or CN) built from ``books``.

    Follows CBT's construction (Hill et al. 2016) with the word kinds of :func:`kind_words`
    in place of the taggers:

    1. take S + 1 = 21 consecutive sentences of one book: S context sentences and a query;
    2. the answer is a word of the kind that occurs exactly once in the query and at least
       once in the context (the pointer models of Chapter 8 can only point at words of the
       context), and it is replaced by ``XXXXX``;
    3. the K = 10 candidates are the answer and K - 1 other distinct words of the kind
       drawn uniformly from the context and the query, sorted as in CBT's files.

    Windows are drawn uniformly without replacement from all windows of all books, skipping
    those with no eligible answer or fewer than K words of the kind; the answer and the
    other candidates are uniform. Deterministic given ``seed`` (a NumPy ``Generator``).

    Raises:
        ValueError: when the books have fewer than ``n`` usable windows.

    Note:
        Requiring all K candidates to be of the kind is stricter than CBT's files: the real
        NE samples fill their lists with other words of the context (days, first, morning).
        With the defaults the 5 test books give 1,151 NE and 6,637 CN questions at most.
    """
    check_choice(kind, "kind", KINDS)
    for value, name in ((n, "n"), (S, "S"), (K, "K")):
        check_positive_int(value, name)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise ValueError(f"seed must be an integer (the questions are always seeded), got {seed!r}")
    if K < 2:
        raise ValueError(f"a question needs K >= 2 candidates, got K={K}")
    rng = np.random.default_rng(seed)
    kinds = [kind_words(sentences, kind) for _, sentences in books]
    windows = [(b, i) for b, (_, s) in enumerate(books) for i in range(len(s) - S)]
    questions = []
    for w in rng.permutation(len(windows)):
        b, start = windows[w]
        question = _question(books[b][1][start : start + S + 1], kinds[b], K, rng)
        if question is not None:
            questions.append(question)
            if len(questions) == n:
                return questions
    raise ValueError(
        f"the books have only {len(questions)} windows of {S + 1} sentences that make a "
        f"{kind} question with {K} candidates; asked for n={n}"
    )


def _question(
    window: list[list[str]], words: frozenset[str], K: int, rng: np.random.Generator
) -> ClozeQuestion | None:
    """The question of one window (context sentences, then the query), or None."""
    *context, sentence = window
    in_context = {t for s in context for t in s if t in words}
    counts = Counter(sentence)
    positions = [i for i, t in enumerate(sentence) if t in in_context and counts[t] == 1]
    pool = sorted(in_context | {t for t in sentence if t in words})
    if not positions or len(pool) < K:
        return None
    position = positions[rng.integers(len(positions))]
    answer = sentence[position]
    others = [t for t in pool if t != answer]
    chosen = [others[i] for i in rng.choice(len(others), size=K - 1, replace=False)]
    query = [*sentence[:position], BLANK, *sentence[position + 1 :]]
    return ClozeQuestion([list(s) for s in context], query, answer, sorted([answer, *chosen]))


# --- ids for the models ------------------------------------------------------------------------


class Vocab:
    """Token ids for cloze questions: ``<pad>`` is 0, ``<unk>`` takes every unknown word.

    Args:
        tokens: ``tokens[i]`` is the token of id i; the first is ``<pad>``, and ``<unk>``
            is one of them.
        lower: whether words are lower-cased before lookup (GloVe-6B is uncased).
    """

    def __init__(self, tokens: Sequence[str], lower: bool = True):
        self.tokens, self.lower = list(tokens), lower
        if self.tokens[:1] != [PAD] or UNK not in self.tokens:
            raise ValueError(f"a Vocab starts with {PAD} (id 0) and holds {UNK}")
        self._index = {t: i for i, t in enumerate(self.tokens)}
        if len(self._index) != len(self.tokens):
            raise ValueError("the vocabulary must not repeat a token")

    @classmethod
    def build(
        cls, questions: Iterable[ClozeQuestion], size: int | None = None, lower: bool = True
    ) -> Vocab:
        """The vocabulary of every word of ``questions``: contexts, queries, candidates.

        ``<pad>`` first, then the words most frequent first (ties in order of first
        occurrence, as ``rnnbook.data.ptb.vocabulary``), ``<unk>`` last; ``size`` counts
        all of them. Build it over train, valid and test together, so that no word of the
        evaluation splits is ``<unk>``; the frozen word vectors learn nothing from them.
        """
        if size is not None and (check_positive_int(size, "size") < 3):
            raise ValueError(f"size must leave room for {PAD}, {UNK} and a word, got {size}")
        words = []
        for q in questions:
            for tokens in (*q.context, q.query, q.candidates):
                words += [t.lower() for t in tokens] if lower else tokens
        if PAD in words or UNK in words:
            raise ValueError(f"the questions use {PAD} or {UNK} as a word")
        return cls((PAD, *vocabulary(words, None if size is None else size - 1, UNK)), lower)

    def __len__(self) -> int:
        return len(self.tokens)

    def id(self, token: str) -> int:
        """The id of ``token`` (that of ``<unk>`` when it is not in the vocabulary)."""
        return self._index.get(token.lower() if self.lower else token, self._index[UNK])

    def encode(self, tokens: Sequence[str]) -> list[int]:
        """The ids of ``tokens``."""
        return [self.id(t) for t in tokens]


@dataclass(frozen=True, eq=False)  # tensors: compare them with torch.equal
class ClozeTensors:
    """Questions as padded int64 ids (0 = PAD), the inputs of Chapter 8's readers.

    Attributes:
        doc: (n, S, W) the context sentences, sentence s of question i in ``doc[i, s]``.
        query: (n, Lq) the query; the blank is the token ``xxxxx`` (``XXXXX`` unlowered).
        cands: (n, K) the candidates' ids.
        answer: (n,) the index of the answer among the candidates, in [0, K).
    """

    doc: torch.Tensor
    query: torch.Tensor
    cands: torch.Tensor
    answer: torch.Tensor


def encode_questions(
    questions: Sequence[ClozeQuestion],
    vocab: Vocab,
    S: int = 20,
    W: int | None = None,
    Lq: int | None = None,
) -> ClozeTensors:
    """Encode questions as the padded id tensors ``doc``, ``query``, ``cands``, ``answer``.

    Args:
        questions: n questions with K candidates each (the same K for all).
        vocab: the ids; a word outside it becomes ``<unk>``.
        S: sentences per document. A question with more keeps its last S (those next to
            the query); one with fewer gets empty (all-PAD) sentences at the end.
        W: words per sentence; ``None``: the longest sentence. Longer ones are cut at W
            (the dissertation uses W = 100), which may cut an occurrence of the answer.
        Lq: query length; ``None``: the longest query. A query whose blank would be cut
            is an error.

    Raises:
        ValueError: for no questions, a bad S, W or Lq, questions with different numbers
            of candidates, a candidate outside the vocabulary, or a blank beyond Lq.

    Note:
        Lower-casing can make two candidates one id ("Rose" and "rose"); a pointer model
        then gives them the same probability. ``answer`` indexes the candidate list.
    """
    check_positive_int(S, "S")
    if W is not None:
        check_positive_int(W, "W")
    if Lq is not None:
        check_positive_int(Lq, "Lq")
    if not questions:
        raise ValueError("encode_questions needs at least one question")
    K = len(questions[0].candidates)
    W = W or max((len(s) for q in questions for s in q.context), default=1)
    Lq = Lq or max(len(q.query) for q in questions)
    n, unknown = len(questions), vocab.id(UNK)
    doc = torch.zeros(n, S, W, dtype=torch.long)  # (n, S, W), 0 = PAD
    query = torch.zeros(n, Lq, dtype=torch.long)  # (n, Lq)
    cands = torch.zeros(n, K, dtype=torch.long)  # (n, K)
    answer = torch.zeros(n, dtype=torch.long)  # (n,)
    for i, q in enumerate(questions):
        if len(q.candidates) != K:
            raise ValueError(f"question {i} has {len(q.candidates)} candidates, question 0 has {K}")
        for s, sentence in enumerate(q.context[-S:]):
            ids = vocab.encode(sentence[:W])
            doc[i, s, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        if BLANK not in q.query[:Lq]:
            raise ValueError(f"question {i}: Lq={Lq} cuts the blank {BLANK} off the query")
        query[i, : min(len(q.query), Lq)] = torch.tensor(vocab.encode(q.query[:Lq]))
        ids = vocab.encode(q.candidates)
        if unknown in ids:
            missing = q.candidates[ids.index(unknown)]
            raise ValueError(f"question {i}: the candidate {missing!r} is not in the vocabulary")
        cands[i] = torch.tensor(ids)
        answer[i] = q.candidates.index(q.answer)
    return ClozeTensors(doc, query, cands, answer)
