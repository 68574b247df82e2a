import { assert, assertEquals, assertThrows } from "../assert.ts";
import { HostAllowList, parseHostPattern } from "../../src/config/host_allow_list.ts";
import { hasUserinfo, urlHost } from "../../src/config/instance_url.ts";

Deno.test("HostAllowList matches host names exactly, case-insensitively, a trailing dot ignored", () => {
  const list = new HostAllowList(["vllm.ns.svc.cluster.local.", "gpu-1"]);
  assert(list.allows("VLLM.ns.svc.cluster.local"));
  assert(list.allows("gpu-1."));
  assert(!list.allows("evil.vllm.ns.svc.cluster.local"), "no suffix match");
  assert(!list.allows("gpu-10"));
});

Deno.test("HostAllowList matches IPv4 and IPv6 addresses and CIDR blocks, mapped IPv4 as IPv4", () => {
  const list = new HostAllowList(["10.0.0.0/8", "192.168.1.7", "fd00::/8"]);
  for (const host of ["10.255.0.1", "192.168.1.7", "[fd12::1]", "fd00::", "::ffff:10.1.2.3"]) {
    assert(list.allows(host), host);
  }
  for (const host of ["11.0.0.1", "192.168.1.8", "fe80::1", "::1", "127.0.0.1", "localhost"]) {
    assert(!list.allows(host), host);
  }
  assert(new HostAllowList(["0.0.0.0/0"]).allows("8.8.8.8"));
  assert(!new HostAllowList(["0.0.0.0/0"]).allows("::1"), "an IPv4 block holds no IPv6 address");
});

Deno.test("parseHostPattern() refuses what is neither a name, an address nor a CIDR block", () => {
  for (const bad of ["", "10.0.0.0/33", "fd00::/129", "a b", "host/8", "1::2::3", "10.0.0.1/x"]) {
    assertEquals(parseHostPattern(bad), undefined, bad);
  }
  assertThrows(() => new HostAllowList(["10.0.0.0/33"]), Error, "10.0.0.0/33");
});

Deno.test("hasUserinfo() and urlHost() read what URL parsing sees", () => {
  assert(hasUserinfo("http://user:pass@10.0.0.1:8000"));
  assert(hasUserinfo("http://user@10.0.0.1:8000"));
  assert(!hasUserinfo("http://10.0.0.1:8000/a@b"));
  assertEquals(urlHost("http://[FD00::1]:8000"), "fd00::1");
  assertEquals(urlHost("http://0x7f000001:8000"), "127.0.0.1", "numeric forms are normalized");
  assertEquals(urlHost("not a url"), undefined);
});
