import type { CloseInfo, Disposable, InboundFrame, OutboundFrame, Transport, TransportState } from "../transport.js";

/** The near half: a {@link Transport} whose pipe is a `MessagePort`. */
export declare class PortTransport implements Transport {
  constructor(port: MessagePort);
  readonly state: TransportState;
  readonly lastClose: CloseInfo | null;
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  send(frame: OutboundFrame): void;
  onMessage(handler: (frame: InboundFrame) => void): Disposable;
  onStateChange(handler: (state: TransportState, previous: TransportState) => void): Disposable;
  /** Closes the port; the far side's bridge disconnects its transport. */
  close(): void;
}

/** The far half: serves `port` from `inner`; the returned function stops serving. */
export declare function bridgeTransport(port: MessagePort, inner: Transport): () => void;
