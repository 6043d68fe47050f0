/**
 * Runs the reference suite through the `MessagePort` pair of `examples/message-port.js`: the
 * harness's own transport is served by `bridgeTransport` on one end of a `MessageChannel`, and
 * the suite drives a `PortTransport` on the other end. What the suite checks is therefore what
 * a transport written only against the interface delivers.
 *
 * @module carrier-client/testing/port-harness
 */

import { bridgeTransport, PortTransport } from "../examples/message-port.js";

/**
 * @param {import("./suite.js").Harness} base
 * @returns {import("./suite.js").Harness}
 */
export function portHarness(base) {
  return {
    name: `PortTransport over a MessageChannel, bridged to ${base.name}`,
    start: async () => {
      const run = await base.start();
      /** @type {(() => void)[]} */
      const stops = [];
      return {
        ...run,
        makeTransport: (options) => {
          const inner = run.makeTransport(options);
          const { port1, port2 } = new MessageChannel();
          stops.push(bridgeTransport(port2, inner));
          const outer = new PortTransport(port1);
          stops.push(() => outer.close());
          return outer;
        },
        stop: async () => {
          for (const stop of stops) stop();
          await run.stop();
        },
      };
    },
  };
}
