/**
 * A real Episodic server for the tests: `episodic serve` on 127.0.0.1:0 with a throwaway
 * SQLite file, the hashing embedder and two API keys of one tenant (`apiKey` may also write
 * knowledge, `readerApiKey` may only read it), stopped with SIGTERM at the end.
 * EPISODIC_BIN overrides the command (default: the repository's .venv/bin/episodic).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const PACKAGE_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const DEFAULT_BIN = resolve(PACKAGE_DIR, "../../.venv/bin/episodic");
const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 10_000;

export const TENANT = "tenant-node";

export interface RunningServer {
  address: string;
  apiKey: string;
  readerApiKey: string;
  stop(): Promise<void>;
}

export async function startServer(): Promise<RunningServer> {
  const apiKey = `epk_node_test_${randomBytes(16).toString("hex")}`;
  const readerApiKey = `epk_node_test_${randomBytes(16).toString("hex")}`;
  const dir = mkdtempSync(join(tmpdir(), "episodic-node-"));
  const args = [
    "serve",
    "--address=127.0.0.1:0",
    `--database-url=sqlite:///${join(dir, "t.db")}`,
    "--embedder=hashing",
    `--api-keys=${keyEntry(apiKey)};knowledge=write,${keyEntry(readerApiKey)}`,
    "--shutdown-grace-seconds=1",
    "--no-access-log",
  ];
  const child = spawn(process.env.EPISODIC_BIN ?? DEFAULT_BIN, args, {
    env: withoutEpisodicSettings(process.env),
    stdio: ["ignore", "ignore", "pipe"],
  });
  // If the test process dies without calling stop(), the server must not outlive it.
  const killOnExit = (): void => void child.kill("SIGKILL");
  process.once("exit", killOnExit);
  const stop = async (): Promise<void> => {
    process.off("exit", killOnExit);
    await terminate(child);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const port = await servingPort(child);
    return { address: `127.0.0.1:${port}`, apiKey, readerApiKey, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

function keyEntry(key: string): string {
  return `${TENANT}=sha256:${createHash("sha256").update(key).digest("hex")}`;
}

/** The environment less EPISODIC_* settings, so a developer's shell cannot change the server under test. */
function withoutEpisodicSettings(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(env).filter(([name]) => !name.startsWith("EPISODIC_")));
}

/** The port from the server's JSON "serving" log line on stderr. */
function servingPort(child: ChildProcess): Promise<number> {
  const seen: string[] = [];
  return new Promise<number>((resolvePort, reject) => {
    const fail = (why: string): void =>
      reject(new Error(`episodic serve ${why}; its last output:\n${seen.join("\n")}`));
    const timer = setTimeout(() => fail(`did not serve within ${START_TIMEOUT_MS} ms`), START_TIMEOUT_MS);
    child.once("error", (error) => {
      clearTimeout(timer);
      fail(`could not start (${error.message}); set EPISODIC_BIN to the episodic command`);
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      fail(`exited with ${code} before serving`);
    });
    const lines = createInterface({ input: child.stderr! });
    lines.on("line", (line) => {
      seen.push(line);
      seen.splice(0, seen.length - 20);
      const port = portOf(line);
      if (port !== undefined) {
        clearTimeout(timer);
        resolvePort(port);
      }
    });
  });
}

function portOf(line: string): number | undefined {
  if (!line.startsWith("{")) {
    return undefined;
  }
  try {
    const record = JSON.parse(line) as { message?: unknown; port?: unknown };
    return record.message === "serving" && typeof record.port === "number" ? record.port : undefined;
  } catch {
    return undefined;
  }
}

async function terminate(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) {
    return;
  }
  const exited = new Promise<void>((done) => child.once("exit", () => done()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), STOP_TIMEOUT_MS);
  await exited;
  clearTimeout(timer);
}
