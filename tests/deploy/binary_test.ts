/**
 * The single binary: `deno task compile` builds dist/tidegate, which runs the demo (its burst of
 * chats goes through the compiled router, the built-in Qwen3 tokenizer and the worker pool) and
 * serves one more request from outside.
 *
 * `deno compile` needs Deno's `denort` runtime: it downloads it from Deno's release server, or
 * takes the file that DENORT_BIN names. Where neither can be had (an offline machine without a
 * denort binary), this test is skipped and says so; a failure once the runtime is there fails.
 */
import { assert, assertEquals } from "../assert.ts";

const ROOT = new URL("../../", import.meta.url);
const BINARY = new URL("dist/tidegate", ROOT);

/** Why the runtime cannot be had, or undefined when a tiny `deno compile` works here. */
async function denortUnavailable(): Promise<string | undefined> {
  const dir = await Deno.makeTempDir({ prefix: "tidegate-denort-probe-" });
  try {
    await Deno.writeTextFile(`${dir}/probe.ts`, "console.log(1);\n");
    const { success, stderr } = await new Deno.Command(Deno.execPath(), {
      args: ["compile", "--no-config", "-o", `${dir}/probe`, `${dir}/probe.ts`],
      cwd: dir,
      stdout: "null",
      stderr: "piped",
      env: { NO_COLOR: "1" },
    }).output();
    if (success) return undefined;
    const text = new TextDecoder().decode(stderr);
    // Only the base-binary step counts as "unobtainable"; any other error fails the test.
    if (!text.includes("Setting up base binary")) return undefined;
    return text.split("\n").filter((line) => /error|Caused|\d: /.test(line)).slice(0, 4).join(
      " | ",
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

const unavailable = await denortUnavailable();
if (unavailable) {
  console.warn(
    `SKIPPED tests/deploy/binary_test.ts: deno compile cannot get the denort runtime here ` +
      `(set DENORT_BIN to a denort ${Deno.version.deno} binary, or allow the download): ` +
      unavailable,
  );
}

async function run(args: string[], options: Deno.CommandOptions = {}) {
  const out = await new Deno.Command(args[0], { args: args.slice(1), cwd: ROOT, ...options })
    .output();
  const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
  return { code: out.code, stdout: text(out.stdout), stderr: text(out.stderr) };
}

Deno.test({
  name: "the compiled binary runs the demo and serves a request",
  ignore: unavailable !== undefined,
  sanitizeResources: false,
  async fn() {
    const build = await run([Deno.execPath(), "task", "compile"], { env: { NO_COLOR: "1" } });
    assertEquals(build.code, 0, build.stderr);

    const help = await run([BINARY.pathname, "--help"]);
    assertEquals(help.code, 0, help.stderr);
    assert(help.stdout.includes("start --config FILE"), help.stdout);

    const demo = await run([BINARY.pathname, "demo", "--exit", "--port", "0", "--engines", "2"]);
    assertEquals(demo.code, 0, demo.stderr);
    assert(demo.stdout.includes("follow-ups landed on the instance holding their document"));

    // A request from outside, to a demo left running.
    const child = new Deno.Command(BINARY.pathname, {
      args: ["demo", "--port", "0", "--engines", "2"],
      cwd: ROOT,
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    try {
      let seen = "";
      const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
      while (!seen.includes("Press Ctrl-C")) {
        const { value, done } = await reader.read();
        assert(!done, `the demo ended early:\n${seen}`);
        seen += value;
      }
      const url = seen.match(/on (http:\/\/\S+)\. Sending/)![1];
      const body = await Deno.readTextFile(seen.match(/-d @(\S+)/)![1]);
      const response = await fetch(`${url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body,
      });
      const answer = await response.json();
      assertEquals(response.status, 200, JSON.stringify(answer));
      assert(response.headers.get("x-tidegate-instance"), "the router named the instance");
      assert(answer.choices[0].message.content.length > 0);
      reader.releaseLock();
    } finally {
      child.kill("SIGTERM");
      await child.status;
      await child.stderr.cancel().catch(() => {});
      await child.stdout.cancel().catch(() => {});
    }
  },
});
