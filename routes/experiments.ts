import { Hono } from "hono";
import type { ExperimentArms, LiveExperiment } from "../src/experiment/experiment_arms.ts";
import { ExperimentError } from "../src/experiment/experiment_arms.ts";
import type { ExperimentStats } from "../src/experiment/experiment_stats.ts";
import type { ModelRegistry } from "../src/runtime/model_registry.ts";
import { HttpError, openAIErrorBody } from "../src/openai/errors.ts";
import { readJsonBody } from "./json_body.ts";
import { bodyBounds } from "./read_body.ts";

/**
 * The experiments part of the admin API, meant to be mounted under `/admin` behind the admin
 * authentication:
 * - `GET /experiments`: every running experiment with per-arm statistics and the verdict.
 * - `GET /experiments/:model`: one model's.
 * - `PUT /experiments/:model`: replaces the model's experiment (body: the `experiment` object of
 *   the config file); validated, logged, counted in `tidegate_experiment_changes_total`.
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
      "an experiment {key, arms: [...]}",
      bodyBounds(models.config),
    );
    try {
      const live = experiments.arms.apply(runtime, body ?? undefined, "admin");
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
