"""Streams one delta of each turn, then exits with status 3."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from agentlib import answer, emit, serve  # noqa: E402


def submit(id, params):
    answer(id, {})
    emit("session.text_delta", {"turn_id": params["turn_id"], "delta": "partial"})
    sys.exit(3)


serve({"session.submit": submit})
