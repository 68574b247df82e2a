/**
 * Steady, bounded loopback traffic for a soak: `concurrency` loops, each sending one request after
 * another (streams and non-streams alternating) until stopped. Counts answers; a failure is any
 * non-2xx answer, a transport error, or a stream without its `[DONE]`.
 */
export interface SoakTraffic {
  readonly requests: number;
  readonly failed: number;
  /** The first few failures, for the report. */
  readonly failures: string[];
  stop(): Promise<void>;
}

/** The n-th request of a soak: its path and JSON body (without `stream`). */
export type SoakRequestOf = (n: number) => { path: string; body: Record<string, unknown> };

export function startSoakTraffic(
  url: string,
  requestOf: SoakRequestOf,
  concurrency: number,
): SoakTraffic {
  let running = true;
  let sequence = 0;
  let requests = 0;
  let failed = 0;
  const failures: string[] = [];
  const fail = (what: string) => {
    failed++;
    if (failures.length < 10) failures.push(what);
  };
  const loop = async () => {
    while (running) {
      const n = sequence++;
      const { path, body } = requestOf(n);
      const stream = n % 2 === 0;
      try {
        const response = await fetch(`${url}${path}`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ ...body, stream }),
        });
        const text = await response.text();
        if (!response.ok) fail(`${response.status} ${text.slice(0, 200)}`);
        else if (stream && !text.includes("data: [DONE]")) fail(`stream without [DONE]`);
      } catch (error) {
        fail(String(error));
      }
      requests++;
    }
  };
  const loops = Array.from({ length: concurrency }, loop);
  return {
    get requests() {
      return requests;
    },
    get failed() {
      return failed;
    },
    failures,
    async stop() {
      running = false;
      await Promise.all(loops);
    },
  };
}
