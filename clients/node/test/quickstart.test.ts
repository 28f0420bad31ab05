/** The README's TypeScript quickstart, run as a user runs it, against a live server. */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { dirname, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { type RunningServer, startServer } from "./server.js";

const QUICKSTART = resolve(dirname(fileURLToPath(import.meta.url)), "../../examples/quickstart.mjs");

describe("examples/quickstart.mjs", () => {
  let server: RunningServer;

  before(async () => {
    server = await startServer();
  });

  after(async () => {
    await server.stop();
  });

  it("uses the README's agent and prints one line a rendered message, twice in a row", async () => {
    for (let run = 0; run < 2; run++) {
      // the second run finds the agent there (as after the README's grpcurl step)
      const { stdout } = await promisify(execFile)(process.execPath, [QUICKSTART, server.address, server.apiKey]);
      const lines = stdout.trimEnd().split("\n");
      assert.match(lines[0], /^opened episode ep_/);
      const context = lines.slice(lines.indexOf("context of the next model call:") + 1, -1);
      assert.ok(context.length >= 3, stdout);
      for (const line of context) assert.match(line, /^ {2}(\S+ +\S.*|\(\d+ tokens, model call mc_\w+\))$/, line);
      assert.ok(context.some((line) => line.includes("You are a helpful HR assistant.")), stdout);
      assert.ok(context.some((line) => line.includes("And sick days?")), stdout);
      assert.match(lines[lines.length - 1], /^closed: 2 messages, \d+ tokens$/);
    }
  });
});
