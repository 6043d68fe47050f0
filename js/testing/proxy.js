/**
 * A TCP proxy on 127.0.0.1 between a client and a real carrier, so the reference suite can do
 * to a real connection what only a network does: drop it without a close frame, refuse new
 * connections, close it with a code of its choosing, and slip frames (malformed ones too) into
 * the carrier's stream. It follows the carrier's frame boundaries, so an injected frame never
 * lands inside one of the carrier's own. Node only (`node:net`).
 *
 * @module carrier-client/testing/proxy
 */

import net from "node:net";

/**
 * Starts a proxy to `127.0.0.1:targetPort`.
 * @param {number} targetPort
 */
export async function startProxy(targetPort) {
  /** @type {Set<Link>} */
  const links = new Set();
  let admitting = true;
  let attempts = 0;
  const server = net.createServer((client) => {
    attempts += 1;
    if (!admitting) {
      client.destroy();
      return;
    }
    const link = new Link(client, net.connect(targetPort, "127.0.0.1"));
    links.add(link);
    link.closed.then(() => links.delete(link));
  });
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve(undefined));
  });
  const address = /** @type {net.AddressInfo} */ (server.address());
  const current = () => {
    const open = [...links].at(-1);
    if (!open) throw new Error("the proxy has no open connection");
    return open;
  };
  return {
    port: address.port,
    /** Connection attempts seen (refused ones included). */
    attempts: () => attempts,
    /** @param {boolean} yes accept new connections, or drop them at once */
    admit: (yes) => {
      admitting = yes;
    },
    /** Drops every open connection without a close frame (the client sees 1006). */
    breakAll: async () => {
      await Promise.all([...links].map((link) => link.drop()));
    },
    /**
     * Closes the newest connection towards the client with a close frame.
     * @param {number} code
     * @param {string} reason
     */
    close: async (code, reason) => {
      const payload = Buffer.concat([Buffer.from([code >> 8, code & 0xff]), Buffer.from(reason, "utf8")]);
      await current().inject(serverFrame(0x8, payload), { end: true });
    },
    /** @param {string | Uint8Array} frame a text or binary frame for the newest connection */
    inject: async (frame) => {
      const isText = typeof frame === "string";
      await current().inject(serverFrame(isText ? 0x1 : 0x2, isText ? Buffer.from(frame, "utf8") : Buffer.from(frame)));
    },
    stop: async () => {
      await Promise.all([...links].map((link) => link.drop()));
      await new Promise((resolve) => server.close(() => resolve(undefined)));
    },
  };
}

/** One client connection and its upstream, with the carrier's frame boundaries tracked. */
class Link {
  /** @type {Buffer[]} frames waiting for a boundary, with `end` as a last marker */
  #queue = [];
  #endAfterQueue = false;
  #waiters = [];
  #tracker = new FrameBoundaries();

  /**
   * @param {net.Socket} client
   * @param {net.Socket} upstream
   */
  constructor(client, upstream) {
    this.client = client;
    this.upstream = upstream;
    client.pipe(upstream);
    upstream.on("data", (chunk) => {
      this.#tracker.feed(chunk);
      client.write(chunk);
      this.#flush();
    });
    this.closed = new Promise((resolve) => {
      let done = false;
      const finish = () => {
        if (done) return;
        done = true;
        client.destroy();
        upstream.destroy();
        for (const waiter of this.#waiters.splice(0)) waiter();
        resolve(undefined);
      };
      for (const socket of [client, upstream]) {
        socket.on("close", finish);
        socket.on("error", finish);
      }
    });
  }

  /**
   * Writes `frame` to the client at the next frame boundary of the carrier's stream.
   * @param {Buffer} frame
   * @param {{end?: boolean}} [options] end the connection after it (a close frame)
   */
  inject(frame, { end = false } = {}) {
    return new Promise((resolve) => {
      this.#queue.push(frame);
      this.#endAfterQueue ||= end;
      this.#waiters.push(resolve);
      this.#flush();
    });
  }

  async drop() {
    this.client.destroy();
    this.upstream.destroy();
    await this.closed;
  }

  #flush() {
    if (!this.#tracker.atBoundary() || this.#queue.length === 0) return;
    const frames = Buffer.concat(this.#queue.splice(0));
    const waiters = this.#waiters.splice(0);
    const done = () => waiters.forEach((waiter) => waiter());
    if (this.#endAfterQueue) {
      this.upstream.destroy();
      this.client.end(frames, done);
    } else {
      this.client.write(frames, done);
    }
  }
}

/**
 * Follows a server's byte stream (the HTTP upgrade response, then WebSocket frames) to know
 * when it sits between two frames.
 */
class FrameBoundaries {
  #httpDone = false;
  #httpTail = "";
  /** @type {number[]} bytes of an incomplete frame header */
  #header = [];
  #remaining = 0;

  /** @param {Buffer} chunk */
  feed(chunk) {
    let offset = 0;
    if (!this.#httpDone) {
      const text = this.#httpTail + chunk.toString("latin1");
      const end = text.indexOf("\r\n\r\n");
      if (end === -1) {
        this.#httpTail = text.slice(-3);
        return;
      }
      this.#httpDone = true;
      offset = end + 4 - this.#httpTail.length;
    }
    while (offset < chunk.length) {
      if (this.#remaining > 0) {
        const take = Math.min(this.#remaining, chunk.length - offset);
        this.#remaining -= take;
        offset += take;
        continue;
      }
      this.#header.push(chunk[offset]);
      offset += 1;
      const needed = headerLength(this.#header);
      if (needed !== null && this.#header.length === needed) {
        this.#remaining = payloadLength(this.#header);
        this.#header = [];
      }
    }
  }

  atBoundary() {
    return this.#httpDone && this.#remaining === 0 && this.#header.length === 0;
  }
}

/** @param {number[]} header the first bytes of a frame header */
function headerLength(header) {
  if (header.length < 2) return null;
  const len7 = header[1] & 0x7f;
  const extended = len7 === 126 ? 2 : len7 === 127 ? 8 : 0;
  const mask = header[1] & 0x80 ? 4 : 0;
  return 2 + extended + mask;
}

/** @param {number[]} header a complete frame header */
function payloadLength(header) {
  const len7 = header[1] & 0x7f;
  if (len7 < 126) return len7;
  let length = 0;
  for (const byte of header.slice(2, len7 === 126 ? 4 : 10)) length = length * 256 + byte;
  return length;
}

/**
 * An unmasked server-to-client frame.
 * @param {number} opcode
 * @param {Buffer} payload
 */
function serverFrame(opcode, payload) {
  const length = payload.length;
  let header;
  if (length < 126) {
    header = Buffer.from([0x80 | opcode, length]);
  } else if (length < 0x10000) {
    header = Buffer.from([0x80 | opcode, 126, length >> 8, length & 0xff]);
  } else {
    header = Buffer.alloc(10);
    header[0] = 0x80 | opcode;
    header[1] = 127;
    header.writeBigUInt64BE(BigInt(length), 2);
  }
  return Buffer.concat([header, payload]);
}
