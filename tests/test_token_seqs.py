"""`training.data.TokenSeqs`: tokenised on first use, equal to tokenising every text up front
(issue 28 item 6: the train stage tokenised all 9,171 wagtail examples for a 10-step run)."""
from __future__ import annotations

import numpy as np
import pytest

from repoguard.core.errors import InputError
from repoguard.training.data import TokenSeqs, tokenize
from repoguard.training.model import TinyConfig, build_tiny_model
from repoguard.training.sampler import micro_batches

TEXTS = ["def f(x):\n    return x + 1\n", "", "x", "import os\nprint(os.getcwd())\n" * 20,
         "class A:\n    pass\n", "# a comment " * 50, "λ = 'unicode ✓'\n"] * 3


@pytest.fixture(scope="module")
def tok():
    return build_tiny_model(TEXTS, seed=0, size=TinyConfig(vocab_size=300, hidden_size=16, intermediate_size=32,
                                                           num_layers=1, num_heads=2, max_position=64))[1]


def test_lazy_rows_equal_eager_tokenisation_in_any_order(tok):
    eager = tokenize(TEXTS, tok, max_length=24)
    lazy = TokenSeqs(TEXTS, tok, max_length=24)
    assert len(lazy) == len(eager) and not lazy._ids            # nothing tokenised yet
    rows = np.array([5, 3, 3, 0, 20, 11])
    assert np.array_equal(lazy.lengths[rows], [len(eager[i]) for i in rows])
    assert sorted(lazy._ids) == sorted(set(rows.tolist()))     # only what was asked for
    for i in [20, 1, 7, -1]:
        assert np.array_equal(lazy[i], eager[i])
    assert all(np.array_equal(a, b) for a, b in zip(lazy, eager))
    assert all(np.array_equal(a, b) for a, b in zip(lazy[2:9:3], eager[2:9:3]))
    with pytest.raises(IndexError):
        lazy[len(TEXTS)]
    with pytest.raises(InputError):
        TokenSeqs(TEXTS, tok, max_length=1)


def test_micro_batches_group_by_the_same_lengths(tok):
    eager = tokenize(TEXTS, tok, max_length=24)
    lazy = TokenSeqs(TEXTS, tok, max_length=24)
    batch = np.array([9, 2, 17, 4, 0, 13, 6])
    want = micro_batches(batch, 3, np.array([len(s) for s in eager], dtype=np.int64))
    got = micro_batches(batch, 3, lazy.lengths)
    assert [b.tolist() for b in got] == [b.tolist() for b in want]
