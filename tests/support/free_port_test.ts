import { assert, assertEquals } from "../assert.ts";
import { freePort } from "./free_port.ts";

Deno.test("freePort never hands out a port twice, and each can be listened on", () => {
  const ports = Array.from({ length: 200 }, () => freePort());
  assertEquals(new Set(ports).size, ports.length);
  const listener = Deno.listen({ hostname: "127.0.0.1", port: ports[0] });
  assert((listener.addr as Deno.NetAddr).port === ports[0]);
  listener.close();
});
