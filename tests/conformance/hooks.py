"""Schemathesis hooks of the conformance run (loaded through SCHEMATHESIS_HOOKS by run.sh).

Every valid Idempotency-Key a case carries is made unique before the call. Schemathesis draws the
optional header from a small pool of short values ("0", "!"), so two cases of one operation often
share a key with different bodies, which the service answers 422 IDEMPOTENCY_KEY_REUSED by design
(docs/idempotency.md): noise that says nothing about the case itself. Replays and reuse have their
own tests (tests/api/idempotency.rs). An invalid key (the negative cases of the header) is left as
generated, so its refusal is still checked.
"""

import re
import uuid

import schemathesis

VALID_KEY = re.compile(r"[!-~]{1,255}")


@schemathesis.hook
def before_call(context, case, **kwargs):
    headers = case.headers or {}
    for name in list(headers):
        value = headers[name]
        if name.lower() == "idempotency-key" and isinstance(value, str) and VALID_KEY.fullmatch(value):
            headers[name] = f"conformance-{uuid.uuid4()}"
