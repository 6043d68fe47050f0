"""Fails the handshake: `bad_handshake.py MODE PIDFILE`, MODE = incompatible | error | exit |
silent. Writes its pid to PIDFILE first, so tests can check it did not outlive the carrier."""

import json
import os
import sys

mode, pidfile = sys.argv[1], sys.argv[2]
with open(pidfile, "w") as f:
    f.write(str(os.getpid()))
line = sys.stdin.readline()
request = json.loads(line)
if mode == "incompatible":
    result = {"protocol_version": "2.0", "min_compatible_protocol": "2.0", "server": {"name": "future"}}
    print(json.dumps({"id": request["id"], "result": result}), flush=True)
elif mode == "error":
    error = {"code": "internal", "message": "no model configured"}
    print(json.dumps({"id": request["id"], "error": error}), flush=True)
elif mode == "exit":
    sys.exit(5)
# Every mode then waits for stdin to close (silent never answers at all).
for _ in sys.stdin:
    pass
