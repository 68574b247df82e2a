import { assertEquals, assertMatch } from "../assert.ts";
import { loadOnlyModel } from "../support/harness.ts";
import { waitFor } from "../support/eventually.ts";
import { startRouterProcess } from "../support/router_process.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

async function configFile(listen: Record<string, unknown>): Promise<string> {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/tidegate.json`;
  await Deno.writeTextFile(
    path,
    JSON.stringify({
      listen,
      models: [loadOnlyModel("m", { instances: [{ id: "a", url: "http://127.0.0.1:9" }] })],
    }),
  );
  return path;
}

Deno.test("start names the address it cannot bind and exits 1", async () => {
  const taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (taken.addr as Deno.NetAddr).port;
  try {
    const path = await configFile({ host: "127.0.0.1", port });
    const { code, stderr } = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "cli/main.ts", "start", "--config", path],
      cwd: ROOT,
      stdout: "null",
      stderr: "piped",
    }).output();
    assertEquals(code, 1);
    assertMatch(
      new TextDecoder().decode(stderr),
      new RegExp(`127\\.0\\.0\\.1:${port} is already in use`),
    );
  } finally {
    taken.close();
  }
});

Deno.test("start warns when it listens beyond loopback with no admin token", async () => {
  const router = await startRouterProcess(await configFile({ host: "0.0.0.0", port: 0 }));
  try {
    const warning = await waitFor(
      () => router.log.find((line) => line.includes("no admin.token")),
      10_000,
      "the warning",
    );
    assertMatch(warning, /"listen":"0\.0\.0\.0"/);
  } finally {
    await router.stop();
  }
});
