import { assertEquals, assertRejects } from "../assert.ts";
import { UploadBody } from "../../src/gateway/upload_body.ts";
import { HttpError } from "../../src/openai/errors.ts";

function source(chunks: number[], hold = false) {
  const queue = chunks.map((n) => new Uint8Array(n).fill(n % 256));
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      const next = queue.shift();
      if (next) controller.enqueue(next);
      else if (!hold) controller.close();
    },
  }).getReader();
}

async function drain(stream: ReadableStream<Uint8Array>): Promise<number> {
  let bytes = 0;
  for await (const chunk of stream) bytes += chunk.byteLength;
  return bytes;
}

const limits = { maxBytes: 1_000, replayBytes: 100, timeoutMs: 60_000, now: () => 0 };

Deno.test("an upload replays from its first byte while what was read is kept", async () => {
  const upload = new UploadBody(source([30, 30, 30]), limits);
  await upload.read(); // read before the first attempt (looking for the model): kept
  const first = upload.open().getReader();
  await first.read();
  await first.read(); // the attempt fails here
  assertEquals(upload.replayable, true);
  assertEquals(await drain(upload.open()), 90, "the retry sends it all, from the start");
});

Deno.test("past its replay bound an upload cannot be sent again", async () => {
  const upload = new UploadBody(source([60, 60, 60]), limits);
  assertEquals(await drain(upload.open()), 180);
  assertEquals(upload.replayable, false);
});

Deno.test("an upload over its size limit or its deadline is the client's error", async () => {
  const big = new UploadBody(source([600, 600]), limits);
  await big.read();
  const tooLarge = await assertRejects(() => big.read(), HttpError);
  assertEquals([tooLarge.status, big.clientError?.status, big.replayable], [413, 413, false]);
  const slow = new UploadBody(source([10], true), { ...limits, timeoutMs: 50 });
  await slow.read();
  const late = await assertRejects(() => slow.read(), HttpError);
  assertEquals(late.status, 408);
});
