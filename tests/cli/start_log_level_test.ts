/** `start --log-level`: the access log at info, and the level filtering what is written. */
import { assert, assertEquals } from "../assert.ts";
import { loadOnlyModel } from "../support/harness.ts";
import { eventually, waitFor } from "../support/eventually.ts";
import { startRouterProcess } from "../support/router_process.ts";
import { freePort } from "../support/free_port.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const SECRET = "sk-start-log-test-0042";
const PROMPT = "a-prompt-the-log-must-never-show";

async function configFile(port: number): Promise<string> {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/tidegate.json`;
  await Deno.writeTextFile(
    path,
    JSON.stringify({
      listen: { host: "127.0.0.1", port },
      // Nothing listens on port 9: the request fails (502) and is still logged.
      models: [loadOnlyModel("m", { instances: [{ id: "a", url: "http://127.0.0.1:9" }] })],
    }),
  );
  return path;
}

function ask(url: string): Promise<Response> {
  return fetch(`${url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${SECRET}` },
    body: JSON.stringify({ model: "m", prompt: PROMPT, max_tokens: 1 }),
  });
}

Deno.test("start at the default level writes one access line per request, without secrets", async () => {
  const router = await startRouterProcess(await configFile(0));
  try {
    const response = await ask(router.url);
    await response.body?.cancel();
    const line = await waitFor(
      () => router.log.find((l) => l.includes('"msg":"request"')),
      10_000,
      "the access line",
    );
    const entry = JSON.parse(line);
    assertEquals(entry.level, "info");
    assertEquals(entry.requestId, response.headers.get("x-request-id"));
    assertEquals(entry.model, "m");
    assertEquals(entry.status, response.status);
    assert(!line.includes(SECRET) && !line.includes(PROMPT), line);
  } finally {
    await router.stop();
  }
});

function whenServing(url: string, timeoutMs: number): Promise<void> {
  return eventually(
    async () => {
      try {
        const response = await fetch(`${url}/healthz`);
        await response.body?.cancel();
        return true;
      } catch {
        return false; // not listening yet
      }
    },
    timeoutMs,
    `${url} serving`,
  );
}

Deno.test("start --log-level warn writes no info lines: no access log", async () => {
  const port = freePort(); // told to the router: at warn it logs no listening line
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "cli/main.ts",
      "start",
      "--config",
      await configFile(port),
      "--log-level",
      "warn",
    ],
    cwd: ROOT,
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const stderr = new Response(child.stderr).text();
  try {
    const url = `http://127.0.0.1:${port}`;
    await whenServing(url, 20_000);
    await (await ask(url)).body?.cancel();
  } finally {
    child.kill("SIGTERM");
    await child.status;
  }
  const lines = (await stderr).split("\n").filter((l) => l.startsWith("{"));
  const levels = lines.map((l) => JSON.parse(l).level);
  assertEquals(
    levels.filter((level) => level === "info" || level === "debug"),
    [],
    lines.join("\n"),
  );
});
