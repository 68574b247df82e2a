import { assertEquals } from "../assert.ts";
import { DecodeOutlook } from "../../src/cluster/decode_outlook.ts";

Deno.test("DecodeOutlook: a remote prefill's slot moves from running to joining, a local prefill only joins", () => {
  let now = 0;
  const outlook = new DecodeOutlook({ meanDecodeS: 10, now: () => now });
  // d0: 3 requests decoding and one whose prefill runs elsewhere, all four decode leases.
  const remote = outlook.expect("d0", 2_000);
  // ...and one prefilling on d0 itself, whose lease is a prefill lease until its first token.
  const local = outlook.expect("d0", 1_000, { leasedAsDecode: false });
  const forecast = outlook.forecast("d0", 4);
  assertEquals(forecast.runningNow, 3);
  assertEquals(forecast.joiningInS, [2, 1]);
  now = 1_500;
  local();
  remote();
  assertEquals(outlook.forecast("d0", 5).runningNow, 5, "both arrived: all decode now");
  assertEquals(outlook.forecast("d0", 5).joiningInS, []);
});

Deno.test("DecodeOutlook counts a joiner's sequences, as its lease counts them", () => {
  const outlook = new DecodeOutlook({ meanDecodeS: 10, now: () => 0 });
  outlook.expect("d0", 1_000, { sequences: 3 }); // a prompt with n = 3
  assertEquals(outlook.leasedJoiners("d0"), 3);
  const forecast = outlook.forecast("d0", 4);
  assertEquals(forecast.runningNow, 1);
  assertEquals(forecast.joiningInS, [1, 1, 1]);
});
