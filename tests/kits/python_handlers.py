"""Which requests reach corral's Python handlers: the tests of what the network thread answers
on its own count what still gets through to Python."""

from __future__ import annotations

from corral.network.apis import HANDLERS, api_table


def record_python_calls(monkeypatch, api_key) -> list:
    """The typed requests of `api_key` that reach its Python handler from now on (for the test)."""
    calls: list = []
    api_table()  # imports the handlers
    handler = HANDLERS[api_key]

    def counting(broker, req):
        calls.append(req.typed)
        return handler(broker, req)

    monkeypatch.setitem(HANDLERS, api_key, counting)
    return calls
