"""A lexical signal for the router: Okapi BM25 over each skill's name and description.

Small and dependency-free (numpy only): a pool holds hundreds of skills, not millions, so
a dense (skills x vocabulary-of-the-query) lookup is all it takes. The score a query gives
every skill is divided by the best skill's score, so the signal lies in [0, 1] whatever the
query's length (0 for all when no query word occurs in any skill).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

__all__ = ["BM25", "tokens"]

_WORD = re.compile(r"[a-z0-9]+")
# Common English function words; they carry no routing signal.
_STOP = frozenset("""a about above after again all also am an and any are as at be because been
before being below between both but by can could did do does doing down during each few for
from further had has have having he her here hers him his how i if in into is it its itself
just me more most my no nor not now of off on once only or other our ours out over own same
she should so some such than that the their theirs them then there these they this those
through to too under until up very was we were what when where which while who whom why will
with would you your yours please want need help me use using get""".split())


def tokens(text: str) -> list[str]:
    """Lower-case words of `text` without stop words, with a light plural/-ing stem."""
    out = []
    for word in _WORD.findall(text.lower()):
        if word in _STOP:
            continue
        if len(word) > 4 and word.endswith("ies"):
            word = word[:-3] + "y"
        elif len(word) > 5 and word.endswith("ing"):
            word = word[:-3]
        elif len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        out.append(word)
    return out


class BM25:
    """Okapi BM25 (k1, b) over a fixed list of documents."""

    def __init__(self, docs: Sequence[str], k1: float = 1.2, b: float = 0.75) -> None:
        toks = [tokens(d) for d in docs]
        self.n = len(toks)
        lengths = np.array([len(t) for t in toks], dtype=np.float64)
        avg = float(lengths.mean()) if self.n and lengths.sum() else 1.0
        self._norm = k1 * (1.0 - b + b * lengths / avg)  # per document
        self.k1 = k1
        self._tf: dict[str, dict[int, int]] = {}
        for i, doc in enumerate(toks):
            for word, count in Counter(doc).items():
                self._tf.setdefault(word, {})[i] = count
        self._idf = {w: math.log(1.0 + (self.n - len(p) + 0.5) / (len(p) + 0.5))
                     for w, p in self._tf.items()}

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for `query` (raw, not normalised)."""
        out = np.zeros(self.n)
        for word in set(tokens(query)):
            postings = self._tf.get(word)
            if not postings:
                continue
            idx = np.fromiter(postings.keys(), dtype=np.intp, count=len(postings))
            tf = np.fromiter(postings.values(), dtype=np.float64, count=len(postings))
            out[idx] += self._idf[word] * tf * (self.k1 + 1.0) / (tf + self._norm[idx])
        return out

    def normalised(self, query: str) -> np.ndarray:
        """Scores divided by the best one: in [0, 1], all 0 when nothing matches."""
        s = self.scores(query)
        top = float(s.max()) if s.size else 0.0
        return s / top if top > 0 else s
