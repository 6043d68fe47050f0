/**
 * carrier-client: the JavaScript client of a carrier (a loopback WebSocket carrier for agent
 * sessions). ES modules, no build step, no runtime dependencies; the carrier serves the same
 * files at `GET /client.js` (which re-exports everything this entry does).
 *
 * - `./transport.js` — the `Transport` contract and `WsTransport`;
 * - `./client.js` — `CarrierClient`, the handshake layer over any transport;
 * - `./frames.js` — the payload-channel frame codec;
 * - `./errors.js` — `CarrierError`;
 * - `./wire.d.ts` — the wire types, generated from the Rust method catalog;
 * - `./catalog.js` — the catalog's tables (methods, features, versions), generated likewise and
 *   re-exported by `./client.js`.
 *
 * @module carrier-client
 */

export * from "./client.js";
