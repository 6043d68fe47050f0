// A consumer of the package that uses every public export, checked with
// `tsc --strict --noEmit -p types-test` (never run). Each `@ts-expect-error` marks a line that
// must NOT type-check; cli/tests/it/js_client.rs removes them all and expects tsc to fail on each.
import {
  CarrierClient,
  CarrierError,
  ChannelFrameError,
  CLIENT_VERSION,
  CLOSE_POLICY_VIOLATION,
  decodeChannelFrame,
  encodeChannelFrame,
  FEATURE_PROTOCOLS,
  MAX_CHANNEL_SEQ,
  METHOD_CATALOG,
  METHOD_FEATURES,
  MIN_COMPATIBLE_PROTOCOL,
  PROTOCOL_VERSION,
  RECONNECT_DELAYS_MS,
  WsTransport,
} from "carrier-client";
import type {
  BinaryFrame,
  CarrierClientOptions,
  CarrierClientUrlOptions,
  RequestParams,
  AbortParams,
  AppInfo,
  ChannelDropped,
  ChannelsListResult,
  Decision,
  DeliveryClass,
  DriverInfo,
  Empty,
  Events,
  FeatureCompatibility,
  FeatureName,
  HandshakeParams,
  HistoryEntry,
  HistoryParams,
  HistoryRole,
  LimitsInfo,
  PermissionRequest,
  PermissionResolved,
  PermissionRespondParams,
  ProtocolErrorPayload,
  ProtocolVersion,
  ResumeRequest,
  Role,
  RoleResult,
  SessionErrorEvent,
  SessionEventName,
  SessionIdResult,
  SessionState,
  SessionStatusResult,
  SessionSummary,
  SessionsListResult,
  SessionsStartParams,
  SessionsSwitchParams,
  SystemStatusResult,
  TextDelta,
  TurnCompleted,
  TurnStarted,
  UsageReportParams,
  UsageReportResult,
  UsageScope,
  CarrierErrorCode,
  ChannelDescriptor,
  ChannelFrame,
  ChannelFrameErrorCode,
  ChannelFrameInput,
  ClientErrorCode,
  CloseInfo,
  ConnectionState,
  Disposable,
  EffectState,
  ErrorCode,
  ErrorObject,
  EventFrame,
  EventName,
  HandshakeResult,
  HistoryResult,
  InboundFrame,
  JsonObject,
  MethodName,
  MethodParams,
  MethodResult,
  OutboundFrame,
  ProtocolErrorCode,
  RequestMethod,
  ResumeOutcome,
  ServerEvent,
  SubmitParams,
  Transport,
  TransportState,
  TurnIdResult,
  WebSocketClass,
  WebSocketLike,
  WsTransportOptions,
} from "carrier-client";
import { WsTransport as WsTransportFromSubpath } from "carrier-client/transport";
import { encodeChannelFrame as encodeFromSubpath } from "carrier-client/frames";
import { CarrierError as CarrierErrorFromSubpath } from "carrier-client/errors";
import { CarrierClient as CarrierClientFromSubpath } from "carrier-client/client";
import type { Methods } from "carrier-client/wire";
import { bridgeTransport, PortTransport } from "carrier-client/examples/message-port.js";

// -- a transport of one's own: the seam -----------------------------------------------------------

class LoggingTransport implements Transport {
  readonly #inner: Transport;
  readonly lastClose: CloseInfo | null = null;
  constructor(inner: Transport) {
    this.#inner = inner;
  }
  get state(): TransportState {
    return this.#inner.state;
  }
  connect(): Promise<void> {
    return this.#inner.connect();
  }
  disconnect(): Promise<void> {
    return this.#inner.disconnect();
  }
  send(frame: OutboundFrame): void {
    console.log("out", frame instanceof Uint8Array ? `${frame.length} bytes` : frame);
    this.#inner.send(frame);
  }
  onMessage(handler: (frame: InboundFrame) => void): Disposable {
    return this.#inner.onMessage(handler);
  }
  onStateChange(handler: (state: TransportState, previous: TransportState) => void): Disposable {
    return this.#inner.onStateChange(handler);
  }
}

async function main(token: string): Promise<void> {
  const options: WsTransportOptions = { token, WebSocket, reconnectDelaysMs: RECONNECT_DELAYS_MS };
  const ws = new WsTransport("ws://127.0.0.1:7070/", options);
  const sameClass: typeof WsTransport = WsTransportFromSubpath;
  const domSocket: WebSocketClass = WebSocket;
  const socketShape: WebSocketLike | null = null;
  console.log(sameClass, domSocket, socketShape, ws.url, ws.lastClose?.code);

  const client = new CarrierClient(new LoggingTransport(ws), { role: "drive", requestTimeoutMs: 10_000 });
  const byUrl = new CarrierClientFromSubpath("ws://127.0.0.1:7070/", { token, role: "observe", clientName: "types" });
  const { port1, port2 } = new MessageChannel();
  const stop: () => void = bridgeTransport(port2, ws);
  const overPort = new CarrierClient(new PortTransport(port1));

  const states: ConnectionState[] = [client.state, byUrl.state, overPort.state];
  const watch: Disposable = client.onStateChange((state: ConnectionState, previous: ConnectionState) => states.push(state, previous));

  const handshake: HandshakeResult = await client.connect();
  const resume: ResumeOutcome = handshake.resume;
  if (resume.outcome === "gap") console.log(resume.from, resume.to);
  const channels: ChannelDescriptor[] = handshake.channels;

  // request() is typed by method name: the result type follows, params are checked.
  const submitted: TurnIdResult = await client.request("session.submit", { prompt: "hi" });
  const history: HistoryResult = await client.request("session.history", { limit: 10 });
  const pong = await client.request("system.ping");
  const status = await client.request("session.status", {});
  const state: "idle" | "running" | "awaiting_permission" = status.state;
  await client.request("session.permission.respond", { request_id: "p1", decision: "allow" });
  const params: SubmitParams = { prompt: "typed", options: { temperature: 0 } };
  const result: MethodResult<"session.submit"> = await client.request("session.submit", params);
  const names: MethodName[] = ["system.ping", "sessions.list"];
  const wireParams: MethodParams<"sessions.switch"> = { session_id: "s2" };
  const method: RequestMethod = "channels.list";
  const least: "drive" = METHOD_CATALOG["session.submit"].leastRole;
  const catalogFeature: Methods["sessions.list"]["feature"] = METHOD_CATALOG["sessions.list"].feature;
  const rebinds: boolean = METHOD_CATALOG["sessions.switch"].rebindsSession;

  // @ts-expect-error: a wrong method name is a type error
  await client.request("session.submitt", { prompt: "hi" });
  // @ts-expect-error: wrong params (prompt must be a string) are a type error
  await client.request("session.submit", { prompt: 42 });
  // @ts-expect-error: missing params are a type error when a field is required
  await client.request("session.submit");
  // @ts-expect-error: the client performs the handshake itself
  await client.request("system.handshake", { protocol_version: "1.0", min_compatible_protocol: "1.0" });
  // @ts-expect-error: a result has the method's result type, not another's
  const wrong: HistoryResult = await client.request("session.submit", { prompt: "x" });

  const events: Disposable = client.onEvent((frame: ServerEvent) => {
    const name: EventName = frame.event;
    switch (frame.event) {
      case "session.text_delta":
        console.log(frame.seq + 1, frame.payload.delta);
        break;
      case "session.turn_started":
        console.log(name, frame.payload.prompt, frame.payload.driver.surface);
        break;
      case "protocol_error": {
        const code: ProtocolErrorCode = frame.payload.code;
        console.log(code, frame.seq);
        break;
      }
      default:
        break;
    }
  });

  const frames: Disposable = client.onChannel("*", (frame: ChannelFrame) => {
    if (frame.kind === "binary") {
      const binary: BinaryFrame = frame;
      console.log(binary.payload.byteLength);
    } else {
      const event: EventFrame = frame;
      console.log(event.event, event.payload);
    }
  });
  const seqs: number[] = [
    client.sendChannelEvent("ui", "resize", { w: 1 }),
    client.sendChannelBinary("mic", new Uint8Array(4)),
    client.sendChannelBinary("mic", new ArrayBuffer(4)),
  ];

  const input: ChannelFrameInput = { kind: "event", channel: "ui", seq: MAX_CHANNEL_SEQ, event: "x" };
  const bytes: Uint8Array = encodeChannelFrame(input);
  const again: Uint8Array = encodeFromSubpath({ kind: "binary", channel: "mic", seq: 0, payload: new ArrayBuffer(1) });
  const decoded: ChannelFrame = decodeChannelFrame(bytes);
  // @ts-expect-error: a frame needs a known kind
  encodeChannelFrame({ kind: "text", channel: "ui", seq: 0 });

  try {
    await client.request("sessions.list");
  } catch (err) {
    if (err instanceof CarrierError || err instanceof CarrierErrorFromSubpath) {
      const code: CarrierErrorCode = err.code;
      const local: ClientErrorCode = "not_connected";
      const wire: ErrorCode = "unsupported_feature";
      const effect: EffectState | undefined = err.effectState;
      console.log(code === local || code === wire, effect, err.data);
    } else if (err instanceof ChannelFrameError) {
      const code: ChannelFrameErrorCode = err.code;
      console.log(code);
    }
  }
  const wireError: ErrorObject = { code: "busy", message: "a turn is running", effect_state: "none" };
  const closeCode: 1008 = CLOSE_POLICY_VIOLATION;
  const inbound: InboundFrame = { event: "x" } satisfies JsonObject;

  console.log(
    PROTOCOL_VERSION,
    MIN_COMPATIBLE_PROTOCOL,
    CLIENT_VERSION,
    FEATURE_PROTOCOLS.sessions,
    METHOD_FEATURES["sessions.list"]?.feature,
    client.handshakeResult?.session_id,
    client.lastError?.code,
    client.lastSeq,
    client.sessionId,
    client.bufferedAmount,
    client.transport.state,
    channels,
    submitted.turn_id,
    history.entries,
    pong,
    state,
    result,
    names,
    wireParams,
    method,
    least,
    catalogFeature,
    rebinds,
    wrong,
    seqs,
    again,
    decoded,
    wireError,
    closeCode,
    inbound,
  );
  events.dispose();
  frames.dispose();
  watch.dispose();
  await client.disconnect();
  stop();
}

// -- the other exported types: options, the request() params tuple, and every generated wire type --

const clientOptions: CarrierClientOptions = { role: "observe", requestTimeoutMs: 5_000 };
const urlOptions: CarrierClientUrlOptions = { ...clientOptions, token: "t", reconnect: false };
const submitArgs: RequestParams<"session.submit"> = [{ prompt: "hi" }];
const pingArgs: RequestParams<"system.ping"> = [];
const started: TurnStarted = { turn_id: "t1", driver: { driver_id: "local", surface: "carrier" }, prompt: "hi" };
export type GeneratedWireTypes = [
  AbortParams,
  AppInfo,
  ChannelDropped,
  ChannelsListResult,
  Decision,
  DeliveryClass,
  DriverInfo,
  Empty,
  Events,
  FeatureCompatibility,
  FeatureName,
  HandshakeParams,
  HistoryEntry,
  HistoryParams,
  HistoryRole,
  LimitsInfo,
  PermissionRequest,
  PermissionResolved,
  PermissionRespondParams,
  ProtocolErrorPayload,
  ProtocolVersion,
  ResumeRequest,
  Role,
  RoleResult,
  SessionErrorEvent,
  SessionEventName,
  SessionIdResult,
  SessionState,
  SessionStatusResult,
  SessionSummary,
  SessionsListResult,
  SessionsStartParams,
  SessionsSwitchParams,
  SystemStatusResult,
  TextDelta,
  TurnCompleted,
  UsageReportParams,
  UsageReportResult,
  UsageScope,
];
console.log(clientOptions, urlOptions, submitArgs, pingArgs, started);

main("token").catch((err: unknown) => console.error(err));
