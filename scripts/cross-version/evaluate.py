"""Evaluates the cross-version checks' outputs (scripts/cross-version.sh) into the result table.

    python3 evaluate.py WORK OLD_VERSION NEW_VERSION OLD_REF PROFILE WRITE ROOT

WORK/results/CLIENT-SERVER/ (CLIENT, SERVER: old or new) holds each check's output: the Rust
client's and the JS client's JSON lines (rust.jsonl, js.jsonl), the CLI's status --json, send,
pipe and doctor outputs and exit codes. A cell works when its handshake, turn, echo and bulk
transfer passed and each feature the older side lacks was refused naming that side. Prints the
table (and writes it into ROOT/docs/compatibility.md when WRITE is 1); exits 1 if a cell failed.
evaluate_test.py checks the rules on made-up outputs of a 1.0 and a 1.1 build.
"""

import json, os, re, subprocess, sys


def read(path, default=""):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default

def lines(path):
    out = []
    for line in read(path).splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out

def vkey(v):
    major, minor = v.split(".")
    return (int(major), int(minor))

def evaluate(work, client, server):
    """The cells of one combination (CLI, Rust client, JS client) and its protocols."""
    d = os.path.join(work, "results", f"{client}-{server}")
    rust = lines(os.path.join(d, "rust.jsonl"))
    js = lines(os.path.join(d, "js.jsonl"))
    hs = next((l["detail"] for l in rust if l["check"] == "handshake" and l["ok"]), None)
    if hs is None:
        hs = next((l["detail"] for l in js if l["check"] == "handshake" and l["ok"]), None)
    if hs is None:
        fail = "handshake failed"
        return {k: "FAIL: " + fail for k in ("CLI", "Rust client", "JS client")}, None
    cp, sp = hs["client_protocol"], hs["server_protocol"]
    older = min(cp, sp, key=vkey)
    status = {}
    try:
        status = json.loads(read(os.path.join(d, "cli-status.json")) or "{}")
    except ValueError:
        pass
    # The features the newer side has and the older lacks: from the clients' catalogs (their
    # preflight lines name required_protocol) and from the server's compatibility table.
    required = {}
    for l in rust + js:
        det = l.get("detail") or {}
        if l["check"] == "feature" and det.get("required_protocol"):
            required[det["feature"]] = det["required_protocol"]
    for name, c in (status.get("compatibility") or {}).items():
        required.setdefault(name, c.get("required_protocol"))
    newer = {f: r for f, r in required.items() if r and vkey(r) > vkey(older)}
    update = "server" if vkey(sp) < vkey(cp) else "client"
    skew = cp != sp
    cells = {}

    def verdict(failures, refusals):
        if failures:
            return "FAIL: " + "; ".join(failures)
        text = "works" + (" (version skew)" if skew else "")
        if refusals:
            text += "; " + "; ".join(refusals)
        return text

    # CLI
    failures, refusals = [], []
    rc = lambda name: read(os.path.join(d, name + ".rc")).strip()
    if rc("cli-status") != "0" or not status.get("protocol_version"):
        failures.append("status: " + (read(os.path.join(d, "cli-status.err")).strip()[:200] or "exit " + rc("cli-status")))
    if rc("cli-send") != "0" or read(os.path.join(d, "cli-send.out")).strip() != "echo: cross-version":
        failures.append("send: " + (read(os.path.join(d, "cli-send.err")).strip()[:200] or read(os.path.join(d, "cli-send.out"))[:100]))
    if rc("cli-echo") != "0" or read(os.path.join(d, "cli-echo.out")) != "cross-version echo":
        failures.append("pipe echo: " + read(os.path.join(d, "cli-echo.err")).strip()[:200])
    if rc("cli-bulk") != "0" or read(os.path.join(d, "cli-bulk.cmp")).strip() != "same":
        failures.append("pipe bulk: " + (read(os.path.join(d, "cli-bulk.err")).strip()[:200] or "bytes differ"))
    doctor = read(os.path.join(d, "cli-doctor.out"))
    for f, r in sorted(newer.items()):
        compat = (status.get("compatibility") or {}).get(f)
        line = re.search(rf"feature {re.escape(f)} unavailable \(needs protocol [0-9.]+\): (.*)", doctor)
        want = "update the server" if update == "server" else "update this client"
        if compat is not None and compat.get("available") is not False:
            failures.append(f"{f}: the server offers it")
        elif line is None:
            failures.append(f"{f}: doctor names no side to update")
        elif line.group(1).strip() != want:
            failures.append(f"{f}: doctor says {line.group(1).strip()!r}, not {want!r}")
        else:
            refusals.append(f"{f} refused: {line.group(1).strip()}")
    cells["CLI"] = verdict(failures, refusals)

    # Rust and JS clients: their own checks, then each newer feature refused.
    for name, got, err in (("Rust client", rust, "rust.err"), ("JS client", js, "js.err")):
        failures, refusals = [], []
        for check in ("handshake", "turn", "echo", "bulk"):
            l = next((l for l in got if l["check"] == check), None)
            if l is None or not l["ok"]:
                detail = l["detail"] if l else read(os.path.join(d, err)).strip()[-200:]
                failures.append(f"{check}: {detail}")
        features = {l["detail"]["feature"]: l["detail"] for l in got if l["check"] == "feature"}
        announced = (next((l["detail"] for l in got if l["check"] == "handshake"), {}) or {}).get("server_features") or {}
        for f in sorted(newer):
            mine = features.get(f)
            if mine is None:
                # This client predates the feature and never uses it; the server must not offer it.
                if announced.get(f) is True:
                    failures.append(f"{f}: announced to a client that predates it")
                else:
                    refusals.append(f"{f} not offered (client predates it: update the client)")
            elif mine.get("available") is not False:
                failures.append(f"{f}: available although the {update} lacks it")
            elif mine.get("code") != "unsupported_feature" or mine.get("component") != update:
                failures.append(f"{f}: refused naming {mine.get('component')!r}, not {update!r}")
            else:
                refusals.append(f"{f} refused (unsupported_feature): {mine.get('recovery')}")
        cells[name] = verdict(failures, refusals)
    return cells, (cp, sp)

def table(work, versions):
    """The markdown table over the four combinations, and whether every cell works."""
    results = {}
    for client in ("old", "new"):
        for server in ("old", "new"):
            results[(client, server)] = evaluate(work, client, server)
    all_ok = not any(
        cell.startswith("FAIL") for cells, _ in results.values() for cell in cells.values()
    )

    def proto_of(role, build):
        for (c, s), (_, protos) in results.items():
            if protos and role == "client" and c == build:
                return protos[0]
            if protos and role == "server" and s == build:
                return protos[1]
        return "?"

    head = ["client ↓ / server →"] + [
        f"server {versions[s]} (protocol {proto_of('server', s)})" for s in ("old", "new")
    ]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for kind in ("CLI", "Rust client", "JS client"):
        for client in ("old", "new"):
            label = f"{kind} {versions[client]} (protocol {proto_of('client', client)})"
            cells = [results[(client, s)][0][kind] for s in ("old", "new")]
            rows.append("| " + " | ".join([label] + cells) + " |")
    return "\n".join(rows), all_ok


def write_doc(root, block_table, old_ref, old_version, new_version, profile):
    """Replaces the table between the markers of ROOT/docs/compatibility.md."""
    git = lambda *args: subprocess.run(
        ["git", "-C", root, *args], capture_output=True, text=True
    ).stdout.strip()
    commit = git("rev-parse", "--short", "HEAD")
    dirty = git("status", "--porcelain", "--untracked-files=no")
    old_commit = git("rev-parse", "--short", old_ref + "^{commit}")
    block = (
        "<!-- cross-version:begin (written by scripts/cross-version.sh --write) -->\n"
        f"Old: {old_ref} ({old_commit}, carrier {old_version}); new: {commit}"
        f"{' with local changes' if dirty else ''} (carrier {new_version}); {profile} builds; "
        "`scripts/cross-version.sh --write`.\n\n"
        f"{block_table}\n"
        "<!-- cross-version:end -->"
    )
    path = os.path.join(root, "docs", "compatibility.md")
    text = read(path)
    pattern = re.compile(r"<!-- cross-version:begin.*?<!-- cross-version:end -->", re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = (text.rstrip() + "\n\n" if text else "# Compatibility across releases\n\n") + block + "\n"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    print(f"written to {path}", file=sys.stderr)


def main(argv):
    work, old_version, new_version, old_ref, profile, write, root = argv[1:8]
    rendered, all_ok = table(work, {"old": old_version, "new": new_version})
    print(rendered)
    if write == "1":
        write_doc(root, rendered, old_ref, old_version, new_version, profile)
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
