/**
 * The WebSocket class for tests on real sockets: the runtime's own (browsers, Node 22+), else
 * the `ws` package (a dev dependency, for Node 20).
 *
 * @module carrier-client/testing/websocket-class
 */

/** @returns {Promise<any>} */
export async function webSocketClass() {
  if (typeof globalThis.WebSocket === "function") return globalThis.WebSocket;
  try {
    const ws = await import("ws");
    return ws.WebSocket;
  } catch (err) {
    throw new Error(`this Node (${process.version}) has no global WebSocket and the \`ws\` dev dependency is missing: run \`npm ci\` in js/ (${err.message})`);
  }
}
