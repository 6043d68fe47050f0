// The JavaScript client's side of the cross-version checks (scripts/cross-version.sh): with the
// package in PACKAGE_DIR (the current js/ or the one of an older tag), against a carrier serving
// an `echo` and an `echo:bulk` channel: a handshake, a prompt turn, a channel echo, a bulk
// transfer, and each feature of the package's catalog as the handshake leaves it. One JSON line
// per check, like examples/cross_version_client.rs; exit 1 when a check failed.
//
//   node scripts/cross-version/js-client.mjs PACKAGE_DIR URL TOKEN
//
// It uses only what the package has offered since 0.1.0 (CarrierClient, onEvent, onChannel,
// sendChannelBinary, FEATURE_PROTOCOLS). Bulk frames are paced by the channel's credit when the
// server grants one (protocol 1.1), and by a window of echoes in flight in any case.
import path from "node:path";
import { pathToFileURL } from "node:url";

const [packageDir, url, token] = process.argv.slice(2);
if (!packageDir || !url || !token) {
  console.error("usage: js-client.mjs PACKAGE_DIR URL TOKEN");
  process.exit(2);
}
const load = (file) => import(pathToFileURL(path.resolve(packageDir, file)).href);
const { CarrierClient, FEATURE_PROTOCOLS, PROTOCOL_VERSION } = await load("index.js");
const { webSocketClass } = await load("testing/websocket-class.js");

const CHECK_TIMEOUT_MS = 30_000;
const PROMPT = "cross-version";
const BULK_BYTES = 4 << 20;
const BULK_CHUNK = 64 << 10;
const BULK_IN_FLIGHT = 512 << 10;

let allOk = true;
function report(check, ok, detail) {
  allOk &&= ok;
  console.log(JSON.stringify({ check, ok, detail }));
}

/** Resolves with `promise`, or rejects after the check timeout. */
function bounded(promise) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error("timed out")), CHECK_TIMEOUT_MS);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Orders "MAJOR.MINOR" strings. */
function below(a, b) {
  const [am, an] = a.split(".").map(Number);
  const [bm, bn] = b.split(".").map(Number);
  return am < bm || (am === bm && an < bn);
}

const client = new CarrierClient(url, { token, WebSocket: await webSocketClass(), clientName: "cross-version-js" });
/** Every event, for the checks to wait on. */
const events = [];
let wake = () => {};
client.onEvent((frame) => {
  events.push(frame);
  wake();
});
function nextEvent(pred) {
  return new Promise((resolve) => {
    const look = () => {
      const i = events.findIndex(pred);
      if (i >= 0) {
        wake = () => {};
        resolve(events.splice(i, 1)[0]);
      } else {
        wake = look;
      }
    };
    look();
  });
}

let handshake;
try {
  handshake = await bounded(client.connect());
  report("handshake", true, {
    client_protocol: PROTOCOL_VERSION,
    server_protocol: handshake.protocol_version,
    server_version: handshake.server?.version,
    version_skew: handshake.version_skew,
    server_features: handshake.features,
  });
} catch (err) {
  report("handshake", false, String(err?.message ?? err));
  process.exit(1);
}

try {
  const { turn_id: turnId } = await bounded(client.request("session.submit", { prompt: PROMPT }));
  const ofTurn = (name) => (e) => e.event === name && e.payload?.turn_id === turnId;
  const completed = await bounded(nextEvent(ofTurn("session.turn_completed")));
  const deltas = events.filter(ofTurn("session.text_delta")).map((e) => e.payload.delta).join("");
  const expected = `echo: ${PROMPT}`;
  report("turn", deltas === expected && completed.payload.text === expected, { deltas, text: completed.payload.text });
} catch (err) {
  report("turn", false, String(err?.message ?? err));
}

try {
  const body = new TextEncoder().encode("cross-version echo");
  const echoed = new Promise((resolve) => {
    const sub = client.onChannel("echo", (frame) => {
      sub.dispose?.();
      resolve(frame);
    });
  });
  client.sendChannelBinary("echo", body);
  const frame = await bounded(echoed);
  const same = frame.kind === "binary" && Buffer.from(frame.payload ?? []).equals(Buffer.from(body));
  report("echo", same, { same_body: same, kind: frame.kind });
} catch (err) {
  report("echo", false, String(err?.message ?? err));
}

try {
  const descriptor = (handshake.channels ?? []).find((c) => c.name === "bulk");
  const credit = typeof descriptor?.credit === "number" ? descriptor.credit : null;
  let available = credit ?? Infinity;
  const data = new Uint8Array(BULK_BYTES).map((_, i) => i % 251);
  let sent = 0;
  let echoed = 0;
  let failure = null;
  let progress = () => {};
  const bulkSub = client.onChannel("bulk", (frame) => {
    const bytes = new Uint8Array(frame.payload ?? []);
    const end = echoed + bytes.length;
    if (frame.kind !== "binary" || end > sent || !Buffer.from(bytes).equals(Buffer.from(data.subarray(echoed, end)))) {
      failure ??= `the echo differs at byte ${echoed}`;
    }
    echoed = end;
    progress();
  });
  const creditSub = client.onEvent((e) => {
    if (e.event === "channel.credit" && e.payload?.channel === "bulk") available += e.payload.bytes;
    if (e.event === "protocol_error") failure ??= `protocol_error: ${JSON.stringify(e.payload)}`;
    progress();
  });
  await bounded(
    new Promise((resolve, reject) => {
      const step = () => {
        if (failure) return reject(new Error(failure));
        while (sent < data.length) {
          const end = Math.min(sent + BULK_CHUNK, data.length);
          if (sent - echoed + (end - sent) > BULK_IN_FLIGHT || available < end - sent) break;
          client.sendChannelBinary("bulk", data.subarray(sent, end));
          if (credit !== null) available -= end - sent;
          sent = end;
        }
        if (echoed >= data.length) resolve();
      };
      progress = step;
      step();
    }),
  );
  bulkSub.dispose?.();
  creditSub.dispose?.();
  report("bulk", true, { bytes: BULK_BYTES, credit });
} catch (err) {
  report("bulk", false, String(err?.message ?? err));
}

// What the handshake leaves of each feature of this package's catalog, by the rule the Rust
// client's preflight applies: available when the server announces it, or leaves it out while
// speaking a protocol that has it; otherwise refused, naming the server.
const serverProtocol = handshake.protocol_version;
for (const [feature, required] of Object.entries(FEATURE_PROTOCOLS)) {
  const announced = handshake.features?.[feature];
  if (announced === true || (announced === undefined && !below(serverProtocol, required))) {
    report("feature", true, { feature, available: true });
    continue;
  }
  // As the Rust client's preflight words it. A feature of this client's own catalog never
  // needs a newer client, so what is missing is the server's: its protocol, or its host.
  const component = "server";
  const recovery = below(serverProtocol, required)
    ? `update the carrier server to protocol ${required} or later`
    : `the host did not enable ${feature}; ask the host to wire it, or update the carrier server to a build that has it`;
  report("feature", true, { feature, available: false, code: "unsupported_feature", component, required_protocol: required, recovery });
}
await client.disconnect();
process.exit(allOk ? 0 : 1);
