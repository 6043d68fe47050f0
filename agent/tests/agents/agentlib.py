"""The few lines every test agent shares: the JSON-lines wire of `carrier serve --agent-cmd`.

One frame per line on stdout; requests arrive one per line on stdin. Each agent passes its
request handlers to `serve`, which answers the handshake and `method_not_found` by default and
returns when stdin closes (the carrier stopped or is gone).
"""

import json
import sys
import threading

HELLO = {
    "protocol_version": "1.0",
    "min_compatible_protocol": "1.0",
    "server": {"name": "test-agent", "version": "0"},
}


_lock = threading.Lock()


def send(frame):
    with _lock:  # agents that stream from a thread write whole lines
        sys.stdout.write(json.dumps(frame) + "\n")
        sys.stdout.flush()


def raw(line):
    """Writes one line as is (bytes or str), for agents that misbehave on purpose."""
    if isinstance(line, str):
        line = line.encode()
    sys.stdout.buffer.write(line + b"\n")
    sys.stdout.buffer.flush()


def answer(id, result):
    send({"id": id, "result": result})


def fail(id, code, message):
    send({"id": id, "error": {"code": code, "message": message}})


def emit(event, payload):
    send({"event": event, "payload": payload})


def serve(handlers):
    for line in sys.stdin:
        frame = json.loads(line)
        method = frame.get("method")
        if method is None:
            continue
        if method == "system.handshake" and method not in handlers:
            answer(frame["id"], HELLO)
            continue
        handler = handlers.get(method)
        if handler is None:
            fail(frame["id"], "method_not_found", "not implemented")
        else:
            handler(frame["id"], frame.get("params") or {})
