/**
 * Builds the shared state of `cluster.sharedState` for a router: the Redis channel, the remote
 * facts applied to the models this router serves, and the publisher. Returns undefined without
 * the setting (nothing changes then).
 */
import { createRedisPubSub } from "./redis_pubsub.ts";
import { type ModelView, RemoteFacts } from "./remote_facts.ts";
import { type PubSub, SharedState } from "./shared_state.ts";
import type { Timers } from "./timers.ts";

export interface SharedStateSettings {
  redis: string;
  prefix: string;
  timeoutMs: number;
  heartbeatMs: number;
  silentAfterMs: number;
}

export function createSharedState(
  settings: SharedStateSettings | undefined,
  deps: {
    viewOf: (model: string) => ModelView | undefined;
    now: () => number;
    timers?: Timers;
    log: (message: string, fields?: Record<string, unknown>) => void;
    /** Tests pass an in-memory channel. */
    pubsub?: PubSub;
  },
): SharedState | undefined {
  if (!settings) return undefined;
  const replica = `${Deno.hostname()}-${Deno.pid}-${crypto.randomUUID().slice(0, 8)}`;
  deps.log("shared state: publishing this replica's dispatches", {
    replica,
    channel: `${settings.prefix}:facts`,
  });
  return new SharedState({
    pubsub: deps.pubsub ?? createRedisPubSub(settings.redis, `${settings.prefix}:facts`),
    replica,
    remote: new RemoteFacts({
      viewOf: deps.viewOf,
      now: deps.now,
      silentAfterMs: settings.silentAfterMs,
      log: deps.log,
    }),
    log: deps.log,
    timeoutMs: settings.timeoutMs,
    heartbeatMs: settings.heartbeatMs,
    timers: deps.timers,
    now: deps.now,
  });
}
