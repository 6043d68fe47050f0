/**
 * A real `carrier serve` child process for the tests that need one (Node only). The binary is
 * `$CARRIER_BIN`, else `../target/debug/carrier` beside this package (what `cargo build` makes).
 *
 * @module carrier-client/testing/carrier
 */

import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const DEFAULT_BIN = fileURLToPath(new URL("../../target/debug/carrier", import.meta.url));
const START_TIMEOUT_MS = 20_000;
const STOP_TIMEOUT_MS = 5_000;

/**
 * Starts `carrier serve --port 0` with `extraArgs` and reads its listening line.
 * @param {string[]} [extraArgs]
 * @returns {Promise<{port: number, token: string, url: string, stderr: () => string, stop: () => Promise<void>}>}
 */
export async function startCarrier(extraArgs = []) {
  const bin = process.env.CARRIER_BIN ?? DEFAULT_BIN;
  const runtimeDir = mkdtempSync(join(tmpdir(), "carrier-js-test-"));
  // The developer's settings must not leak into the server under test.
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("CARRIER_")));
  env.XDG_RUNTIME_DIR = runtimeDir;
  const child = spawn(bin, ["serve", "--port", "0", ...extraArgs], { env, stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (text) => {
    stderr = (stderr + text).slice(-20_000);
  });
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const lines = createInterface({ input: child.stdout });
  const listening = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`carrier serve printed no listening line in ${START_TIMEOUT_MS} ms\n${stderr}`)), START_TIMEOUT_MS);
    child.once("error", (err) => {
      clearTimeout(timer);
      reject(new Error(`cannot start ${bin} (build it with \`cargo build\`, or set CARRIER_BIN): ${err.message}`));
    });
    exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`carrier serve exited (${code}) before listening\n${stderr}`));
    });
    lines.once("line", (line) => {
      clearTimeout(timer);
      try {
        resolve(JSON.parse(line));
      } catch {
        reject(new Error(`unexpected first line from carrier serve: ${line}`));
      }
    });
  });
  return {
    port: listening.port,
    token: listening.token,
    url: listening.url,
    stderr: () => stderr,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), STOP_TIMEOUT_MS);
        await exited;
        clearTimeout(timer);
      }
      rmSync(runtimeDir, { recursive: true, force: true });
    },
  };
}
