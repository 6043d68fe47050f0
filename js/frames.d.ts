/** The largest channel seq; a sender's numbering wraps to 0 after it. */
export declare const MAX_CHANNEL_SEQ: 4294967295;

/** A decoded binary channel frame; `payload` views the received bytes (no copy). */
export interface BinaryFrame {
  kind: "binary";
  channel: string;
  seq: number;
  payload: Uint8Array;
}

/** A decoded event channel frame; `payload` is `null` when the body had none. */
export interface EventFrame<P = unknown> {
  kind: "event";
  channel: string;
  seq: number;
  event: string;
  payload: P;
}

/** A decoded channel frame (docs/protocol.md, "Channels"). */
export type ChannelFrame = BinaryFrame | EventFrame;

/** What {@link encodeChannelFrame} takes: bytes of any view, any JSON payload (omitted: null). */
export type ChannelFrameInput =
  | { kind: "binary"; channel: string; seq: number; payload: Uint8Array | ArrayBuffer | ArrayBufferView }
  | { kind: "event"; channel: string; seq: number; event: string; payload?: unknown };

/** Why bytes are not a valid RBF v1 frame, or why a frame cannot be encoded. */
export type ChannelFrameErrorCode =
  | "invalid_frame"
  | "invalid_seq"
  | "invalid_payload"
  | "unknown_kind"
  | "empty_channel_name"
  | "channel_name_too_long"
  | "invalid_utf8"
  | "missing_event_name"
  | "invalid_input"
  | "bad_magic"
  | "truncated"
  | "unsupported_version"
  | "malformed_json"
  | "body_not_object";

/** A byte sequence that is not a valid RBF v1 channel frame, or a frame that cannot be encoded. */
export declare class ChannelFrameError extends Error {
  constructor(code: ChannelFrameErrorCode, message: string);
  readonly name: "ChannelFrameError";
  readonly code: ChannelFrameErrorCode;
}

/** Encodes one channel frame into the exact bytes of one binary WebSocket message. */
export declare function encodeChannelFrame(frame: ChannelFrameInput): Uint8Array;

/** Decodes one binary WebSocket message into a channel frame. */
export declare function decodeChannelFrame(bytes: Uint8Array | ArrayBuffer | ArrayBufferView): ChannelFrame;
