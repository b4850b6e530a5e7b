"""A literal key handed to an SDK client's constructor, the way most SDKs take their API key (the
first argument): `new Acme\\Client("v")`, `const client = new Client('v')`, `AcmeClient('v')`,
`Acme::Client.new("v")`, `createClient('v')`, `acme.NewClient("v")`, and Go's `acme.New("v")` for
a package named for a vendor of the table (`vendor_table`).

The callee must construct a client: `new` and a class name ending in Client/Api/API/Sdk/SDK, a
capitalised class name so ending (Python, Kotlin, Swift), Ruby's `….new`, a `create…Client`
factory, Go's `NewClient`. A lower-case `getClient("id")`, `self.client("id")` or any package's
`.New(…)` (`errors.New`, `xid.New`) looks something up or builds something else. The argument
must be one quoted literal followed by `)` or `,`; the value must have a common key shape
(`tokens.common_key_shape`) and look generated (`tokens.random_token`); a UUID is
an id (a tenant, a client id), not a key. Findings use the rule id `generic-client-key` (a generic
rule: medium severity, the lowest priority, and the vendor table's veto applies: a Mailgun client
given a value of the wrong shape is no Mailgun key).
"""
from __future__ import annotations

from typing import Iterable, Iterator

import re2

from repoguard.credentials.priority import CONTEXT
from repoguard.credentials.structural.base import Detector, Hit
from repoguard.credentials.structural.keyword_context import vendor_aliases
from repoguard.credentials.structural.tokens import common_key_shape, random_token

# The callee, `(`, one quoted literal, then `)` or `,`. Matched case-sensitively. Blank runs are
# bounded as in PREFILTER, so that Hyperscan and RE2 find the same calls.
_VALUE = rb"[A-Za-z0-9+/_=.-]{16,128}"
_CLASS = rb"(?:Client|Api|API|Sdk|SDK)"
_CALL = re2.compile(
    rb"(?:\bnew[ \t]{1,8}[\\A-Za-z0-9_.:]*" + _CLASS
    + rb"|(?:^|[^A-Za-z0-9_])(?:[A-Za-z0-9_]*::)?(?:[A-Z][A-Za-z0-9_]*)?" + _CLASS + rb"(?:\.new)?"
    + rb"|\bcreate[A-Za-z0-9_]*Client|\b[a-z][a-z0-9_]*\.NewClient|\b([a-z][a-z0-9_]*)\.New)"
    rb"[ \t]{0,8}\([ \t]{0,8}(?:\"(" + _VALUE + rb")\"|'(" + _VALUE + rb")'|`(" + _VALUE + rb")`)[ \t]{0,8}[,)]")
# The prefilter, in the engine's Hyperscan database (caseless): a call's `(` and quote right after
# a name ending in client/new/api/sdk, then 16 token characters.
PREFILTER = rb"(?:client|new|api|sdk)[ \t]{0,8}\([ \t]{0,8}[\"'`][0-9a-z+/_=.-]{16}"
_UUID = re2.compile(rb"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")


def find(data: bytes, path: str, ends: Iterable[int] | None = None) -> Iterator[Hit]:
    """Hits (value span, value) for literal keys passed to client constructors in `data`. `ends`:
    the prefilter's match ends (none: nothing to find), or None to search the whole text."""
    if ends is not None and not ends:
        return  # (the calls are few: the whole text is searched once when the prefilter matched)
    for m in _CALL.finditer(data):
        if m.group(1) is not None and m.group(1).decode() not in vendor_aliases():
            continue  # Go's `pkg.New("…")` is a client's only for a vendor's package
        g = next(k for k in (2, 3, 4) if m.group(k) is not None)
        tok = m.group(g)
        if common_key_shape(tok) and not _UUID.fullmatch(tok) and random_token(tok.rstrip(b"=")):
            yield Hit(*m.span(g), tok)


DETECTORS = (Detector("generic-client-key", "Random-looking literal passed to an SDK client's constructor",
                      (), find, priority=CONTEXT, prefilter=PREFILTER),)
