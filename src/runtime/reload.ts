/**
 * Hot reload: applies a new configuration to a running router without dropping requests.
 *
 *   model unchanged except `instances`/`discovery` → same runtime; membership reconciled in
 *       place (leases, breakers, caches and in-flight requests untouched; removed instances
 *       drain and disappear when idle; new ones get traffic once /health passes)
 *   model with other changed settings, or new    → a new runtime (tokenizers reused), swapped in;
 *       what operators changed through the admin API carries over (instances they added,
 *       instances they drained), as do DNS discovery's answers
 *   model no longer configured                    → retired: its background work stops; requests
 *       already running on it finish
 *
 * A config whose runtimes cannot be built is rejected as a whole with the reasons; nothing
 * changes. The listener's settings (BOUND_AT_START) are bound at start: a change is reported
 * as needing a restart.
 */
import type { Config, ModelConfig } from "../config/schema.ts";
import type { BackgroundWork } from "./background_work.ts";
import { policyProblems } from "../scheduling/named_policy.ts";
import type { ModelCluster } from "../cluster/model_cluster.ts";
import type { ModelRuntime } from "./model_runtime.ts";

export interface ReloadPlan {
  /** Models whose runtime stays (only membership may change). */
  keep: string[];
  /** Models whose settings changed: a new runtime replaces the old one. */
  rebuild: string[];
  add: string[];
  remove: string[];
  /** Changed settings that apply only after a restart. */
  needsRestart: string[];
}

export interface MembershipChange {
  model: string;
  added: string[];
  updated: string[];
  removed: string[];
}

export type ReloadResult =
  | { ok: true; plan: ReloadPlan; membership: MembershipChange[] }
  | { ok: false; problems: string[] };

/** Which models keep, rebuild, gain or lose a runtime. Pure. */
export function planReload(current: Config, next: Config): ReloadPlan {
  const before = new Map(current.models.map((m) => [m.name, m]));
  const after = new Set(next.models.map((m) => m.name));
  const plan: ReloadPlan = { keep: [], rebuild: [], add: [], remove: [], needsRestart: [] };
  for (const model of next.models) {
    const old = before.get(model.name);
    if (!old) plan.add.push(model.name);
    else if (runtimeSettings(old) === runtimeSettings(model)) plan.keep.push(model.name);
    else plan.rebuild.push(model.name);
  }
  for (const name of before.keys()) if (!after.has(name)) plan.remove.push(name);
  for (const [name, read] of BOUND_AT_START) {
    const [was, is] = [read(current), read(next)];
    if (was !== is) plan.needsRestart.push(`${name}: ${was} → ${is}`);
  }
  return plan;
}

/** Settings the listener is built with: a change waits for a restart (and is reported). */
const BOUND_AT_START: [string, (config: Config) => string | number][] = [
  ["listen", (c) => `${c.listen.host}:${c.listen.port}`],
  ["listen.server", (c) => c.listen.server],
  ["limits.clientHeaderTimeoutMs", (c) => c.limits.clientHeaderTimeoutMs],
  ["limits.clientKeepAliveTimeoutMs", (c) => c.limits.clientKeepAliveTimeoutMs],
  ["limits.maxConnections", (c) => c.limits.maxConnections],
];

/**
 * Everything a runtime is built from except its members (and the A/B `experiment` section, which
 * the gateway's arm selector takes over on its own). An engine-mode tokenizer picks its flavour
 * from the instances' engines, so that choice counts too.
 */
export function runtimeSettings(model: ModelConfig): string {
  const { instances, discovery: _discovery, experiment: _experiment, ...settings } = model;
  const extra = model.tokenizer.mode === "engine"
    ? { engineFlavour: instances.some((i) => i.engine === "sglang") ? "sglang" : "vllm" }
    : {};
  return stableJson({ ...settings, ...extra });
}

/** What a reload reads and swaps: the running models (src/runtime/model_registry.ts). */
export interface ReloadTarget {
  readonly config: Config;
  runtimes(): ModelRuntime[];
  runtime(model: string): ModelRuntime | undefined;
  /** Puts the new config and its runtimes in place, for every part that follows them. */
  replace(config: Config, runtimes: Map<string, ModelRuntime>): void;
}

export interface ReloadHost {
  models: ReloadTarget;
  background: BackgroundWork;
  buildRuntime(model: ModelConfig): Promise<ModelRuntime>;
  /** Problems beyond the schema's and the policies' (e.g. experiment arms). */
  validate?: (config: Config) => string[];
  log: (message: string, fields?: Record<string, unknown>) => void;
}

/** Validates and applies `next` (see the file comment). Never throws. */
export async function applyReload(host: ReloadHost, next: Config): Promise<ReloadResult> {
  const { models, log } = host;
  const reject = (problems: string[]): ReloadResult => {
    log("config reload rejected, keeping the running config", { level: "warn", problems });
    return { ok: false, problems };
  };
  const problems = [...policyProblems(next), ...(host.validate?.(next) ?? [])];
  if (problems.length) return reject(problems);
  const plan = planReload(models.config, next);
  const built = await buildFresh(host, next, [...plan.rebuild, ...plan.add]);
  if (!built.ok) return reject(built.errors);
  const fresh = built.runtimes;

  const { runtimes, membership } = nextRuntimes(host, next, fresh);
  const retired = models.runtimes().filter((r) => runtimes.get(r.config.name) !== r);
  models.replace(next, runtimes);
  for (const [name, runtime] of fresh) {
    host.background.start(runtime, retired.find((r) => r.config.name === name));
  }
  await Promise.all(retired.map((runtime) => host.background.stop(runtime)));

  log("config reloaded", {
    kept: plan.keep,
    rebuilt: plan.rebuild,
    added: plan.add,
    removed: plan.remove,
    membership,
  });
  if (plan.needsRestart.length) {
    log("config reload: some changes need a restart to take effect", {
      level: "warn",
      settings: plan.needsRestart,
    });
  }
  return { ok: true, plan, membership };
}

/** New runtimes for the named models; all or nothing (a failed build stops the others). */
async function buildFresh(
  host: ReloadHost,
  next: Config,
  names: string[],
): Promise<{ ok: true; runtimes: Map<string, ModelRuntime> } | { ok: false; errors: string[] }> {
  const models = new Map(next.models.map((m) => [m.name, m]));
  const runtimes = new Map<string, ModelRuntime>();
  const errors: string[] = [];
  await Promise.all(names.map(async (name) => {
    try {
      runtimes.set(name, await host.buildRuntime(models.get(name)!));
    } catch (error) {
      const index = next.models.findIndex((m) => m.name === name);
      errors.push(`models[${index}] (${name}): ${(error as Error).message}`);
    }
  }));
  if (!errors.length) return { ok: true, runtimes };
  for (const runtime of runtimes.values()) await runtime.cluster.stop();
  return { ok: false, errors };
}

/**
 * The runtime of every model in `next`: a fresh one (carrying the operator's changes over), or
 * the running one with its membership reconciled in place.
 */
function nextRuntimes(
  host: ReloadHost,
  next: Config,
  fresh: Map<string, ModelRuntime>,
): { runtimes: Map<string, ModelRuntime>; membership: MembershipChange[] } {
  const runtimes = new Map<string, ModelRuntime>();
  const membership: MembershipChange[] = [];
  for (const model of next.models) {
    const running = host.models.runtime(model.name);
    const built = fresh.get(model.name);
    if (built) {
      if (running) carryOperatorState(running.cluster, built.cluster, host.log);
      runtimes.set(model.name, built);
      continue;
    }
    const change = running!.cluster.reconcileMembers(model.instances, "config", {
      initialState: "starting",
    });
    host.background.setDiscovery(running!, model.discovery);
    runtimes.set(model.name, running!);
    if (change.added.length || change.updated.length || change.removed.length) {
      membership.push({ model: model.name, ...change });
    }
  }
  return { runtimes, membership };
}

/**
 * A rebuilt runtime starts from the config file alone; the admin API's changes to the old one
 * (instances added, instances drained) are applied to it too, and logged.
 */
function carryOperatorState(
  from: ModelCluster,
  to: ModelCluster,
  log: ReloadHost["log"],
): void {
  const added: string[] = [];
  const drained: string[] = [];
  for (const entry of from.entries()) {
    if (entry.removeWhenIdle) continue;
    const id = entry.config.id;
    if (entry.origin === "admin" && !to.get(id)) {
      const state = entry.breaker.state === "closed" ? "closed" : "starting";
      to.upsert(entry.config, "admin", { initialState: state });
      added.push(id);
    }
    if (entry.draining && to.drain(id)) drained.push(id);
  }
  if (added.length || drained.length) {
    log("config reload: kept the admin API's changes in the rebuilt runtime", {
      model: to.model,
      adminInstances: added,
      drained,
    });
  }
}

/** JSON with object keys sorted, so equal settings compare equal whatever their order. */
function stableJson(value: unknown): string {
  return JSON.stringify(
    value,
    (_key, v) =>
      v && typeof v === "object" && !Array.isArray(v)
        ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
        : v,
  );
}
