"""Floods stdout (garbage lines and one 64 MiB line) before a valid reply."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from agentlib import answer, emit, raw, serve  # noqa: E402


def submit(id, params):
    answer(id, {})
    for i in range(5000):
        raw("flood line %d: not a frame" % i)
    chunk = b"x" * (1 << 20)
    for _ in range(64):
        sys.stdout.buffer.write(chunk)
    raw(b"")
    emit("session.text_delta", {"turn_id": params["turn_id"], "delta": "survived"})
    emit("session.turn_completed", {"turn_id": params["turn_id"], "text": "survived", "aborted": False})


serve({"session.submit": submit})
