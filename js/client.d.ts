import type { ChannelFrame } from "./frames.js";
import type { Disposable, Transport, TransportState, WsTransportOptions } from "./transport.js";
import type {
  EventName,
  Events,
  HandshakeResult,
  MethodName,
  MethodParams,
  MethodResult,
  Role,
  SessionEventName,
} from "./wire.js";

export { CarrierError } from "./errors.js";
export type { CarrierErrorCode, ClientErrorCode } from "./errors.js";
export { ChannelFrameError, decodeChannelFrame, encodeChannelFrame, MAX_CHANNEL_SEQ } from "./frames.js";
export type { BinaryFrame, ChannelFrame, ChannelFrameErrorCode, ChannelFrameInput, EventFrame } from "./frames.js";
export { CLOSE_POLICY_VIOLATION, RECONNECT_DELAYS_MS, WsTransport } from "./transport.js";
export type {
  CloseInfo,
  Disposable,
  InboundFrame,
  JsonObject,
  OutboundFrame,
  Transport,
  TransportState,
  WebSocketClass,
  WebSocketLike,
  WsTransportOptions,
} from "./transport.js";
export type * from "./wire.js";

/** The protocol's tables (versions, methods, features), generated from the Rust method catalog. */
export { CLIENT_VERSION, FEATURE_PROTOCOLS, METHOD_CATALOG, MIN_COMPATIBLE_PROTOCOL, PROTOCOL_VERSION } from "./catalog.js";
/** What feature preflight consults: the methods that need a feature. */
export declare const METHOD_FEATURES: { readonly [method: string]: { readonly feature: string; readonly requiredProtocol: string } };

/** Where the client stands: the transport's state, and `version_skew` once handshaken with a peer of another minor. */
export type ConnectionState = TransportState | "version_skew";

/** An inbound text event, discriminated by name: `seq` on session events only. */
export type ServerEvent = {
  [E in EventName]: E extends SessionEventName
    ? { event: E; seq: number; payload: Events[E] }
    : { event: E; seq?: undefined; payload: Events[E] };
}[EventName];

/** The methods `request()` sends (the client performs the handshake itself). */
export type RequestMethod = Exclude<MethodName, "system.handshake">;

/** `request()`'s params argument: optional when every field of the method's params is. */
export type RequestParams<M extends MethodName> = {} extends MethodParams<M> ? [params?: MethodParams<M>] : [params: MethodParams<M>];

/** Options of both constructors. */
export interface CarrierClientOptions {
  /** `observe`: refuse drive-role requests and channel sends locally (and ask for the role, URL form). */
  role?: Role;
  /** A request (or handshake) without a response by then rejects with `timeout` (default 30 000). */
  requestTimeoutMs?: number;
  /** The handshake's `client.name` (default `carrier-web`). */
  clientName?: string;
  /** Timer hooks (tests). */
  setTimeout?: (fn: () => void, ms: number) => unknown;
  clearTimeout?: (handle: any) => void;
  /** Overrides {@link METHOD_FEATURES}. */
  methodFeatures?: { [method: string]: { feature: string; requiredProtocol: string } };
}

/** Options of `new CarrierClient(url, options)`: the client builds a {@link WsTransport}. */
export interface CarrierClientUrlOptions extends CarrierClientOptions, Pick<WsTransportOptions, "token" | "reconnect" | "WebSocket"> {}

/** One client session with a carrier, over any {@link Transport}. */
export declare class CarrierClient {
  /** Dials `url` with a {@link WsTransport} (token as the subprotocol, `?role=observe` when asked). */
  constructor(url: string | URL, options?: CarrierClientUrlOptions);
  /** Runs over `transport`, which carries any credentials itself. */
  constructor(transport: Transport, options?: CarrierClientOptions);

  readonly transport: Transport;
  readonly state: ConnectionState;
  /** The latest handshake result; its `resume` says what the last resume did. */
  readonly handshakeResult: HandshakeResult | null;
  /** Why the client last went `disconnected` on its own; null after a successful handshake. */
  readonly lastError: import("./errors.js").CarrierError | null;
  /** Highest session-event `seq` delivered for the current session. */
  readonly lastSeq: number;
  /** The session this connection is bound to. */
  readonly sessionId: string | null;
  /** Bytes queued by the transport but not yet sent. */
  readonly bufferedAmount: number;

  /** Connects the transport if needed and performs the handshake (resuming the last session). */
  connect(): Promise<HandshakeResult>;
  /** Disconnects the transport and stops; outstanding requests reject with `disconnected`. */
  disconnect(): Promise<void>;
  /** Sends a request and resolves with its result, typed by method name. */
  request<M extends RequestMethod>(method: M, ...params: RequestParams<M>): Promise<MethodResult<M>>;
  /** Every inbound text event (session events deduplicated by `seq`). */
  onEvent(handler: (frame: ServerEvent) => void): Disposable;
  onStateChange(handler: (state: ConnectionState, previous: ConnectionState) => void): Disposable;
  /** Decoded inbound frames of one channel; `"*"` for every channel. */
  onChannel(channel: string, handler: (frame: ChannelFrame) => void): Disposable;
  /** Sends an event frame on a channel; returns the seq it carried. */
  sendChannelEvent(channel: string, event: string, payload?: unknown): number;
  /** Sends opaque bytes on a binary channel; returns the seq it carried. */
  sendChannelBinary(channel: string, bytes: Uint8Array | ArrayBuffer | ArrayBufferView): number;
  /**
   * Sends opaque bytes on a bulk channel within its credit (protocol 1.1): waits until the
   * credit covers them, never sends past it, keeps the order of sends. Against a server that
   * gave no credit (1.0) it sends at once. Resolves with the seq the frame carried.
   */
  sendChannelBulk(channel: string, bytes: Uint8Array | ArrayBuffer | ArrayBufferView): Promise<number>;
  /** Bytes this client may send on a bulk channel now; `null` when the server gave no credit there. */
  creditOf(channel: string): number | null;
}
