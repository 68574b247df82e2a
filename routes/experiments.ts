import { Hono } from "hono";
import type { ExperimentArms, LiveExperiment } from "../src/experiment/experiment_arms.ts";
import { ExperimentError } from "../src/experiment/experiment_arms.ts";
import type { ExperimentStats } from "../src/experiment/experiment_observer.ts";
import type { ModelRegistry } from "../src/runtime/model_registry.ts";
import { HttpError, openAIErrorBody } from "../src/openai/errors.ts";
import { readJsonBody } from "./json_body.ts";
import { bodyBounds } from "./read_body.ts";

/**
 * The experiments part of the admin API, meant to be mounted under `/admin` behind the admin
 * authentication:
 * - `GET /experiments`: every running experiment with per-arm statistics and the verdict.
 * - `GET /experiments/:model`: one model's.
 * - `PUT /experiments/:model`: replaces the model's experiment; the body is the model's
 *   `experiment` section of the config file, bare (`{key, arms: [...]}`) or wrapped as in
 *   docs/experiments/*.json (`{"experiment": {...}}`); `null` (or `{"experiment": null}`) ends
 *   it. Validated, logged, counted in `tidegate_experiment_changes_total`.
 * - `DELETE /experiments/:model`: ends it (the model's own `policy` serves everything again).
 */
export function experimentRoutes(
  models: ModelRegistry,
  experiments: { arms: ExperimentArms; stats: ExperimentStats },
): Hono {
  const app = new Hono();

  app.get("/experiments", (c) => c.json({ experiments: experiments.stats.report() }));

  app.get("/experiments/:model", (c) => {
    const runtime = models.require(c.req.param("model"));
    const [report] = experiments.stats.report(runtime.config.name);
    if (!report) {
      throw new HttpError(404, `Model '${runtime.config.name}' runs no experiment.`, {
        code: "no_experiment",
      });
    }
    return c.json(report);
  });

  app.put("/experiments/:model", async (c) => {
    const runtime = models.require(c.req.param("model"));
    const body = await readJsonBody(
      c,
      'an experiment {key, arms: [...]} or {"experiment": {...}}',
      bodyBounds(models.config),
    );
    try {
      const live = experiments.arms.apply(runtime, experimentSection(body) ?? undefined, "admin");
      return c.json(live ? describe(live) : { model: runtime.config.name, experiment: null });
    } catch (error) {
      if (!(error instanceof ExperimentError)) throw error;
      // The OpenAI error shape, plus the list of problems for tools.
      const { error: body } = openAIErrorBody(400, error.message, { code: "invalid_experiment" });
      return c.json({ error: { ...body, problems: error.problems } }, 400);
    }
  });

  app.delete("/experiments/:model", (c) => {
    const runtime = models.require(c.req.param("model"));
    experiments.arms.apply(runtime, undefined, "admin");
    return c.json({ model: runtime.config.name, experiment: null });
  });

  return app;
}

/**
 * The experiment section of a PUT body: the body itself, or the `experiment` of a body wrapped
 * the way the config file and docs/experiments/*.json write it. A wrapper with other fields is
 * refused, so a mistyped field is not silently dropped.
 */
function experimentSection(body: unknown): unknown {
  if (body === null || typeof body !== "object" || !Object.hasOwn(body, "experiment")) return body;
  const extra = Object.keys(body).filter((key) => key !== "experiment");
  if (extra.length) {
    throw new ExperimentError(
      extra.map((key) => `${key}: unknown field beside "experiment" (send the section alone)`),
    );
  }
  return (body as { experiment: unknown }).experiment;
}

/** What a change answers: the new arms and version (statistics restart from here). */
function describe(live: LiveExperiment) {
  return {
    model: live.model,
    version: live.version,
    source: live.source,
    since: new Date(live.changedAtWallMs).toISOString(),
    experiment: live.config,
  };
}
