import { assertEquals } from "../assert.ts";
import { RecentPrompts } from "../../src/kv/recent_prompts.ts";
import { readKeySample } from "../../src/kv/key_sample.ts";
import { startFakeMooncakeMaster } from "../../src/fakes/fake_mooncake_master.ts";

Deno.test("RecentPrompts keeps the newest prompts, newest first, each cut to maxTokens", () => {
  const ring = new RecentPrompts({ capacity: 3, maxTokens: 4 });
  assertEquals(ring.latest(2), []);
  for (let i = 1; i <= 5; i++) ring.add([i, i, i, i, i, i]);
  assertEquals(ring.size, 3);
  assertEquals(ring.latest(10), [[5, 5, 5, 5], [4, 4, 4, 4], [3, 3, 3, 3]]);
  assertEquals(ring.latest(1), [[5, 5, 5, 5]]);
});

Deno.test("readKeySample reads whole lines only, up to maxBytes", async () => {
  const master = await startFakeMooncakeMaster();
  try {
    for (const key of ["aaaa", "bbbb", "cccc"]) master.put(key, "h:1");
    assertEquals(await readKeySample(master.url), {
      keys: ["aaaa", "bbbb", "cccc"],
      truncated: false,
    });
    assertEquals(await readKeySample(master.url, { maxBytes: 12 }), {
      keys: ["aaaa", "bbbb"],
      truncated: true,
    });
    await master.setMode("standby503");
    const refused = await readKeySample(master.url);
    assertEquals([refused.keys, refused.error], [[], "GET /get_all_keys: HTTP 503"]);
  } finally {
    await master.close();
  }
});
