/**
 * The command line the pod runs: the image's ENTRYPOINT (deploy/Dockerfile's last stage) followed
 * by the Deployment's `args` (Kubernetes replaces CMD with them), parsed by the router's own
 * dispatch (cli/main.ts) and `start` flag parser. It must be `start` with `--config` naming the file
 * the ConfigMap mounts.
 */
import { assert, assertEquals } from "../assert.ts";
import { resolveCommand } from "../../cli/main.ts";
import { parseStartArgs } from "../../cli/start.ts";
import type { K8sObject } from "./kustomize.ts";
import { configMount, KUSTOMIZATIONS, render } from "./manifests.ts";

const DOCKERFILE = new URL("../../deploy/Dockerfile", import.meta.url);

/** The last stage's exec-form ENTRYPOINT and CMD, and where it installs the binary. */
export async function imageCommand() {
  const text = await Deno.readTextFile(DOCKERFILE);
  const lines = text.split("\n").filter((line) => !line.startsWith("#"));
  const lastFrom = lines.findLastIndex((line) => /^FROM\s/i.test(line));
  const stage = lines.slice(lastFrom);
  const instruction = (name: string) => {
    const line = stage.findLast((l) => l.toUpperCase().startsWith(`${name} `));
    assert(line !== undefined, `no ${name} in the last stage`);
    const value = JSON.parse(line.slice(name.length + 1));
    assert(Array.isArray(value), `${name} must be the exec (JSON) form`);
    return value as string[];
  };
  const copied = stage.filter((l) => /^COPY\s/i.test(l)).map((l) => l.split(/\s+/).at(-1)!);
  const user = stage.findLast((l) => /^USER\s/i.test(l))?.split(/\s+/)[1];
  return { entrypoint: instruction("ENTRYPOINT"), cmd: instruction("CMD"), copied, user };
}

/** What the binary's main sees as its arguments: Kubernetes' rule for command/args. */
function podArgv(container: K8sObject, image: { entrypoint: string[]; cmd: string[] }) {
  if (container.command) return [...container.command, ...(container.args ?? [])];
  return [...image.entrypoint, ...(container.args ?? image.cmd)];
}

Deno.test("the image runs the binary it installs, as non-root", async () => {
  const image = await imageCommand();
  assertEquals(image.entrypoint.length, 1, "the ENTRYPOINT is the binary alone");
  assert(image.copied.includes(image.entrypoint[0]), `${image.entrypoint[0]} is not installed`);
  assert(image.user !== undefined && !/^(0|root)(:|$)/.test(image.user), "USER must be non-root");
  // `docker run IMAGE` with no arguments: CMD goes to the binary's parser.
  const resolved = resolveCommand(image.cmd);
  assertEquals(resolved?.command, "start");
  const parsed = parseStartArgs(resolved!.rest);
  assert(typeof parsed !== "number");
  assertEquals(parsed.config, "/etc/tidegate/router.yaml");
});

for (const name of KUSTOMIZATIONS) {
  Deno.test(`${name}: the pod's command line is start --config <the mounted ConfigMap file>`, async () => {
    const image = await imageCommand();
    const objects = await render(name);
    const { container, mount, configMap } = configMount(objects);
    const argv = podArgv(container, image);
    assertEquals(argv[0], image.entrypoint[0]);
    // The compiled binary's Deno.args are what follows its path.
    const resolved = resolveCommand(argv.slice(1));
    assert(resolved !== undefined, `not a tidegate command: ${argv.slice(1).join(" ")}`);
    assertEquals(resolved.command, "start");
    const parsed = parseStartArgs(resolved.rest);
    assert(typeof parsed !== "number", `start rejects ${resolved.rest.join(" ")}`);
    const slash = parsed.config.lastIndexOf("/");
    assertEquals(parsed.config.slice(0, slash), mount.mountPath);
    assert(parsed.config.slice(slash + 1) in configMap.data, `${parsed.config} is not mounted`);
  });
}

Deno.test("the old command line (deno run args appended to a deno ENTRYPOINT) is rejected", () => {
  const oldEntrypoint = ["start", "--config", "/etc/tidegate/router.json"];
  const oldArgs = ["run", "-A", "cli/main.ts", "start", "--config", "/etc/tidegate/router.yaml"];
  const resolved = resolveCommand([...oldEntrypoint, ...oldArgs]);
  assertEquals(resolved?.command, "start");
  const errors: unknown[] = [];
  const original = console.error;
  console.error = (...args: unknown[]) => errors.push(...args);
  try {
    assertEquals(parseStartArgs(resolved!.rest), 2);
  } finally {
    console.error = original;
  }
  assert(String(errors[0]).includes("Unexpected argument 'run'"), String(errors[0]));
});
