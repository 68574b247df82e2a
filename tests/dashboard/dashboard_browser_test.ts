/**
 * The dashboard in a real browser: the embedded demo cluster and the router, some shared-prefix
 * traffic, then headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core) opens
 * /dashboard through the `?token=` cookie flow and the numbers it shows are compared with
 * /metrics. The model runs an A/B experiment (two cache-aware arms), which the header shows. At
 * 1280 × 800 and 1400 × 900 no cell of the instance table or the decisions reaches past the
 * viewport and nothing scrolls sideways. Ignored, saying why, when Chromium is absent (failing in
 * CI: tests/support/needs_tool.ts; `apt-get install -y chromium`).
 *
 * Screenshot: written to a temporary directory by default (checked, then removed);
 * `TIDEGATE_SCREENSHOT=1` writes docs/dashboard.png instead (and sends traffic for ~40 s so the
 * TTFT chart has several points), `TIDEGATE_SCREENSHOT=<path>.png` writes there; the picture is
 * 1280 px wide. The demo engines report `cached_tokens` (the router asks streams for usage), so
 * the test also checks that every instance that served requests shows an engine hit ratio.
 * `TIDEGATE_CHROMIUM=<path>` uses another Chromium binary.
 */
import { chromium } from "playwright-core";
import { runDemoBurst } from "../../cli/demo.ts";
import { parsePrometheusText, type PromSample } from "../../src/cluster/prometheus_text.ts";
import { resolveConfig } from "../../src/config/load.ts";
import { createRouter } from "../../routes/app.ts";
import { assert, assertEquals } from "../assert.ts";
import { eventually } from "../support/eventually.ts";
import { fileMissing, testNeeding } from "../support/needs_tool.ts";
import { startDemoCluster } from "../../src/fakes/demo_cluster.ts";

// The page-side callbacks below run in Chromium; Deno's type library has no DOM.
// deno-lint-ignore no-explicit-any
declare const document: any;
// deno-lint-ignore no-explicit-any
declare const window: any;

const CHROMIUM = Deno.env.get("TIDEGATE_CHROMIUM") ?? "/usr/bin/chromium";
const SCREENSHOT = Deno.env.get("TIDEGATE_SCREENSHOT") ?? "";
const TOKEN = "dashboard-test-token";
/** Two cache-aware arms, assigned by the prompt's opening (a document stays in one arm). */
const EXPERIMENT = {
  key: "prefix",
  arms: [
    { name: "A", policy: "cache_aware", weight: 1 },
    { name: "B", policy: "mooncake_ttft", weight: 1 },
  ],
};
const VIEWPORTS = [{ width: 1280, height: 800 }, { width: 1400, height: 900 }];

interface InstanceFigures {
  requests: number;
  promptTokens: number;
  hitRatio: number | null;
  engineHitRatio: number | null;
  waitingPrefillTokens: number;
  kvAgreement: string | null;
}

/** What /metrics says per instance, summed over arms and other labels. */
function figuresFromMetrics(samples: PromSample[], model: string, instance: string) {
  const total = (name: string, extra: Record<string, string> = {}) =>
    samples
      .filter((s) =>
        s.name === name && s.labels.model === model && s.labels.instance === instance &&
        Object.entries(extra).every(([k, v]) => s.labels[k] === v)
      )
      .reduce((sum, s) => sum + s.value, 0);
  const prompt = total("tidegate_prompt_tokens_total");
  const cachedSamples = samples.filter((s) =>
    s.name === "tidegate_engine_cached_tokens_total" && s.labels.instance === instance
  );
  return {
    requests: total("tidegate_requests_total"),
    promptTokens: prompt,
    hitRatio: prompt > 0
      ? total("tidegate_predicted_hit_tokens_total", { scope: "local" }) / prompt
      : null,
    engineHitRatio: cachedSamples.length
      ? total("tidegate_engine_cached_tokens_total") /
        total("tidegate_engine_reported_prompt_tokens_total")
      : null,
    waitingPrefillTokens: total("tidegate_instance_waiting_prefill_tokens"),
    kvAgreement:
      samples.find((s) =>
        s.name === "tidegate_kv_agreement" && s.labels.model === model &&
        s.labels.instance === instance && s.value === 1
      )?.labels.state ?? null,
  } satisfies InstanceFigures;
}

/** Dashboard data whose every string is markup that would create elements if parsed. */
function hostileData() {
  const tag = (n: number) => `<img src=x id=pwned${n}>`;
  return {
    generatedAt: 0,
    models: [{
      name: tag(1),
      policy: tag(2),
      tokenizer: tag(3),
      totals: { healthyInstances: 1, requests: 0, predictedHitRatio: null },
      predictedIndexKeys: 0,
      queue: { waiting: 2, bands: [{ priority: -1, waiting: 2 }] },
      store: {
        state: tag(4),
        url: tag(5),
        downForS: null,
        counters: { [tag(6)]: 1 },
        lastError: tag(7),
      },
      instances: [{
        id: tag(8),
        url: tag(9),
        engine: tag(10),
        role: tag(11),
        healthy: true,
        draining: false,
        breaker: tag(12),
        waitingPrefillTokens: 1,
        runningRequests: 0,
        active: 0,
        requests: 0,
        promptTokens: 0,
        predictedHitRatio: null,
        engineHitRatio: null,
        recentTtft: { p50: null, p90: null },
        engineReport: null,
        engineReportError: tag(13),
        kvAgreement: { state: tag(24), samples: 0, agree: 0, over: 0, blind: 0 },
      }],
    }],
    ttft: {
      bucketMs: 10_000,
      windowMs: 60_000,
      from: 0,
      to: 60_000,
      series: [{
        model: tag(1),
        arm: tag(14),
        points: [{ t: 0, count: 1, p50: 0.1, p90: 0.2, p99: 0.3 }],
        window: { count: 1, p50: 0.1, p90: 0.2, p99: 0.3 },
      }],
    },
    decisions: [{
      requestId: tag(15),
      at: 0,
      model: tag(16),
      arm: tag(17),
      policy: tag(18),
      promptTokens: 1,
      lookup: { outcome: tag(19), keys: 1, elapsedMs: 1 },
      poolPrefixTokens: 0,
      kvLoadOnly: tag(25),
      chosen: tag(20),
      ttftS: null,
      status: 200,
      outcome: tag(21),
      candidates: [{
        id: tag(20),
        healthy: true,
        localPrefixTokens: 0,
        waitingPrefillTokens: 0,
        score: 1,
        terms: { [tag(22)]: 1 },
        excluded: tag(23),
      }],
    }],
  };
}

function sameFigures(a: InstanceFigures, b: InstanceFigures): boolean {
  const close = (x: number | null, y: number | null) =>
    x === null || y === null ? x === y : Math.abs(x - y) <= 1e-9 * Math.max(1, Math.abs(y));
  return a.requests === b.requests && a.promptTokens === b.promptTokens &&
    close(a.hitRatio, b.hitRatio) && close(a.engineHitRatio, b.engineHitRatio) &&
    close(a.waitingPrefillTokens, b.waitingPrefillTokens) && a.kvAgreement === b.kvAgreement;
}

testNeeding(
  fileMissing(CHROMIUM, "apt-get install -y chromium, or set TIDEGATE_CHROMIUM"),
  {
    name: "the dashboard shows in headless Chromium the per-instance numbers /metrics exposes",
    async fn() {
      const cluster = await startDemoCluster({ engines: 3 });
      const base = cluster.routerConfig() as { models: Record<string, unknown>[] };
      const router = await createRouter(
        resolveConfig({
          ...base,
          models: [{ ...base.models[0], experiment: EXPERIMENT }],
          admin: { token: TOKEN },
        }),
        { log: () => {} },
      );
      const profile = await Deno.makeTempDir({ prefix: "tidegate-chromium-" });
      let browser: Awaited<ReturnType<typeof chromium.launchPersistentContext>> | undefined;
      try {
        // As `start` and the demo do: a request before the tokenizer workers have loaded goes by
        // load (no hits), which on a loaded machine is the whole first round.
        assert(await router.warm(), "worker threads loaded");
        const { port } = await router.serve({ hostname: "127.0.0.1", port: 0 });
        const url = `http://127.0.0.1:${port}`;
        const rounds = SCREENSHOT ? 8 : 2;
        let sent = 0;
        for (let round = 0; round < rounds; round++) {
          if (round > 0 && SCREENSHOT) await new Promise((r) => setTimeout(r, 5_000));
          const docs = 3 + (round % 3);
          const results = await runDemoBurst(url, cluster.model, docs, 2 + round % 2);
          assert(results.every((r) => r.status === 200), "every demo request succeeds");
          sent += results.length;
        }

        browser = await chromium.launchPersistentContext(profile, {
          executablePath: CHROMIUM,
          headless: true,
          viewport: VIEWPORTS[0],
          // This machine's closed network refuses Chromium's background connections.
          args: [
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
          ],
          timeout: 30_000,
        });
        const page = browser.pages()[0] ?? await browser.newPage();
        const pageErrors: string[] = [];
        page.on("pageerror", (error) => pageErrors.push(error.message));
        page.on("console", (message) => {
          if (message.type() === "error") pageErrors.push(message.text());
        });

        // The token opens a session cookie and redirects to the clean URL.
        const response = await page.goto(`${url}/dashboard?token=${TOKEN}`);
        assertEquals(response?.status(), 200);
        assertEquals(page.url(), `${url}/dashboard`);
        await page.waitForSelector('tr[data-instance="gpu-a"]', { timeout: 10_000 });

        // Counters settle once the traffic ended; gauges (waiting tokens) follow engine reports.
        let shown: Record<string, InstanceFigures> = {};
        let expected: Record<string, InstanceFigures> = {};
        let shownStore = { down: false, predictedIndexKeys: Number.NaN };
        let expectedStore = { ...shownStore };
        await eventually(
          async () => {
            const scrapedAt = Date.now();
            const samples =
              parsePrometheusText(await (await fetch(`${url}/metrics`)).text()).samples;
            await page.waitForFunction(
              (after) => Number(document.body.dataset.generatedAt ?? 0) > after,
              scrapedAt,
              { timeout: 5_000 },
            );
            shown = await page.evaluate(() => {
              const out: Record<string, unknown> = {};
              for (const row of document.querySelectorAll("tr[data-instance]")) {
                const read = (field: string) => {
                  const raw = row.querySelector(`[data-field="${field}"]`)?.getAttribute(
                    "data-value",
                  );
                  return raw === null || raw === undefined || raw === "" ? null : Number(raw);
                };
                out[row.dataset.instance] = {
                  requests: read("requests"),
                  promptTokens: read("prompt-tokens"),
                  hitRatio: read("hit-ratio"),
                  engineHitRatio: read("engine-hit-ratio"),
                  waitingPrefillTokens: read("waiting-prefill-tokens"),
                  kvAgreement: row.querySelector('[data-field="kv-agreement"]')
                    ?.getAttribute("data-value") ?? null,
                };
              }
              return out as Record<string, InstanceFigures>;
            });
            expected = Object.fromEntries(
              cluster.engines.map((e) => [e.id, figuresFromMetrics(samples, cluster.model, e.id)]),
            );
            shownStore = await page.evaluate(() => ({
              down: document.querySelector('[data-field="store-state"]')?.dataset.value !== "up",
              predictedIndexKeys: Number(
                document.querySelector('[data-field="predicted-index-keys"]')?.dataset.value,
              ),
            }));
            const gauge = (name: string) =>
              samples.find((x) => x.name === name && x.labels.model === cluster.model)?.value;
            expectedStore = {
              down: gauge("tidegate_store_down") === 1,
              predictedIndexKeys: gauge("tidegate_predicted_index_keys")!,
            };
            const agree = cluster.engines.every((e) =>
              shown[e.id] !== undefined && sameFigures(shown[e.id], expected[e.id])
            ) && shownStore.down === expectedStore.down &&
              shownStore.predictedIndexKeys === expectedStore.predictedIndexKeys;
            return agree;
          },
          10_000,
          () =>
            "the dashboard to show what /metrics says: " +
            JSON.stringify({ shown, expected, shownStore, expectedStore }),
        );
        assertEquals(shown, expected, "the dashboard's per-instance figures equal /metrics");
        assertEquals(shownStore, expectedStore, "the store's state and index size equal /metrics");
        const total = Object.values(shown).reduce((sum, f) =>
          sum + f.requests, 0);
        assertEquals(total, sent, "every request sent is counted on some instance");
        assert(
          Object.values(shown).some((f) => (f.hitRatio ?? 0) > 0.5),
          "follow-ups hit the prefix cache of the instance holding their document",
        );

        // The other panels: TTFT per arm, the store, the decisions with their terms.
        const panels = await page.evaluate(() => ({
          p50Arms: [
            ...document.querySelectorAll('svg[data-chart="ttft"] path[data-quantile="p50"]'),
          ]
            .map((path) => path.dataset.arm).sort(),
          windowCount: [
            ...document.querySelectorAll('[data-table="ttft-summary"] [data-field="count"]'),
          ].reduce((sum, cell) => sum + Number(cell.dataset.value), 0),
          storeState: document.querySelector('[data-field="store-state"]')?.textContent,
          storeUrl: document.querySelector('[data-field="store-url"]')?.textContent,
          decisionRows: document.querySelectorAll("tr[data-request-id]").length,
          candidatesInFirst: document.querySelectorAll(
            '[data-table="decisions"] tbody.decision:first-of-type tr[data-candidate]',
          ).length,
          // Per decision: its policy and its first candidate's terms.
          terms: [...document.querySelectorAll("tbody.decision")].map((body) => ({
            policy: body.querySelector("tr[data-request-id] td:nth-child(3)")?.textContent,
            terms: body.querySelector('tr[data-candidate] [data-field="terms"]')?.textContent,
          })),
          loadBars: document.querySelectorAll('svg[data-chart="load"] rect[data-instance]').length,
        }));
        const metricsNow = parsePrometheusText(await (await fetch(`${url}/metrics`)).text());
        const armsServed = [
          ...new Set(
            metricsNow.samples
              .filter((x) => x.name === "tidegate_requests_total" && x.value > 0 && x.labels.arm)
              .map((x) => x.labels.arm),
          ),
        ].sort();
        assert(armsServed.length > 0 && armsServed.every((arm) => ["A", "B"].includes(arm)));
        assertEquals(panels.p50Arms, armsServed, "one p50 line per arm that served requests");
        assertEquals(panels.windowCount, sent, "the arms' TTFT windows count every request");
        assert(["up", "down", "probing"].includes(panels.storeState), `${panels.storeState}`);
        assertEquals(panels.storeUrl, cluster.master.url);
        assertEquals(panels.decisionRows, Math.min(20, sent));
        assertEquals(panels.candidatesInFirst, 3);
        // cache_aware scores prefix misses plus load; mooncake_ttft estimates queue + prefill time.
        const termOf: Record<string, RegExp> = {
          "A / cache_aware": /prefixMissTokens=\d/,
          "B / mooncake_ttft": /prefillS=\d/,
        };
        for (const { policy, terms } of panels.terms) {
          assert(termOf[policy]?.test(terms ?? ""), `terms shown for ${policy}: ${terms}`);
        }
        assertEquals(panels.loadBars, 3);
        assertEquals(pageErrors, [], "no script errors or CSP violations on the page");

        // The engines report cached tokens: every instance that served requests shows a ratio.
        for (const [id, figures] of Object.entries(shown)) {
          if (figures.requests > 0) {
            assert(figures.engineHitRatio !== null, `${id} shows an engine hit ratio`);
          }
        }
        assert(
          Object.values(shown).some((f) => (f.engineHitRatio ?? 0) > 0),
          "some engine reported reused prefix tokens",
        );

        // During the experiment the header names the arms, their policies and split.
        const header = await page.evaluate(() => ({
          policy: document.querySelector('[data-model] h2 [data-field="policy"]')?.textContent ??
            null,
          arms: [
            ...document.querySelectorAll('[data-model] h2 [data-field="experiment"] [data-arm]'),
          ]
            .map((arm) => ({
              arm: arm.dataset.arm,
              policy: arm.dataset.policy,
              share: Number(arm.dataset.share),
              text: arm.textContent,
            })),
        }));
        assertEquals(header, {
          policy: null,
          arms: [
            { arm: "A", policy: "cache_aware", share: 0.5, text: "A cache_aware 50 %" },
            { arm: "B", policy: "mooncake_ttft", share: 0.5, text: "B mooncake_ttft 50 %" },
          ],
        });

        // An operator's screen: nothing is cut off or scrolls sideways at 1280 and 1400 px.
        for (const viewport of VIEWPORTS) {
          await page.setViewportSize(viewport);
          await page.waitForFunction(() =>
            window.innerWidth > 0 && document.body.dataset.refreshes
          );
          const overflow = await page.evaluate(() => {
            const width = window.innerWidth;
            const cells = [
              ...document.querySelectorAll(
                '[data-table="instances"] th, [data-table="instances"] td, ' +
                  '[data-table="decisions"] th, [data-table="decisions"] td, ' +
                  '[data-field="experiment"], [data-model] h2',
              ),
            ];
            const past = cells
              .filter((cell) => cell.getBoundingClientRect().right > width + 0.5)
              .map((cell) => `${cell.tagName} ${cell.textContent.slice(0, 40)}`);
            const clipped = cells
              .filter((cell) => cell.scrollWidth > cell.clientWidth + 1)
              .map((cell) => `${cell.tagName} ${cell.textContent.slice(0, 40)}`);
            const scrolling = [
              document.documentElement,
              ...document.querySelectorAll(".scroll, .card"),
            ]
              .filter((box) => box.scrollWidth > box.clientWidth)
              .map((box) =>
                `${box.tagName}.${box.className} ${box.scrollWidth} > ${box.clientWidth}`
              );
            return {
              width,
              cells: cells.length,
              terms: document.querySelectorAll('[data-table="decisions"] [data-field="terms"]')
                .length,
              past,
              clipped,
              scrolling,
            };
          });
          assertEquals(overflow.width, viewport.width);
          assert(overflow.cells > 100 && overflow.terms > 0, `cells checked: ${overflow.cells}`);
          assertEquals(
            { past: overflow.past, clipped: overflow.clipped, scrolling: overflow.scrolling },
            { past: [], clipped: [], scrolling: [] },
            `nothing overflows a ${viewport.width} px viewport`,
          );
        }
        await page.setViewportSize(VIEWPORTS[0]);

        const target = SCREENSHOT === "1"
          ? new URL("../../docs/dashboard.png", import.meta.url).pathname
          : SCREENSHOT || `${profile}/dashboard.png`;
        let flowing = false;
        let traffic: Promise<void> = Promise.resolve();
        if (SCREENSHOT) {
          // For the picture: fewer decisions, and traffic flowing until the load bars show work.
          await page.goto(`${url}/dashboard?decisions=8`);
          await page.waitForSelector("tr[data-request-id]", { timeout: 10_000 });
          flowing = true;
          traffic = (async () => {
            for (let burst = 0; flowing && burst < 200; burst++) {
              await runDemoBurst(url, cluster.model, 6, 3).catch(() => {});
            }
          })();
          await page.waitForFunction(
            () =>
              [...document.querySelectorAll('svg[data-chart="load"] rect[data-instance]')]
                .some((bar) => Number(bar.dataset.value) > 0),
            undefined,
            { timeout: 15_000 },
          ).catch(() => console.log("no waiting load caught for the screenshot"));
        }
        await page.screenshot({ path: target, fullPage: true });
        flowing = false;
        await traffic;
        // Strings from the data are text, never markup: render hostile names with the page's code.
        const escaped = await page.evaluate(async (hostile) => {
          const { render } = await import(`${location.origin}/dashboard/app.js`);
          render(document, hostile);
          return {
            injected: document.querySelectorAll("[id^=pwned]").length,
            shown: document.body.textContent.includes("<img src=x id=pwned1>"),
            // Without an experiment the header names the model's one policy.
            policy: document.querySelector('[data-model] h2 [data-field="policy"]')?.dataset.value,
            experiment: document.querySelectorAll('[data-field="experiment"]').length,
            queued: document.querySelector('[data-model] h2 [data-field="queued"]')?.textContent,
          };
        }, hostileData());
        assertEquals(escaped, {
          injected: 0,
          shown: true,
          policy: "<img src=x id=pwned2>",
          experiment: 0,
          queued: "2 queued",
        });

        const png = await Deno.readFile(target);
        assertEquals([...png.subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47], "a PNG file");
        assert(png.length > 20_000, `the screenshot has content (${png.length} bytes)`);
        if (SCREENSHOT) console.log(`dashboard screenshot: ${target}`);
      } finally {
        await browser?.close();
        await router.close();
        await cluster.close();
        await Deno.remove(profile, { recursive: true }).catch(() => {});
      }
    },
  },
);
