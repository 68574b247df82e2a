import { assert, assertEquals, assertRejects } from "../assert.ts";
import { createRouter } from "../../routes/app.ts";
import { ConfigError } from "../../src/config/load.ts";

const RAW = {
  admin: { token: "env:TIDEGATE_TEST_ADMIN_TOKEN" },
  models: [{
    name: "m",
    tokenizer: { mode: "none" },
    kv: { store: "none" },
    instances: [{ id: "a", url: "http://127.0.0.1:9" }],
  }],
};

Deno.test("createRouter takes a config as written in a file: validated, defaults filled, env values read", async () => {
  const router = await createRouter(JSON.parse(JSON.stringify(RAW)), {
    env: (name) => name === "TIDEGATE_TEST_ADMIN_TOKEN" ? "s3cret" : undefined,
  });
  try {
    assertEquals(router.config.admin?.token, "s3cret");
    assert(router.config.models[0].health.intervalMs > 0, "defaults are filled in");
  } finally {
    await router.close();
  }
});

Deno.test("createRouter refuses a raw config it cannot run with a ConfigError listing each problem", async () => {
  const error = await assertRejects(
    () => createRouter({ models: [{ name: "m", instances: "none" }] }, { env: () => undefined }),
    ConfigError,
  );
  assert(
    error.problems.some((p) => p.startsWith("models[0].instances")),
    error.problems.join("; "),
  );
  const unset = await assertRejects(() => createRouter(RAW, { env: () => undefined }), ConfigError);
  assert(
    unset.problems.some((p) => p.includes("TIDEGATE_TEST_ADMIN_TOKEN")),
    unset.problems.join("; "),
  );
});
