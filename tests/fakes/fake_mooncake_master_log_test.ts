import { assertEquals } from "../assert.ts";
import { startFakeMooncakeMaster } from "../../src/fakes/fake_mooncake_master.ts";

// Regression: the log kept every request of the master's life, so the 10-minute demo soak grew
// by one entry (its keys and raw query) per request: +40 % RSS (tests/soak, README).
Deno.test("the fake master keeps only its latest requests while counting them all", async () => {
  const master = await startFakeMooncakeMaster({ maxLoggedRequests: 5 });
  try {
    for (let i = 0; i < 12; i++) {
      const response = await fetch(`${master.url}/batch_query_keys?keys=key-${i}`);
      await response.body?.cancel();
    }
    assertEquals(master.count, 12);
    assertEquals(master.requests.length, 5);
    assertEquals(master.requests.map((r) => r.keys[0]), [7, 8, 9, 10, 11].map((i) => `key-${i}`));
    master.resetLog();
    assertEquals([master.count, master.requests.length], [0, 0]);
  } finally {
    await master.close();
  }
});
