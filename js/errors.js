/**
 * The one error class of the package.
 *
 * @module carrier-client/errors
 */

/**
 * A failed request, send or connection. `code` is the wire error code (docs/protocol.md, "Errors";
 * e.g. `busy`, `unsupported_feature`, `version_incompatible`) or one of the client-side codes:
 * `not_connected` (nothing was sent), `connection_closed` (`data: {code, reason}` of the close),
 * `disconnected` (the client was told to stop), `timeout`, `invalid_frame` (a frame that cannot be
 * sent), `forbidden` (refused locally: the client asked for the observe role).
 */
export class CarrierError extends Error {
  /**
   * @param {string} code
   * @param {string} message
   * @param {{data?: unknown, effectState?: string}} [details]
   */
  constructor(code, message, { data, effectState } = {}) {
    super(message);
    this.name = "CarrierError";
    /** @type {string} */
    this.code = code;
    /** @type {unknown} */
    this.data = data;
    /** What happened to the requested effect: `none`, `unknown` or `applied` (if known). */
    this.effectState = effectState;
  }
}
