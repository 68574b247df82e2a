/**
 * Audio uploads through the router (`/v1/audio/transcriptions`, `/translations`): multipart bodies
 * routed by load to the model's speech instances, streamed to the engine as they arrive (the
 * engine has the request before the client has sent all of it), replayed on a retry, held to the
 * body limits, and parsed by OpenAI's SDK. The fakes answer as vLLM does for a speech model
 * (src/fakes/fake_audio_routes.ts), naming the size and SHA-256 of the file they received.
 */
import OpenAI from "openai";
import { assert, assertEquals, assertRejects } from "../assert.ts";
import { bytesToHex } from "../../src/hashing/hex.ts";
import { waitFor } from "../support/eventually.ts";
import { MODEL, startTestCluster, type TestCluster } from "../support/harness.ts";

/** e0 is a generative model (no audio routes: 404); e1 and e2 are speech models. */
async function withCluster(
  test: (t: TestCluster) => Promise<void>,
  model: Record<string, unknown> = {},
  top: Record<string, unknown> = {},
): Promise<void> {
  const t = await startTestCluster({
    engineOf: (i) => ({ runner: i === 0 ? "generate" : "transcription" }),
    model: { policy: "round_robin", ...model },
    top,
  });
  try {
    await test(t);
  } finally {
    await t.close();
  }
}

function audio(size: number): Uint8Array<ArrayBuffer> {
  const bytes = new Uint8Array(size);
  for (let i = 0; i < size; i++) bytes[i] = (i * 7919) % 251;
  return bytes;
}

async function expectedText(bytes: Uint8Array<ArrayBuffer>): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return `${bytes.byteLength} bytes, sha256 ${bytesToHex(digest)}`;
}

const BOUNDARY = "tidegate-test-boundary";

/** A multipart body's parts, in order: text fields and the file. */
function parts(fields: [string, string | Uint8Array][]): Uint8Array[] {
  const encoder = new TextEncoder();
  const out: Uint8Array[] = [];
  for (const [name, value] of fields) {
    const file = typeof value !== "string";
    const disposition = `form-data; name="${name}"${file ? '; filename="a.wav"' : ""}`;
    const head = `--${BOUNDARY}\r\ncontent-disposition: ${disposition}\r\n` +
      (file ? "content-type: audio/wav\r\n" : "") + "\r\n";
    out.push(encoder.encode(head), file ? value : encoder.encode(value), encoder.encode("\r\n"));
  }
  out.push(encoder.encode(`--${BOUNDARY}--\r\n`));
  return out;
}

function upload(url: string, body: BodyInit, path = "/v1/audio/transcriptions") {
  return fetch(`${url}${path}`, {
    method: "POST",
    headers: { "content-type": `multipart/form-data; boundary=${BOUNDARY}` },
    body,
  });
}

Deno.test("OpenAI's SDK transcribes and translates through the router; the file arrives whole", async () => {
  await withCluster(async (t) => {
    const client = new OpenAI({ apiKey: "unused", baseURL: `${t.url}/v1`, maxRetries: 0 });
    const bytes = audio(300_000);
    for (const api of [client.audio.transcriptions, client.audio.translations]) {
      const answer = await api.create({ file: new File([bytes], "a.wav"), model: MODEL });
      assertEquals(answer.text, await expectedText(bytes));
    }
    const speech = t.engines.slice(1).flatMap((e) => e.stats.requests);
    assertEquals(speech.filter((r) => r.outcome === "ok").length, 2);
    const unknown = await assertRejects(
      () => client.audio.transcriptions.create({ file: new File([bytes], "a.wav"), model: "nope" }),
      OpenAI.NotFoundError,
    );
    assertEquals(unknown.status, 404);
  });
});

Deno.test("an upload is streamed: the engine has it before the client has sent its file", async () => {
  await withCluster(async (t) => {
    const bytes = audio(200_000);
    const chunks = parts([["model", MODEL], ["file", bytes]]);
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        if (sent === 4) {
          // Model field and the file's headers are out; the file itself is held back until an
          // engine has been sent the request: a router that read whole bodies would never do it.
          await waitFor(
            () => t.engines.find((e) => e.stats.requests.some((r) => r.path.includes("audio"))),
            5_000,
            "an engine receiving the upload while the client still holds the file",
          );
        }
        if (sent === chunks.length) controller.close();
        else controller.enqueue(chunks[sent++]);
      },
    });
    const response = await upload(t.url, body);
    const answer = await response.json();
    assertEquals(response.status, 200, JSON.stringify(answer));
    assertEquals(answer.text, await expectedText(bytes));
  });
});

Deno.test("a model named after the file, a retry after a failed attempt, and a 404 learned", async () => {
  await withCluster(async (t) => {
    await t.engines[1].setFailure("http500", { paths: ["/v1/audio/transcriptions"] });
    const bytes = audio(100_000);
    for (let i = 0; i < 6; i++) {
      // The model after the file (read before the first attempt), or first (the file streams).
      const fields: [string, string | Uint8Array][] = [["file", bytes], ["model", MODEL]];
      const body = new Blob(parts(i % 3 === 0 ? fields : fields.reverse()) as BlobPart[]);
      const response = await upload(t.url, body);
      const answer = await response.json();
      assertEquals(response.status, 200, JSON.stringify(answer));
      assertEquals(answer.text, await expectedText(bytes), "replayed whole to the next instance");
      assertEquals(response.headers.get("x-tidegate-instance"), "e2");
    }
    assert(t.engines[1].stats.requests.length > 0, "e1 was tried and failed");
  });
});

Deno.test("upload refusals: not multipart, over the body limit (declared or streamed), no speech instance", async () => {
  await withCluster(
    async (t) => {
      const json = await fetch(`${t.url}/v1/audio/transcriptions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: MODEL }),
      });
      assertEquals(json.status, 400);
      assert((await json.json()).error.message.includes("multipart/form-data"));
      const big = new Blob(parts([["model", MODEL], ["file", audio(80_000)]]) as BlobPart[]);
      const declared = await upload(t.url, big);
      assertEquals(declared.status, 413);
      await declared.body?.cancel();
      const chunks = parts([["model", MODEL], ["file", audio(80_000)]]);
      const streamed = await upload(
        t.url,
        new ReadableStream({
          pull(controller) {
            const next = chunks.shift();
            if (next) controller.enqueue(next);
            else controller.close();
          },
        }),
      );
      assertEquals(streamed.status, 413, await streamed.text());
    },
    {},
    { limits: { maxBodyBytes: 64 * 1024 } },
  );
  await withCluster(async (t) => {
    await t.engines[1].close();
    await t.engines[2].close();
    const body = new Blob(parts([["model", MODEL], ["file", audio(1000)]]) as BlobPart[]);
    const response = await upload(t.url, body);
    assert(response.status >= 400, String(response.status));
    await response.body?.cancel();
  });
});
