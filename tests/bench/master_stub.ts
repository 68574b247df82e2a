/**
 * The fake Mooncake master in a process of its own, for tests/bench/master_get_bench.ts: the
 * bench measures its own process's CPU, which must not include the master's. Prints its URL,
 * then serves until its standard input closes.
 */
import { startFakeMooncakeMaster } from "../../src/fakes/fake_mooncake_master.ts";
import { benchKeys } from "./master_get_keys.ts";

const master = await startFakeMooncakeMaster();
for (const key of benchKeys().slice(0, 16)) master.put(key, "10.0.0.1:12345");
console.log(master.url);
for await (const _ of Deno.stdin.readable) {
  // Until the bench closes it.
}
await master.close();
