// The package's types: the runtime API (client, transport, frames, errors) and the wire types
// generated from the Rust method catalog (wire.d.ts).
export * from "./client.js";
