import { assert, assertEquals, assertThrows } from "../assert.ts";
import { BlockCache } from "../../src/sim/block_cache.ts";
import { EventQueue } from "../../src/sim/event_queue.ts";
import { seededRandom } from "../../src/sim/rng.ts";
import { parseMooncakeTrace } from "../../src/sim/trace.ts";

Deno.test("EventQueue pops in time order and keeps insertion order for equal times", () => {
  const queue = new EventQueue<string>();
  const random = seededRandom(1);
  const times = Array.from({ length: 200 }, () => Math.floor(random() * 20));
  times.forEach((time, i) => queue.push(time, `${time}:${i}`));
  const popped: string[] = [];
  while (queue.size > 0) popped.push(queue.pop()!.value);
  const expected = times.map((time, i) => ({ time, i })).sort((a, b) =>
    a.time - b.time || a.i - b.i
  )
    .map(({ time, i }) => `${time}:${i}`);
  assertEquals(popped, expected);
  assertEquals(queue.peekTime(), Number.POSITIVE_INFINITY);
});

Deno.test("BlockCache evicts the least recently used block and counts evictions", () => {
  const cache = new BlockCache(3);
  [1, 2, 3].forEach((b) => cache.insert(b));
  cache.insert(1); // 1 is now the most recent: 2 is the victim
  cache.insert(4);
  assertEquals([1, 2, 3, 4].map((b) => cache.has(b)), [true, false, true, true]);
  assertEquals(cache.evictions, 1);
  assertEquals(cache.size, 3);
});

Deno.test("BlockCache.prefixLength() counts held blocks from the first only", () => {
  const cache = new BlockCache(10);
  [10, 11, 13].forEach((b) => cache.insert(b));
  assertEquals(cache.prefixLength([10, 11, 12, 13]), 2);
  assertEquals(cache.prefixLength([12, 13]), 0);
  assertThrows(() => new BlockCache(0), Error, "at least one block");
});

Deno.test("seededRandom() repeats its sequence for a seed and differs across seeds", () => {
  const a = seededRandom(9), b = seededRandom(9), c = seededRandom(10);
  const draws = Array.from({ length: 5 }, () => [a(), b(), c()]);
  for (const [x, y] of draws) assertEquals(x, y);
  assert(draws.some(([x, , z]) => x !== z));
  assert(draws.every(([x]) => x >= 0 && x < 1));
});

Deno.test("parseMooncakeTrace() reads Mooncake lines, honours the limit and sorts by time", () => {
  const text = [
    '{"timestamp": 5, "input_length": 600, "output_length": 3, "hash_ids": [0, 1]}',
    "",
    '{"timestamp": 1, "input_length": 10, "output_length": 0, "hash_ids": [2]}',
    '{"timestamp": 9, "input_length": 10, "output_length": 0, "hash_ids": [3]}',
  ].join("\n");
  const trace = parseMooncakeTrace(text, { limit: 2 });
  assertEquals(trace.map((r) => r.timestampMs), [1, 5]);
  assertEquals(trace[1], { timestampMs: 5, inputLength: 600, outputLength: 3, hashIds: [0, 1] });
});

Deno.test("parseMooncakeTrace() names the line that is not a Mooncake request", () => {
  assertThrows(
    () =>
      parseMooncakeTrace(
        '{"timestamp":0,"input_length":5,"output_length":1,"hash_ids":[0]}\n{"timestamp":1}',
      ),
    Error,
    "line 2",
  );
  assertThrows(() => parseMooncakeTrace("not json"), Error, "line 1 is not JSON");
});
