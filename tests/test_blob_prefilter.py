"""The base64 blob prefilter (issue 45): one bounded Hyperscan pattern plus `b64_blob_end`'s
check reports exactly the blob ends of the former two-pattern form (a run holding a digit and
an upper-case letter, min_length 33), which cost more than all the rules together. Both are
compiled with Hyperscan here and run over texts built to sit on every edge: runs of 28–40
characters, 0–3 `=`, every kind of end byte, the end of the data, megabyte runs."""
from __future__ import annotations

import random

import pytest

hyperscan = pytest.importorskip("hyperscan")

from repoguard.credentials.decode import B64_PREFILTER, b64_blob_end  # noqa: E402

C = rb"[A-Za-z0-9+/_-]"
OLD = [C + b"*" + a + C + b"*" + b + C + rb"*={0,2}(?:[^A-Za-z0-9+/=_-]|$)"
       for a, b in ((rb"[0-9]", rb"[A-Z]"), (rb"[A-Z]", rb"[0-9]"))]
NEW = B64_PREFILTER      # what the engine compiles


def _db(exprs: list[bytes], min_length: int | None):
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    ext = hyperscan.ExpressionExt(flags=hyperscan.HS_EXT_FLAG_MIN_LENGTH, min_length=min_length) \
        if min_length else hyperscan.ExpressionExt(flags=0)
    db.compile(expressions=exprs, ids=list(range(len(exprs))), elements=len(exprs),
               flags=[0] * len(exprs), ext=[ext] * len(exprs))
    return db


def _ends(db, data: bytes) -> set[int]:
    out: set[int] = set()
    db.scan(data, match_event_handler=lambda i, f, t, fl, ctx: out.add(t))
    return out


def _text(rng: random.Random) -> bytes:
    alphabets = [b"abcdefghij", b"abcdef0123456789", b"ABCDEF", b"Ab9+/_-", b"ABCabc012", b"xyz_-"]
    parts = []
    for _ in range(rng.randrange(1, 6)):
        a = rng.choice(alphabets)
        parts.append(bytes(rng.choice(a) for _ in range(rng.choice((3, 28, 30, 31, 32, 33, 34, 40)))))
        parts.append(b"=" * rng.randrange(0, 4))
        parts.append(rng.choice([b" ", b"\n", b"'", b"=", b".", b"\x00", b"\xc3\xa9", b""]))
    return b"".join(parts)


def test_new_prefilter_reports_the_old_blob_ends():
    rng = random.Random(45)
    texts = [_text(rng) for _ in range(3000)]
    texts += [b"A1" * 600_000 + b"\n", b"a" * 40 + b"9Z", b"9" * 31 + b"Z==", b"9" * 30 + b"Z==\n"]
    checked = 0
    old_db, new_db = _db(OLD, 33), _db([NEW], None)
    for data in texts:
        old = _ends(old_db, data)
        new = {t for t in _ends(new_db, data) if b64_blob_end(data, t)}
        # a run shorter than 32 (old ≥ 33 with padding and end byte) is no blob `_decoded` reads
        old = {t for t in old if _run_len(data, t) >= 32}
        assert new == old, data[:200]
        checked += bool(old)
    assert checked > 300


def _run_len(data: bytes, t: int) -> int:
    k = t - (data[t - 1:t].translate(None, b"=" + bytes(range(48, 58)) + bytes(range(65, 91))
                                      + bytes(range(97, 123)) + b"+/_-") != b"")
    k -= len(data[max(0, k - 2):k]) - len(data[max(0, k - 2):k].rstrip(b"="))
    seg = data[:k]
    return len(seg) - len(seg.rstrip(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-"))
