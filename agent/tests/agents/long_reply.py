"""Streams a reply far longer than the carrier keeps: `session.submit {prompt: "N"}` streams N
deltas of CHUNK (65,530 bytes of 1- to 4-byte characters), then one delta of BIG_DELTA bytes
in a single line, then `turn_completed` with the first FINAL_BYTES of the stream as its text
(the whole reply could not travel in one line). `flagged` streams "abc" and ends with the
text "ab" marked `truncated` by the child itself. Any other prompt is answered "abc" in three
deltas. Lines are written raw UTF-8 (no \\u escapes), so a client can measure a delta by its
frame."""

import json
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(__file__))
from agentlib import answer, serve  # noqa: E402

UNIT = "aé€😀"  # 1 + 2 + 3 + 4 bytes
CHUNK = UNIT * 6553  # 65,530 bytes
BIG_DELTA = 900 * 1024  # one line under the carrier's 1 MiB line cap
FINAL_BYTES = 768 * 1024

out = sys.stdout.buffer
lock = threading.Lock()


def line(frame):
    return (json.dumps(frame, ensure_ascii=False) + "\n").encode()


def write(data):
    with lock:
        out.write(data)
        out.flush()


def delta(turn_id, text):
    return line({"event": "session.text_delta", "payload": {"turn_id": turn_id, "delta": text}})


def completed(turn_id, text, truncated=None):
    payload = {"turn_id": turn_id, "text": text, "aborted": False}
    if truncated is not None:
        payload["truncated"] = truncated
    return line({"event": "session.turn_completed", "payload": payload})


def stream(turn_id, count):
    one = delta(turn_id, CHUNK)
    for _ in range(count):
        write(one)
    encoded = CHUNK.encode()
    big = (encoded * (BIG_DELTA // len(encoded) + 1))[:BIG_DELTA].decode("utf-8", "ignore")
    write(delta(turn_id, big))
    final = (encoded * (FINAL_BYTES // len(encoded) + 1))[:FINAL_BYTES].decode("utf-8", "ignore")
    write(completed(turn_id, final))


def small(turn_id, flagged):
    for piece in ("a", "b", "c"):
        write(delta(turn_id, piece))
    write(completed(turn_id, "ab", True) if flagged else completed(turn_id, "abc"))


def submit(id, params):
    answer(id, {})
    prompt = params["prompt"]
    if prompt.isdigit():
        target = lambda: stream(params["turn_id"], int(prompt))  # noqa: E731
    else:
        target = lambda: small(params["turn_id"], prompt == "flagged")  # noqa: E731
    threading.Thread(target=target, daemon=True).start()


serve({"session.submit": submit})
