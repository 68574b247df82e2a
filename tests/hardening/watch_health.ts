/** Polls `/healthz` one request at a time until stopped: how often it answered, and how fast. */
export interface HealthWatch {
  stop(): Promise<{ answered: number; failed: number; slowestMs: number }>;
}

export function watchHealth(url: string): HealthWatch {
  let running = true;
  let answered = 0;
  let failed = 0;
  let slowestMs = 0;
  const loop = (async () => {
    while (running) {
      const started = performance.now();
      try {
        const response = await fetch(`${url}/healthz`);
        await response.body?.cancel();
        if (response.status === 200) answered++;
        else failed++;
      } catch {
        failed++;
      }
      slowestMs = Math.max(slowestMs, performance.now() - started);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return { answered, failed, slowestMs };
    },
  };
}
