"""Normalisation, stemming and keyed term ids of the lexical channel."""

from __future__ import annotations

import hashlib
import hmac

import pytest
import snowballstemmer  # type: ignore[import-untyped]

from memsvc.stores.lexical import analysis
from memsvc.stores.lexical.analysis import Analyzer, TermHasher


def derive(purpose: str) -> bytes:
    return hmac.new(b"k" * 32, purpose.encode(), hashlib.sha256).digest()


def test_normalises_case_width_punctuation_and_possessives() -> None:
    a = Analyzer()
    fullwidth = "\uff2c\uff27\uff22\uff34\uff31"  # LGBTQ in full-width letters
    assert a.tokens(f"Caroline's {fullwidth} support-group!!") == ["caroline", "lgbtq", "support", "group"]
    assert a.tokens("Don\u2019t STOP; I'm here...") == ["stop"]  # contractions and stopwords go
    assert a.tokens("a x 7 _ __init__") == ["7", "init"]  # single letters go, digits stay


def test_stems_inflections_to_one_term() -> None:
    a = Analyzer()
    assert a.terms("researching") == a.terms("researched") == a.terms("research")
    assert a.terms("adoption agencies") == a.terms("adopting agency")
    assert a.terms("the and of to") == []


def test_term_ids_are_keyed_per_tenant_and_stable() -> None:
    hasher = TermHasher(derive)
    assert hasher.term_id("acme", "genmaicha") == TermHasher(derive).term_id("acme", "genmaicha")
    assert hasher.term_id("acme", "genmaicha") != hasher.term_id("globex", "genmaicha")
    other_key = TermHasher(lambda p: derive("other" + p))
    assert other_key.term_id("acme", "genmaicha") != hasher.term_id("acme", "genmaicha")
    assert -(2**63) <= hasher.term_id("acme", "x") < 2**63


def test_remembered_term_ids_are_the_hmac_and_stay_so_when_the_memory_starts_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(analysis, "_REMEMBERED_TERM_IDS", 3)
    hasher = TermHasher(derive)
    words = [f"word{i}" for i in range(8)]

    def expected(tenant: str, term: str) -> int:
        digest = hmac.new(derive(f"lexical|{tenant}"), term.encode(), hashlib.sha256).digest()
        return int.from_bytes(digest[:8], "big", signed=True)

    for _ in range(2):  # the second round reads what the first remembered, past several resets
        for tenant in ("acme", "globex"):
            assert [hasher.term_id(tenant, w) for w in words] == [expected(tenant, w) for w in words]
    assert len(hasher._ids) <= 3


def test_bag_counts_terms_and_carries_no_text() -> None:
    bag = TermHasher(derive).bag("acme", "Genmaicha tea, more genmaicha TEA please")
    assert bag.length == 5  # genmaicha tea genmaicha tea please ("more" is a stopword)
    assert sorted(bag.counts.values()) == [1, 2, 2]
    assert all(isinstance(term, int) for term in bag.counts)


def test_the_c_stemmer_is_used_and_stems_as_the_pure_python_one_does() -> None:
    # Postings store keyed stems: the fast C build must stem exactly as the reference does, or an
    # upgrade would orphan what was indexed before it.
    import Stemmer  # type: ignore[import-not-found]
    from snowballstemmer.english_stemmer import EnglishStemmer  # type: ignore[import-untyped]

    assert isinstance(snowballstemmer.stemmer("english"), Stemmer.Stemmer)
    words = [
        "running",
        "runs",
        "ran",
        "generously",
        "hopefully",
        "dying",
        "skies",
        "news",
        "cycling",
        "destress",
        "greyhounds",
        "painted",
    ]
    fast, reference = Stemmer.Stemmer("english"), EnglishStemmer()
    assert [fast.stemWord(w) for w in words] == [reference.stemWord(w) for w in words]


def test_speaker_markers_are_keyed_ids_no_word_of_a_text_can_have() -> None:
    hasher = TermHasher(derive)
    markers = hasher.speaker_ids("t1", "Mel Jones")
    assert len(markers) == 2
    words = hasher.bag("t1", "Mel Jones said: speaker mel jones").counts
    assert not set(markers) & set(words)
    assert hasher.speaker_ids("t1", "Mel's") == markers[:1]  # analysed like text: the possessive goes
    assert hasher.speaker_ids("t2", "Mel Jones") != markers  # per tenant, like every term id
