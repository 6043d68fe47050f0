"""Answers the handshake, then never answers anything. With --ignore-eof it also outlives its
stdin (it must be killed)."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from agentlib import serve  # noqa: E402

serve({name: (lambda id, params: None) for name in [
    "session.submit", "session.abort", "session.permission.respond",
    "session.history", "session.status",
]})
if "--ignore-eof" in sys.argv:
    time.sleep(3600)
