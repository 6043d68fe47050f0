"""The cross-version table's rules on made-up check outputs of a protocol 1.0 build ("old") and a
1.1 build with `bulk_credit` ("new"), as the real run will produce them once 1.1 exists:

    python3 scripts/cross-version/evaluate_test.py
"""

import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import evaluate  # noqa: E402

PROTOCOL = {"old": "1.0", "new": "1.1"}
BASE = {"sessions": True, "resume": True, "permissions": True, "channels": True}


def write_combination(work, client, server, doctor_names_server=True, offer_to_old=False, bulk_ok=True):
    """The outputs of one combination, as the builds would print them."""
    cp, sp = PROTOCOL[client], PROTOCOL[server]
    d = os.path.join(work, "results", f"{client}-{server}")
    os.makedirs(d, exist_ok=True)
    announced = dict(BASE)
    if server == "new":
        announced["bulk_credit"] = client == "new" or offer_to_old
    for kind in ("rust", "js"):
        lines = [
            {"check": "handshake", "ok": True, "detail": {
                "client_protocol": cp, "server_protocol": sp, "version_skew": cp != sp,
                "server_features": announced}},
            {"check": "turn", "ok": True, "detail": {}},
            {"check": "echo", "ok": True, "detail": {}},
            {"check": "bulk", "ok": True, "detail": {}},
        ]
        for feature in BASE:
            lines.append({"check": "feature", "ok": True, "detail": {"feature": feature, "available": True}})
        if client == "new":
            if server == "new":
                detail = {"feature": "bulk_credit", "available": True}
            else:
                detail = {"feature": "bulk_credit", "available": False, "code": "unsupported_feature",
                          "component": "server", "required_protocol": "1.1",
                          "recovery": "update the carrier server to protocol 1.1 or later"}
            lines.append({"check": "feature", "ok": True, "detail": detail})
        with open(os.path.join(d, f"{kind}.jsonl"), "w") as f:
            f.write("\n".join(json.dumps(l) for l in lines) + "\n")
    compatibility = {f: {"required_protocol": "1.0", "available": True} for f in BASE}
    if server == "new":
        compatibility["bulk_credit"] = {"required_protocol": "1.1", "available": announced["bulk_credit"]}
    with open(os.path.join(d, "cli-status.json"), "w") as f:
        json.dump({"protocol_version": sp, "compatibility": compatibility}, f)
    doctor = ["this client: …", "127.0.0.1:1: carrier server", "  compatible"]
    if server == "new" and client == "old":
        doctor.append("  feature bulk_credit unavailable (needs protocol 1.1): update this client")
    if server == "old" and client == "new" and doctor_names_server:
        doctor.append("  feature bulk_credit unavailable (needs protocol 1.1): update the server")
    files = {
        "cli-doctor.out": "\n".join(doctor) + "\n",
        "cli-send.out": "echo: cross-version\n",
        "cli-echo.out": "cross-version echo",
        "cli-bulk.cmp": "same\n" if bulk_ok else "differs\n",
    }
    for name in ("cli-status", "cli-send", "cli-echo", "cli-bulk", "cli-doctor", "rust", "js"):
        files[name + ".rc"] = "0\n"
    for name, text in files.items():
        with open(os.path.join(d, name), "w") as f:
            f.write(text)


def table(**knobs):
    with tempfile.TemporaryDirectory() as work:
        for client in ("old", "new"):
            for server in ("old", "new"):
                write_combination(work, client, server, **knobs)
        results = {(c, s): evaluate.evaluate(work, c, s)[0] for c in ("old", "new") for s in ("old", "new")}
        rendered, ok = evaluate.table(work, {"old": "0.1.0", "new": "0.2.0"})
        return results, rendered, ok


class Rules(unittest.TestCase):
    def test_every_combination_works_or_refuses_naming_the_older_side(self):
        results, rendered, ok = table()
        self.assertTrue(ok, rendered)
        for kind in ("CLI", "Rust client", "JS client"):
            self.assertEqual(results[("old", "old")][kind], "works")
            self.assertEqual(results[("new", "new")][kind], "works")
        self.assertIn("bulk_credit refused (unsupported_feature): update the carrier server",
                      results[("new", "old")]["Rust client"])
        self.assertIn("bulk_credit refused: update the server", results[("new", "old")]["CLI"])
        self.assertIn("bulk_credit not offered (client predates it: update the client)",
                      results[("old", "new")]["JS client"])
        self.assertIn("bulk_credit refused: update this client", results[("old", "new")]["CLI"])
        self.assertIn("(version skew)", results[("old", "new")]["CLI"])
        self.assertIn("| CLI 0.1.0 (protocol 1.0) |", rendered)
        self.assertIn("server 0.2.0 (protocol 1.1)", rendered)

    def test_a_doctor_that_names_no_side_fails_the_cell(self):
        results, _, ok = table(doctor_names_server=False)
        self.assertFalse(ok)
        self.assertIn("doctor names no side to update", results[("new", "old")]["CLI"])

    def test_a_feature_offered_to_a_client_that_predates_it_fails(self):
        results, _, ok = table(offer_to_old=True)
        self.assertFalse(ok)
        self.assertIn("announced to a client that predates it", results[("old", "new")]["Rust client"])
        self.assertIn("the server offers it", results[("old", "new")]["CLI"])

    def test_a_bulk_transfer_that_differs_fails(self):
        results, _, ok = table(bulk_ok=False)
        self.assertFalse(ok)
        self.assertIn("pipe bulk", results[("old", "old")]["CLI"])


if __name__ == "__main__":
    unittest.main()
