import type { DispatchPlan } from "../contracts.ts";
import { HttpError } from "../openai/errors.ts";
import { type ForwardOutcome, type ForwardTarget, forwardWithRetries } from "../proxy/forward.ts";
import { AttemptLeases } from "./attempt_leases.ts";
import { clientGone, type ExecuteOptions, fail, finishOnce } from "./execution.ts";
import { executePd } from "./execute_pd.ts";
import { relayResponse } from "./relay_response.ts";

export type { ExecuteOptions } from "./execution.ts";

/**
 * Sends a planned request down the policy's ranking: a load lease and a breaker permit per
 * attempt, retries before the first byte, then streams the answer through while measuring TTFT,
 * inter-token gaps and usage. Every lease is released exactly once, however the request ends.
 */
export async function executeDispatch(options: ExecuteOptions): Promise<Response> {
  const { runtime, plan, record, reservation } = options;
  if (plan.decode && !plan.decode.localPrefill?.local) {
    return executePd({ ...options, requestBody: options.requestBody ?? {} });
  }
  options.decodeReservation?.cancel();
  const targets = targetsOf(plan);
  if (targets.length === 0) {
    reservation?.cancel();
    record.outcome = "no_instance";
    return fail(
      options,
      new HttpError(503, `No healthy instance of model '${record.model}' is available`, {
        code: "no_healthy_instance",
      }),
    );
  }
  const { upstreamHeaders } = options;
  upstreamHeaders.set("x-request-id", record.requestId);
  const leases = new AttemptLeases(
    runtime,
    plan,
    reservation,
    upstreamHeaders,
    options.now,
    options.trace,
  );
  const outcome = await forward(options, targets, upstreamHeaders, leases);
  record.attempts = outcome.attempts;
  reservation?.cancel(); // never attempted: nothing will run there

  if (outcome.kind === "client_gone") {
    leases.releaseAll();
    return clientGone(options);
  }
  if (outcome.kind === "failed" && outcome.status === 404) {
    record.outcome = "client_error";
    const error = new HttpError(
      404,
      `No instance of model '${record.model}' serves ${options.path}: ${outcome.message}`,
      { code: "route_not_served" },
    );
    return fail(options, error);
  }
  if (outcome.kind === "failed") {
    const timedOut = outcome.status === 504;
    record.outcome = timedOut ? "upstream_timeout" : "upstream_failed";
    return fail(
      options,
      new HttpError(outcome.status, outcome.message, {
        code: timedOut ? "upstream_timeout" : "upstream_unavailable",
      }),
    );
  }
  return relayResponse({
    ...options,
    target: outcome.target,
    response: outcome.response,
    leases,
    finishOnce: () => finishOnce(options),
  });
}

function forward(
  options: ExecuteOptions,
  targets: ForwardTarget[],
  headers: Headers,
  leases: AttemptLeases,
): Promise<ForwardOutcome> {
  return forwardWithRetries(
    {
      method: "POST",
      path: options.path,
      headers,
      body: options.body,
      targets,
      maxAttempts: 1 + options.maxRetries,
      headersTimeoutMs: options.headersTimeoutMs,
      signal: options.clientSignal,
      notFoundMeansNotServed: options.notFoundMeansNotServed,
    },
    { fetch: leases.tracedFetch(options.fetch), now: options.now },
    leases.hooks(),
  );
}

/**
 * The policy's ranking as forward targets (instances removed since the decision are skipped); a
 * local prefill's, the decode ranking: each decode instance can prefill the request itself.
 */
function targetsOf(plan: DispatchPlan): ForwardTarget[] {
  const ranking = plan.decode?.localPrefill?.local
    ? plan.decode.decision.ranking
    : plan.decision.ranking;
  return ranking.flatMap((id) => {
    const entry = plan.entries.get(id);
    return entry ? [{ id, url: entry.config.url }] : [];
  });
}
