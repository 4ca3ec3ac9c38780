"""Checks an MCP exchange against the specification's schema of its revision.

The schema comes from PyPI's `mcp-types` (installed with the Python SDK by
scripts/mcp-clients.sh): per revision, wire models generated from the
specification's `schema/<revision>/schema.json`, and `mcp_types.methods`,
which names the request, result and notification model of each method in
each revision (the 2025-11-25 schema for every handshake revision, the
2026-07-28 one for the stateless era). No registry package ships the
schema's JSON itself; these models are the SDK's published form of it.

Strict: a message must validate (every required field, every type, in
pydantic's strict mode) and come back unchanged from the models, so a field
the revision does not have, anywhere in the message, is a problem too (the
models drop unknown fields of closed objects; open ones such as `_meta`,
an input schema or structured content keep theirs).

    python mcp_conformance.py TRANSCRIPT.json

TRANSCRIPT is `[{"revision": "2025-11-25", "sent": [...], "received":
[...]}, ...]`: what a client sent and what the server wrote, in order
(`"refused": true` for requests sent wrong on purpose: their envelopes
are checked, the server's answers in full).
Prints `{"checked": [[kind, method, revision], ...], "problems": [...]}`.
"""
import json
import sys

from pydantic import TypeAdapter, ValidationError

import mcp_types._v2025_11_25 as v2025
import mcp_types._v2026_07_28 as v2026
from mcp_types import methods

STATELESS = {"2026-07-28"}


def era_module(revision):
    return v2026 if revision in STATELESS else v2025


def differences(sent, back, path, out):
    """Where `back` (the message after the models) differs from `sent`."""
    if isinstance(sent, dict) and isinstance(back, dict):
        for k in sent:
            if k not in back:
                out.append("%s.%s: a field this revision does not have" % (path, k))
            else:
                differences(sent[k], back[k], "%s.%s" % (path, k), out)
        for k in back:
            if k not in sent:
                out.append("%s.%s: added by the models (a default the message left out)" % (path, k))
    elif isinstance(sent, list) and isinstance(back, list):
        if len(sent) != len(back):
            out.append("%s: %d items, %d after the models" % (path, len(sent), len(back)))
        for i, (a, b) in enumerate(zip(sent, back)):
            differences(a, b, "%s[%d]" % (path, i), out)
    elif sent != back or isinstance(sent, bool) != isinstance(back, bool):
        out.append("%s: %r, %r after the models" % (path, sent, back))


def strict(model, value, where, problems):
    adapter = TypeAdapter(model)
    try:
        parsed = adapter.validate_json(json.dumps(value), strict=True)
    except ValidationError as e:
        for err in e.errors():
            problems.append("%s: %s at %s (%s)" % (where, err["msg"], ".".join(map(str, err["loc"])),
                                                   err["type"]))
        return
    back = adapter.dump_python(parsed, mode="json", by_alias=True, exclude_unset=True)
    found = []
    differences(value, back, where, found)
    problems.extend(found)


def envelope(message, keys, where, problems):
    extra = set(message) - set(keys)
    if extra:
        problems.append("%s: fields outside JSON-RPC's: %s" % (where, sorted(extra)))
    if message.get("jsonrpc") != "2.0":
        problems.append("%s: jsonrpc is %r" % (where, message.get("jsonrpc")))


def check(exchanges):
    checked, problems = [], []
    for n, ex in enumerate(exchanges):
        revision = ex["revision"]
        pending = {}
        for i, msg in enumerate(ex["sent"]):
            where = "exchange %d (%s) sent[%d] %s" % (n, revision, i, msg.get("method"))
            if "id" in msg:
                pending[json.dumps(msg["id"])] = msg["method"]
                model = methods.CLIENT_REQUESTS.get((msg["method"], revision))
                kind = "request"
            else:
                model = methods.CLIENT_NOTIFICATIONS.get((msg["method"], revision))
                kind = "client notification"
            if model is None or ex.get("refused"):
                # A message the revision does not have, or one sent wrong on
                # purpose to see the server refuse it: only its envelope.
                envelope(msg, ("jsonrpc", "id", "method", "params"), where, problems)
                continue
            strict(model, msg, where, problems)
            checked.append([kind, msg["method"], revision])
        for i, msg in enumerate(ex["received"]):
            where = "exchange %d (%s) received[%d]" % (n, revision, i)
            if "method" in msg:
                model = methods.SERVER_NOTIFICATIONS.get((msg["method"], revision))
                if model is None:
                    problems.append("%s: notification %s is not in this revision" % (where, msg["method"]))
                    continue
                strict(model, msg, where + " " + msg["method"], problems)
                checked.append(["notification", msg["method"], revision])
                continue
            method = pending.pop(json.dumps(msg.get("id")), None)
            if "error" in msg:
                envelope(msg, ("jsonrpc", "id", "error"), where, problems)
                strict(era_module(revision).JSONRPCErrorResponse, msg, where + " error", problems)
                checked.append(["error", method, revision])
                continue
            envelope(msg, ("jsonrpc", "id", "result"), where, problems)
            if method is None:
                problems.append("%s: a result for no request sent (id %r)" % (where, msg.get("id")))
                continue
            model = methods.SERVER_RESULTS.get((method, revision))
            if model is None:
                problems.append("%s: a result for %s, which this revision does not have" % (where, method))
                continue
            strict(model, msg["result"], "%s %s result" % (where, method), problems)
            checked.append(["result", method, revision])
        for left in pending.values():
            problems.append("exchange %d (%s): no answer to %s" % (n, revision, left))
    return {"checked": checked, "problems": problems}


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print(json.dumps(check(json.load(f))))
