"""Text -> keyed term ids: NFKC, case folding, punctuation, stopwords, stemming, then HMAC.

The index only ever sees the term ids. They are HMACs under a per-tenant subkey of the
master key, so equal words of two tenants give unrelated ids and nobody without the key
can test a guessed word against an index.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import snowballstemmer  # type: ignore[import-untyped]

# Words with inner apostrophes stay one token ("don't", "caroline's"); underscores split.
_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")
_MAX_TERM_CHARS = 64

# A small list: function words that carry no topic. Contractions appear without apostrophes,
# the way tokens look after normalisation.
_STOPWORD_TEXT = """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself no nor not of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself yourselves
    im ive id ill youre youve youd youll hes shes its were theyre theyve weve wed dont doesnt didnt
    isnt arent wasnt werent cant couldnt wont wouldnt shouldnt hasnt havent hadnt thats whats
    lets theres heres
    also yes yeah oh ok okay hey hi
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def _normalise(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


class Analyzer:
    """Normalised, stemmed terms of a text (English Snowball stemmer, thread-safe)."""

    def __init__(self, stopwords: frozenset[str] = STOPWORDS) -> None:
        self._stopwords = stopwords
        self._local = threading.local()

    def _stemmer(self) -> Callable[[str], str]:
        stem: Callable[[str], str] | None = getattr(self._local, "stem", None)
        if stem is None:
            # Snowball stemmers keep state between calls: one per thread. With PyStemmer installed
            # (a dependency) this is its C build, 13x faster than the pure-Python one.
            stem = snowballstemmer.stemmer("english").stemWord
            self._local.stem = stem
        return stem

    def tokens(self, text: str) -> list[str]:
        """Normalised words before stemming, stopwords removed."""
        out: list[str] = []
        for match in _WORD.finditer(_normalise(text)):
            word = match.group(0).replace("\u2019", "'")
            if word.endswith("'s"):
                word = word[:-2]  # the possessive names the same thing: "Caroline's" -> "caroline"
            word = word.replace("'", "")
            if not word or len(word) > _MAX_TERM_CHARS or word in self._stopwords:
                continue
            if len(word) == 1 and not word.isdigit():
                continue
            out.append(word)
        return out

    def terms(self, text: str) -> list[str]:
        """The stemmed terms of a text, in order, repeats kept (they are term frequencies)."""
        stem = self._stemmer()
        return [stem(word) for word in self.tokens(text)]


@dataclass(frozen=True)
class TermBag:
    """A text's keyed term ids with their counts, and its length in terms (for BM25)."""

    counts: dict[int, int]
    length: int


# A speaker's name is posted under marker terms that no analysed word can be (words never hold
# a control character): the namespace's postings tell who spoke without holding any plaintext.
_SPEAKER_MARK = "\x00speaker\x00"

# Most of any text is a vocabulary's common words: their ids are remembered (up to this many, about
# 10 MB), so a word is hashed once, not again in every memory and query it occurs in. An HMAC costs
# 3.6 us: a query's analysis took 58 us, and 24.5 with its words remembered (docs/performance.md).
_REMEMBERED_TERM_IDS = 65_536


class TermHasher:
    """Keyed term ids per tenant: HMAC-SHA256 under a subkey, truncated to a signed 64-bit int."""

    def __init__(self, derive: Callable[[str], bytes], analyzer: Analyzer | None = None) -> None:
        self._derive = derive
        self._analyzer = analyzer or Analyzer()
        self._keys: dict[str, bytes] = {}
        self._ids: dict[tuple[str, str], int] = {}

    def _key(self, tenant: str) -> bytes:
        key = self._keys.get(tenant)
        if key is None:
            key = self._derive(f"lexical|{tenant}")
            self._keys[tenant] = key
        return key

    def term_id(self, tenant: str, term: str) -> int:
        known = self._ids.get((tenant, term))
        if known is not None:
            return known
        digest = hmac.new(self._key(tenant), term.encode(), hashlib.sha256).digest()
        term_id = int.from_bytes(digest[:8], "big", signed=True)
        if len(self._ids) >= _REMEMBERED_TERM_IDS:
            self._ids.clear()  # a full memo starts over: the common words come back first
        self._ids[(tenant, term)] = term_id
        return term_id

    def speaker_ids(self, tenant: str, name: str) -> list[int]:
        """The marker term ids of a speaker's name, one per term of it ("Mel Jones": two)."""
        return [self.term_id(tenant, _SPEAKER_MARK + term) for term in self._analyzer.terms(name)]

    def ids(self, tenant: str, terms: Iterable[str]) -> TermBag:
        counts: Counter[int] = Counter()
        length = 0
        for term in terms:
            counts[self.term_id(tenant, term)] += 1
            length += 1
        return TermBag(dict(counts), length)

    def bag(self, tenant: str, text: str) -> TermBag:
        """The keyed term bag of a text: what the index stores for a memory or asks for a query."""
        return self.ids(tenant, self._analyzer.terms(text))
