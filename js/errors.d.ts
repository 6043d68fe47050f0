import type { EffectState, ErrorCode } from "./wire.js";

/** Codes the client itself uses, beside the wire's {@link ErrorCode}s. */
export type ClientErrorCode =
  /** Not connected (or not handshaken): nothing was sent. */
  | "not_connected"
  /** The pipe closed; `data` is its `{code, reason}`. */
  | "connection_closed"
  /** `disconnect()` was called. */
  | "disconnected"
  /** No answer in time. */
  | "timeout"
  /** A frame that cannot be sent (not a JSON object, not serialisable). */
  | "invalid_frame"
  /** A synchronous send on a bulk channel whose credit does not cover the frame; nothing was sent. */
  | "credit_exhausted";

/** Every code a {@link CarrierError} may carry (an agent may use codes of its own). */
export type CarrierErrorCode = ErrorCode | ClientErrorCode | (string & {});

/** A failed request, send or connection. */
export declare class CarrierError extends Error {
  constructor(code: CarrierErrorCode, message: string, details?: { data?: unknown; effectState?: EffectState });
  readonly name: "CarrierError";
  /** The wire error code (docs/protocol.md, "Errors") or a {@link ClientErrorCode}. */
  readonly code: CarrierErrorCode;
  /** Code-specific details: `unsupported_feature`'s `{feature, component, …}`, a close's `{code, reason}`. */
  readonly data: unknown;
  /** What happened to the requested effect, when known. */
  readonly effectState: EffectState | undefined;
}
