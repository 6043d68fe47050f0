"""A clone of the embedded demo agent that says "child:" where it says "echo:": a client must
not be able to tell the two apart except by that text. `echo_clone.py DELAY_MS`."""

import os
import queue
import re
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from agentlib import answer, emit, fail, serve  # noqa: E402

DELAY = int(sys.argv[1]) / 1000.0 if len(sys.argv) > 1 else 0.01
turns = {}  # turn_id -> {"cancel": Event, "decision": Queue}


def run(turn_id, prompt, cancel, decision):
    if prompt.startswith("/tool "):
        rest = prompt[len("/tool "):]
        emit("session.permission_request", {
            "turn_id": turn_id, "request_id": turn_id + ".p1",
            "tool": "demo.tool", "input": {"command": rest},
        })
        answer_ = decision.get()
        if cancel.is_set():
            return
        text = "tool ran: " + rest if answer_ == "allow" else "tool denied"
    else:
        text = "child: " + prompt
    for i, delta in enumerate(re.findall(r"\s*\S+\s*$|\s*\S+", text)):
        if i > 0:
            time.sleep(DELAY)
        if cancel.is_set():
            return
        emit("session.text_delta", {"turn_id": turn_id, "delta": delta})
    emit("session.turn_completed", {"turn_id": turn_id, "text": text, "aborted": False})


def submit(id, params):
    turn = {"cancel": threading.Event(), "decision": queue.Queue()}
    turns[params["turn_id"]] = turn
    answer(id, {})
    threading.Thread(
        target=run, daemon=True,
        args=(params["turn_id"], params["prompt"], turn["cancel"], turn["decision"]),
    ).start()


def abort(id, params):
    turn = turns.pop(params["turn_id"], None)
    if turn is None:
        return fail(id, "not_found", "no such turn")
    turn["cancel"].set()
    turn["decision"].put("deny")
    answer(id, {})


def respond(id, params):
    turn_id = params["request_id"].rsplit(".p", 1)[0]
    if turn_id not in turns:
        return fail(id, "not_found", "no such request")
    turns[turn_id]["decision"].put(params["decision"])
    answer(id, {})


serve({"session.submit": submit, "session.abort": abort, "session.permission.respond": respond})
