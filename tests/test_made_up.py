"""`credentials.made_up`: names written where a value goes, hex typed by counting, base64 of either,
UUID idempotency tokens, docstring examples — and never a generated value."""
from __future__ import annotations

import base64
import random
import string
import uuid

from repoguard.credentials.made_up import (after_for_example, base64_of_made_up, counting, idempotency_token,
                                           spells_a_name)


def test_made_up_values():
    assert spells_a_name(b"access_key_1_last_used_region") and spells_a_name(b"api_key_s3l3ction")
    assert spells_a_name(b"878787878787-auth-token")
    assert not spells_a_name(b"last_used_region")          # no credential word: a name of something else
    assert not spells_a_name(b"key_a3f1e0_9c2b7d_41ee")    # hex parts are not leetspeak words
    assert counting(b"1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d") and not counting(b"7f3c9e21-4b8d-4a6e-9c15-2d8b6e0f4a73")
    assert base64_of_made_up(base64.b64encode(b"AWS:123456789012-auth-token"))
    assert not base64_of_made_up(base64.b64encode(b"AWS:Zq8vT2mWx4Lp9RkQ3nB7"))
    assert idempotency_token(b"ED9F8B6C-85B7-B7E4-38F2A3BEB13C", b'client_request_token = "')
    assert not idempotency_token(b"ED9F8B6C-85B7-B7E4-38F2A3BEB13C", b'api_token = "')
    doc = b'    header, prepended with "Token ".  For example:\n\n        Authorization: Token abc\n'
    assert after_for_example(doc, doc.index(b"abc"))
    assert not after_for_example(b"headers:\n    Authorization: Token abc\n", 30)


def test_generated_values_are_never_made_up():
    """140 000 random values of key alphabets and lengths, random UUIDs and base64 of random bytes:
    none is read as made up (the filters cost no recall on generated keys)."""
    rng = random.Random(43)
    for al in (string.ascii_letters + string.digits, string.ascii_letters + string.digits + "-_",
               "0123456789abcdef", string.ascii_lowercase + string.digits + "_"):
        for _ in range(5000):
            v = "".join(rng.choice(al) for _ in range(rng.choice([20, 24, 32, 40, 64]))).encode()
            assert not (spells_a_name(v) or counting(v) or base64_of_made_up(v)), v
    for _ in range(5000):
        assert not counting(str(uuid.UUID(int=rng.getrandbits(128))).encode())
        assert not base64_of_made_up(base64.b64encode(rng.randbytes(rng.choice([16, 24, 32, 48]))))


def test_a_bare_example_heading_is_not_prose():
    conf = b"# Example:\nDB_PASSWORD=Zq8vT2mWx4Lp\n"
    assert not after_for_example(conf, conf.index(b"Zq8"))
