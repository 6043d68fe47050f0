/**
 * Where a transport stands. A bare transport never reports `version_skew`: only the handshake
 * layer ({@link CarrierClient}) knows versions.
 */
export type TransportState = "disconnected" | "connecting" | "connected";

/** A subscription; `dispose()` unregisters its handler (twice is harmless). */
export interface Disposable {
  dispose(): void;
}

/** How the peer closed the pipe. */
export interface CloseInfo {
  code: number;
  reason: string;
}

/** A JSON object: what one text frame carries. */
export type JsonObject = { [key: string]: unknown };

/** An inbound frame: a text frame's JSON object, or a binary frame's bytes. */
export type InboundFrame = JsonObject | Uint8Array;

/** An outbound frame: an object goes as one JSON text frame, bytes as one binary frame. */
export type OutboundFrame = JsonObject | Uint8Array | ArrayBuffer | ArrayBufferView;

/**
 * The one swappable seam between {@link CarrierClient} and whatever carries its frames
 * (docs/protocol.md, "Client behaviour"). A transport is a frame pipe: it never reads method names,
 * matches responses or reorders anything.
 *
 * - `connect()` resolves once the pipe is open (`connected`) and rejects when the first attempt
 *   fails (back to `disconnected`, no retry in the background);
 * - `disconnect()` closes on purpose and stops every retry;
 * - one `send` is exactly one frame; `send` throws a `not_connected` error unless `connected`;
 * - inbound text that is not a JSON object is dropped (logged), never thrown;
 * - after an unexpected break of an open pipe it reconnects with backoff 1, 2, 4, 8, 16, 30 s
 *   (capped), reset after a successful reconnect, never after a refusal (close 1008);
 * - every state change is reported once, never the same state twice in a row.
 */
export interface Transport {
  readonly state: TransportState;
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  send(frame: OutboundFrame): void;
  onMessage(handler: (frame: InboundFrame) => void): Disposable;
  onStateChange(handler: (state: TransportState, previous: TransportState) => void): Disposable;
  /** Optional: how the peer last closed, so the client can tell "refused" (1008) from "lost". */
  readonly lastClose?: CloseInfo | null;
  /** Optional: bytes queued but not yet sent, for pacing uploads. */
  readonly bufferedAmount?: number;
}

/** What {@link WsTransport} needs of a WebSocket (the browser's, Node 22's, or the `ws` package's). */
export interface WebSocketLike {
  binaryType: string;
  readonly bufferedAmount: number;
  send(data: string | ArrayBufferLike | ArrayBufferView): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: "open" | "message" | "close" | "error", listener: (event: any) => void): void;
}

/** A WebSocket class. */
export type WebSocketClass = new (url: string, protocols?: string | string[]) => WebSocketLike;

/** Options of {@link WsTransport}. */
export interface WsTransportOptions {
  /** Sent as the WebSocket subprotocol, never in the URL; omit for an `--open` carrier. */
  token?: string;
  /** Subprotocols to offer instead of `[token]`. */
  protocols?: string[];
  /** Reconnect after an unexpected break (default true). */
  reconnect?: boolean;
  /** Defaults to {@link RECONNECT_DELAYS_MS}. */
  reconnectDelaysMs?: readonly number[];
  /** Defaults to `globalThis.WebSocket`; on Node 20 pass the `ws` package's class. */
  WebSocket?: WebSocketClass;
  /** Timer hooks (tests). */
  setTimeout?: (fn: () => void, ms: number) => unknown;
  clearTimeout?: (handle: any) => void;
  /** Where dropped frames are reported (default `console`). */
  logger?: { warn(...args: unknown[]): void };
}

/** Delay before each reconnect attempt, in order; the last one repeats. */
export declare const RECONNECT_DELAYS_MS: readonly [1000, 2000, 4000, 8000, 16000, 30000];

/** Close code of a refused token or role: a transport never reconnects after it. */
export declare const CLOSE_POLICY_VIOLATION: 1008;

/** A {@link Transport} over one WebSocket at a time, reconnecting after unexpected breaks. */
export declare class WsTransport implements Transport {
  /** @throws TypeError for a URL that does not parse or no WebSocket class */
  constructor(url: string | URL, options?: WsTransportOptions);
  readonly state: TransportState;
  /** The URL dialled (the token is never part of it). */
  readonly url: string;
  readonly lastClose: CloseInfo | null;
  readonly bufferedAmount: number;
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  send(frame: OutboundFrame): void;
  onMessage(handler: (frame: InboundFrame) => void): Disposable;
  onStateChange(handler: (state: TransportState, previous: TransportState) => void): Disposable;
}
