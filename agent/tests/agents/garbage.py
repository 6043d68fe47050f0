"""Prints garbage around one valid reply: every invalid line or event must be dropped."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from agentlib import answer, emit, raw, serve, send  # noqa: E402


def submit(id, params):
    turn = params["turn_id"]
    answer(id, {})
    print("garbage agent stderr line", file=sys.stderr, flush=True)
    raw("this is not json")
    raw("[1, 2, 3]")
    raw(b"\xff\xfe not utf-8")
    raw('{"event":"session.text_delta","payload":{"turn_id":"%s","delta":5}}' % turn)
    raw('{"event":"session.text_delta","payload":{"turn_id":"%s"}}' % turn)
    raw('{"event":"session.made_up","payload":{}}')
    raw('{"event":"protocol_error","payload":{"code":"x","message":"y"}}')
    raw('{"id":"nobody","result":{}}')
    raw('{"event":"session.text_delta","payload":{"turn_id":"%s","delta":"x"},"extra":1}' % turn)
    emit("session.turn_started", {"turn_id": turn, "driver": {"driver_id": "me", "surface": "x"}})
    emit("session.permission_resolved", {"request_id": "p", "decision": "allow"})
    emit("session.text_delta", {"turn_id": "not-this-turn", "delta": "wrong turn"})
    send({"id": "from-child", "method": "host.anything", "params": {}})
    send({"event": "session.text_delta", "seq": 99, "payload": {"turn_id": turn, "delta": "ok"}})
    emit("session.turn_completed", {"turn_id": turn, "text": "ok", "aborted": False})


def history(id, params):
    answer(id, {"entries": "not a list"})


def status(id, params):
    answer(id, {"state": "running", "turn_id": "child-says"})


serve({"session.submit": submit, "session.history": history, "session.status": status})
