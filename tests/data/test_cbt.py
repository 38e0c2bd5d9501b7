"""rnnbook.data.cbt and the CBT registrations: the real samples and books of the mirror,
the question format, CBT-style questions built from the books, and ids for the models.

The conftest points RNNBOOK_DATA_DIR into ``tmp_path`` and clears the other variables; the
tests that read the mirror set RNNBOOK_DATA_MIRROR and RNNBOOK_OFFLINE=1 themselves.
"""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
from pathlib import Path

import pytest
import torch

from rnnbook.data import REGISTRY, Dataset, DataUnavailableError, RemoteFile, fetch
from rnnbook.data.cbt import (
    BLANK,
    KINDS,
    PAD,
    SPLITS,
    UNK,
    ClozeQuestion,
    Vocab,
    build_questions,
    encode_questions,
    format_questions,
    kind_words,
    load_books,
    load_questions,
    load_sample,
    parse_questions,
    read_books,
    read_questions,
)
from rnnbook.data.registry import MIRROR_ENV_VAR, OFFLINE_ENV_VAR, sha256_of

SAMPLES = [(kind, split) for kind in KINDS for split in SPLITS]


@pytest.fixture
def cbt_mirror(mirror, monkeypatch) -> Path:
    """The offline mirror, announced, with downloads forbidden."""
    if not (mirror / "cbt").is_dir():
        pytest.skip(f"the offline mirror at {mirror} has no cbt/ folder")
    monkeypatch.setenv(MIRROR_ENV_VAR, str(mirror))
    monkeypatch.setenv(OFFLINE_ENV_VAR, "1")
    return mirror / "cbt"


@pytest.fixture
def books(cbt_mirror):
    return load_books()


@pytest.fixture
def sample_text(cbt_mirror) -> str:
    return (fetch("cbt-samples") / "cbtest_CN_valid_2000ex.sample1.txt").read_text()


def _find_window(books, context, sentence) -> list[tuple[str, int]]:
    """Where ``context`` occurs as consecutive sentences followed by ``sentence``."""
    return [
        (title, i)
        for title, sentences in books
        for i in range(len(sentences) - len(context))
        if sentences[i] == context[0]  # a quick filter before comparing 21 sentences
        and sentences[i : i + len(context)] == context
        and sentences[i + len(context)] == sentence
    ]


# --- registrations ---------------------------------------------------------------------------


def test_cbt_books_come_from_the_mirror_verified(cbt_mirror):
    folder = fetch("cbt-books")
    assert sha256_of(folder / "cbt_test.txt") == REGISTRY["cbt-books"].files[0].sha256
    assert sorted(p.name for p in folder.iterdir()) == ["cbt_test.txt"]


def test_cbt_samples_come_from_the_mirror_unzipped(cbt_mirror):
    folder = fetch("cbt-samples")
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        f"cbtest_{kind}_{split}.sample1.txt" for kind, split in SAMPLES
    )
    for kind, split in SAMPLES:  # plain copies of samples/<file>
        name = f"cbtest_{kind}_{split}.sample1.txt"
        assert (folder / name).read_bytes() == (cbt_mirror / "samples" / name).read_bytes()


def test_cbt_archive_offline_is_unavailable_and_says_where_to_put_it(cbt_mirror):
    with pytest.raises(DataUnavailableError) as info:
        fetch("cbt")
    message = str(info.value)
    assert "http://www.thespermwhale.com/jaseweston/babi/CBTest.tgz" in message
    assert "has no cbt/CBTest.tgz" in message
    with pytest.raises(DataUnavailableError):
        load_questions("NE", "test_2500ex")


def test_cbt_registrations_record_the_readme_checksums():
    assert REGISTRY["cbt-books"].files[0].sha256.startswith("0d6896ce")
    assert REGISTRY["cbt"].files[0].sha256 == (
        "932df0cadc1337b2a12b4c696b1041c1d1c6d4b6bd319874c6288f02e4a61e92"
    )
    assert len(REGISTRY["cbt-samples"].files) == 6
    assert {
        d.mirror_folder for d in (REGISTRY[n] for n in ("cbt", "cbt-books", "cbt-samples"))
    } == {"cbt"}


def test_mirror_folder_lets_datasets_share_a_folder(tmp_path, monkeypatch):
    payload = b"shared folder\n"
    (tmp_path / "mirror" / "shared" / "sub").mkdir(parents=True)
    (tmp_path / "mirror" / "shared" / "sub" / "f.txt").write_bytes(payload)
    monkeypatch.setenv(MIRROR_ENV_VAR, str(tmp_path / "mirror"))
    monkeypatch.setenv(OFFLINE_ENV_VAR, "1")
    sha = hashlib.sha256(payload).hexdigest()
    for name, mirror_name in (("rnnbook-unit-a", "sub/f.txt"), ("rnnbook-unit-b", "sub/g.txt")):
        file = RemoteFile("f.txt", "https://example.org/f.txt", sha, mirror_name=mirror_name)
        monkeypatch.setitem(REGISTRY, name, Dataset(name, (file,), "test", "test", "shared"))
    assert (fetch("rnnbook-unit-a") / "f.txt").read_bytes() == payload
    with pytest.raises(DataUnavailableError, match="has no shared/sub/g.txt"):
        fetch("rnnbook-unit-b")


def test_archive_members_are_read_after_the_checksum(tmp_path, monkeypatch, sample_text):
    """A stand-in CBTest.tgz holding one question file, registered as ``cbt`` for the test."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        data = sample_text.encode()
        info = tarfile.TarInfo("CBTest/data/cbtest_CN_valid_2000ex.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    archive = buffer.getvalue()
    (tmp_path / "mirror" / "cbt").mkdir(parents=True)
    (tmp_path / "mirror" / "cbt" / "CBTest.tgz").write_bytes(archive)
    monkeypatch.setenv(MIRROR_ENV_VAR, str(tmp_path / "mirror"))
    real = REGISTRY["cbt"]
    file = RemoteFile("CBTest.tgz", real.files[0].url, hashlib.sha256(archive).hexdigest(),
                      mirror_name="CBTest.tgz")  # fmt: skip
    monkeypatch.setitem(REGISTRY, "cbt", Dataset("cbt", (file,), "test", "test", "cbt"))
    assert load_questions("CN", "valid_2000ex") == parse_questions(sample_text)
    with pytest.raises(ValueError, match="has no file CBTest/data/cbtest_NE_train.txt"):
        load_questions("NE", "train")


# --- the real samples ------------------------------------------------------------------------


@pytest.mark.parametrize("kind, split", SAMPLES)
def test_each_real_sample_parses(cbt_mirror, kind, split):
    q = load_sample(kind, split)
    assert len(q.context) == 20 and all(q.context)
    assert q.query.count(BLANK) == 1
    assert len(q.candidates) == 10 == len(set(q.candidates))
    assert q.answer in q.candidates


@pytest.mark.parametrize("kind, split", SAMPLES)
def test_real_samples_round_trip_byte_for_byte(cbt_mirror, kind, split):
    path = fetch("cbt-samples") / f"cbtest_{kind}_{split}.sample1.txt"
    assert format_questions(read_questions(path)) == path.read_text(encoding="utf-8")


def test_known_sample_content(cbt_mirror):
    q = load_sample("CN", "valid_2000ex")
    assert q.context[0] == ["`", "What", "is", "it", "?", "'"]
    assert q.answer == "dog"
    assert q.candidates[:3] == ["Cousin", "cloak", "dog"]
    assert q.filled_query()[q.query.index(BLANK)] == "dog"


@pytest.mark.parametrize("kind", KINDS)
def test_test_samples_occur_verbatim_in_the_test_books(books, kind):
    """The README's check, through our readers: 20 consecutive sentences of one book, then
    the query with the answer filled in."""
    q = load_sample(kind, "test_2500ex")
    assert len(_find_window(books, q.context, q.filled_query())) == 1


def test_read_books_finds_the_five_test_books(books):
    titles = [title for title, _ in books]
    assert titles == [
        "Andrew_Lang___The_Yellow_Fairy_Book",
        "Lewis_Carroll___Alice's_Adventures_in_Wonderland",
        "Lucy_Maud_Montgomery___Lucy_Maud_Montgomery_Short_Stories,_1902_to_1903",
        "Rudyard_Kipling___The_Jungle_Book",
        "Thornton_Waldo_Burgess___The_Adventures_of_Old_Mr._Toad",
    ]
    assert sum(len(sentences) for _, sentences in books) == 16_646 - 5  # lines minus headers
    assert books[0][1][1][:3] == ["`", "But", "we"]


def test_read_books_needs_a_title_first(tmp_path):
    path = tmp_path / "books.txt"
    path.write_text("a sentence .\n")
    with pytest.raises(ValueError, match=re.escape(f"{path}, line 1: expected a '_BOOK_TITLE_")):
        read_books(path)


# --- the question format ---------------------------------------------------------------------


def _lines(text: str) -> list[str]:
    return text.split("\n")


def test_parse_reads_several_questions_and_extra_blank_lines(sample_text):
    questions = parse_questions(sample_text + "\n" + sample_text.rstrip("\n"))
    assert len(questions) == 2 and questions[0] == questions[1]


def _last(ls: list[str], old: str, new: str) -> list[str]:
    """The first question's lines with ``old`` replaced by ``new`` in line 21."""
    return [*ls[:20], ls[20].replace(old, new)]


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda ls: ls[:4] + ls[5:], "line 5: expected line 5 of a question"),
        (lambda ls: [ls[0].replace("1 ", "one ", 1), *ls[1:]], "line 1: expected line 1"),
        (lambda ls: ls[:21] + ls[:21], "line 22: expected the blank line"),
        (lambda ls: _last(ls, "\tdog\t", "\twolf\t"), "line 21: the answer 'wolf' is not"),
        (lambda ls: _last(ls, "|steps", ""), "line 21: expected 10 candidates, got 9"),
        (lambda ls: _last(ls, "|steps", "|dog"), "line 21: the candidates repeat"),
        (lambda ls: _last(ls, "\t\t", "\t"), "line 21: line 21 must be 'query TAB answer"),
        (lambda ls: _last(ls, BLANK, "dog"), "line 21: the query has no blank"),
        (lambda ls: ls[:12], ": the text ends inside a question, after its line 12 of 21"),
    ],
)
def test_parse_errors_name_the_file_and_line(sample_text, edit, message):
    text = "\n".join(edit(_lines(sample_text)))
    separator = "" if message.startswith(":") else ", "
    with pytest.raises(ValueError, match=re.escape(f"questions.txt{separator}{message}")):
        parse_questions(text, source="questions.txt")


def test_read_questions_names_the_file(tmp_path, sample_text):
    path = tmp_path / "bad.txt"
    path.write_text(sample_text.replace("\tdog\t", "\twolf\t"))
    with pytest.raises(ValueError, match=re.escape(f"{path}, line 21")):
        read_questions(path)


def test_format_of_nothing_is_empty():
    assert format_questions([]) == "" and parse_questions("") == []


# --- building questions from the books -------------------------------------------------------


def test_kind_words_heuristics_on_a_small_book():
    book = [
        "The dog saw Polly .".split(),
        "Polly ran , and the dog ran .".split(),
        "Then I said that came a little cat .".split(),
        "` Good morning , ' said Polly to the THE cat .".split(),
        "it came and came and came , and came .".split(),
    ]
    assert kind_words(book, "NE") == {"Polly"}  # not The, Then, I, Good, THE
    assert kind_words(book, "CN") == {"dog", "cat"}  # not came (1 in 5 after "that"), little


@pytest.mark.parametrize("kind", KINDS)
def test_built_questions_follow_the_cbt_rules(books, kind):
    questions = build_questions(books, kind, 40, seed=0)
    words = {title: kind_words(sentences, kind) for title, sentences in books}
    assert len(questions) == 40
    for q in questions:
        assert len(q.context) == 20
        assert q.query.count(BLANK) == 1
        assert len(q.candidates) == 10 == len(set(q.candidates))
        assert q.candidates == sorted(q.candidates)
        assert q.answer in q.candidates
        assert any(q.answer in sentence for sentence in q.context)  # the pointer needs it
        ((title, _),) = _find_window(books, q.context, q.filled_query())  # the next sentence
        assert set(q.candidates) <= words[title]
        assert set(q.candidates) <= {t for s in (*q.context, q.filled_query()) for t in s}


def test_built_questions_are_deterministic_and_depend_on_the_seed(books):
    first = build_questions(books, "NE", 20, seed=3)
    assert build_questions(books, "NE", 20, seed=3) == first
    assert build_questions(books, "NE", 20, seed=4) != first


@pytest.mark.parametrize("kind", KINDS)
def test_built_questions_round_trip_through_the_file_format(books, kind):
    questions = build_questions(books, kind, 25, seed=1)
    assert parse_questions(format_questions(questions)) == questions


def test_build_questions_says_when_the_books_are_too_short():
    book = ("tiny", [f"Polly met Molly and Dolly number {i} .".split() for i in range(25)])
    with pytest.raises(ValueError, match="only 0 windows"):
        build_questions([book], "NE", 1, seed=0)
    with pytest.raises(ValueError, match="kind must be one of"):
        build_questions([book], "PN", 1, seed=0)
    with pytest.raises(ValueError, match="seed must be an integer"):
        build_questions([book], "NE", 1, seed=None)


# --- ids for the models ----------------------------------------------------------------------


def _question(words: str, answer: str, candidates: str) -> ClozeQuestion:
    context = [s.split() for s in words.split("/")]
    return ClozeQuestion(context[:-1], context[-1], answer, candidates.split())


@pytest.fixture
def two_questions() -> list[ClozeQuestion]:
    return [
        _question("The Dog barked ./a cat ran away ./the XXXXX slept .", "Dog", "cat Dog"),
        _question("Polly saw a hen ./XXXXX smiled .", "Polly", "hen Polly"),
    ]


def test_vocab_puts_pad_first_and_lowercases(two_questions):
    vocab = Vocab.build(two_questions)
    assert vocab.tokens[0] == PAD and vocab.tokens[-1] == UNK
    assert vocab.id("DOG") == vocab.id("dog") and vocab.id("never-seen") == vocab.id(UNK)
    assert "xxxxx" in vocab.tokens and "Dog" not in vocab.tokens
    cased = Vocab.build(two_questions, lower=False)
    assert "Dog" in cased.tokens and cased.id("dog") == cased.id(UNK)
    assert len(Vocab.build(two_questions, size=5)) == 5
    with pytest.raises(ValueError, match="starts with <pad>"):
        Vocab(["a", PAD, UNK])


def test_encode_questions_shapes_padding_and_answer(two_questions):
    vocab = Vocab.build(two_questions)
    x = encode_questions(two_questions, vocab, S=3)
    assert x.doc.shape == (2, 3, 5) and x.query.shape == (2, 4)  # the longest sentence, query
    assert x.cands.shape == (2, 2) and x.answer.tolist() == [1, 1]
    assert all(t.dtype == torch.long for t in (x.doc, x.query, x.cands, x.answer))
    assert x.doc[0, 0].tolist() == [*vocab.encode(["the", "dog", "barked", "."]), 0]
    assert x.doc[1, 0].tolist() == vocab.encode("polly saw a hen .".split())
    assert x.doc[1, 1:].eq(0).all()  # one context sentence, then empty (PAD) sentences
    assert x.query[1].tolist() == [vocab.id("xxxxx"), vocab.id("smiled"), vocab.id("."), 0]
    # the pointer's premise: the answer's id occurs in the document
    for i in range(2):
        assert (x.doc[i] == x.cands[i, x.answer[i]]).any()


def test_encode_questions_cuts_and_keeps_the_last_sentences(two_questions):
    vocab = Vocab.build(two_questions)
    x = encode_questions(two_questions, vocab, S=1, W=2, Lq=2)
    assert x.doc.shape == (2, 1, 2) and x.query.shape == (2, 2)
    assert x.doc[0, 0].tolist() == vocab.encode(["a", "cat"])  # the sentence next to the query


def test_encode_questions_rejects_bad_input(two_questions):
    vocab = Vocab.build(two_questions)
    with pytest.raises(ValueError, match="Lq=1 cuts the blank"):
        encode_questions(two_questions, vocab, Lq=1)
    with pytest.raises(ValueError, match="S must be a positive integer"):
        encode_questions(two_questions, vocab, S=0)
    with pytest.raises(ValueError, match="W must be a positive integer"):
        encode_questions(two_questions, vocab, W=-1)
    with pytest.raises(ValueError, match="at least one question"):
        encode_questions([], vocab)
    odd = [*two_questions, _question("a ./XXXXX b", "a", "a b c")]
    with pytest.raises(ValueError, match="question 2 has 3 candidates, question 0 has 2"):
        encode_questions(odd, vocab)
    small = Vocab.build(two_questions, size=3)
    with pytest.raises(ValueError, match="candidate .* is not in the vocabulary"):
        encode_questions(two_questions, small)


def test_encode_real_samples(cbt_mirror):
    questions = [load_sample(kind, split) for kind, split in SAMPLES]
    x = encode_questions(questions, Vocab.build(questions), S=20, W=100, Lq=100)
    assert x.doc.shape == (6, 20, 100) and x.cands.shape == (6, 10)
    assert ((x.query == Vocab.build(questions).id("xxxxx")).sum(dim=1) == 1).all()
    for i, q in enumerate(questions):
        assert q.candidates[x.answer[i]] == q.answer
        assert (x.doc[i] == x.cands[i, x.answer[i]]).any()  # the answer is in the context
