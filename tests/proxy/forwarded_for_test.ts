import { assertEquals } from "../assert.ts";
import { HostAllowList } from "../../src/config/host_allow_list.ts";
import { forwardedFor } from "../../src/proxy/forwarded_for.ts";

const list = new HostAllowList(["10.0.0.0/8", "fd00::/8"]);
const trusted = (peer: string) => list.allows(peer);

Deno.test("forwardedFor() appends a trusted proxy's address to the list it sent", () => {
  assertEquals(forwardedFor("203.0.113.7", "10.1.2.3", trusted), "203.0.113.7, 10.1.2.3");
  assertEquals(
    forwardedFor("203.0.113.7, 10.9.9.9", "fd00::5", trusted),
    "203.0.113.7, 10.9.9.9, fd00::5",
  );
  assertEquals(
    forwardedFor("203.0.113.7", "::ffff:10.1.2.3", trusted),
    "203.0.113.7, ::ffff:10.1.2.3",
  );
});

Deno.test("forwardedFor() replaces what anyone else claims with their own address", () => {
  assertEquals(forwardedFor("10.0.0.1", "198.51.100.4", trusted), "198.51.100.4");
  assertEquals(forwardedFor(null, "198.51.100.4", trusted), "198.51.100.4");
  assertEquals(forwardedFor("  ", "10.1.2.3", trusted), "10.1.2.3");
});

Deno.test("forwardedFor() leaves an in-process request's header as it came", () => {
  assertEquals(forwardedFor("203.0.113.7", undefined, trusted), "203.0.113.7");
  assertEquals(forwardedFor(null, undefined, trusted), null);
});
