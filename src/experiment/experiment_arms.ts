import { formatPath } from "../config/load.ts";
import {
  type Config,
  type ExperimentConfig,
  ExperimentSchema,
  type ModelConfig,
} from "../config/schema.ts";
import type { ArmSelection, ArmSelector, ServedModel } from "../contracts.ts";
import { buildPolicy, type NamedPolicy } from "../scheduling/named_policy.ts";
import { sha256Hex } from "../hashing/sha256_digest.ts";
import { HttpError } from "../openai/errors.ts";
import { assignArm } from "./assign.ts";
import { type ExperimentKey, experimentKeyValue, parseExperimentKey } from "./experiment_key.ts";

/** Carries the admin token with an arm override; never forwarded to the engines. */
export const OPERATOR_TOKEN_HEADER = "x-tidegate-admin-token";

const DEFAULT_PRIVATE_HEADERS: readonly string[] = Object.freeze([OPERATOR_TOKEN_HEADER]);

export type ExperimentChangeSource = "config" | "reload" | "admin";

export interface LiveArm {
  name: string;
  weight: number;
  policy: NamedPolicy;
}

/** One model's running experiment: a version per change, so stats never mix two arm sets. */
export interface LiveExperiment {
  model: string;
  version: number;
  config: ExperimentConfig;
  key: ExperimentKey;
  arms: LiveArm[];
  source: ExperimentChangeSource;
  changedAtWallMs: number;
  /** Request headers for the router alone (the admin token and the override), set once. */
  privateHeaders: readonly string[];
}

export interface ExperimentArmsDeps {
  random: () => number;
  wallNow: () => number;
  log: (message: string, fields?: Record<string, unknown>) => void;
  /** The resolved admin token (the override is honoured only with it). */
  adminToken: () => string | undefined;
  /** Every change after start (admin API, reload): metrics count them here. */
  onChange?: (model: string, experiment: LiveExperiment | undefined) => void;
}

/** A runtime arm change that does not validate; `problems` name the fields at fault. */
export class ExperimentError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid experiment:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "ExperimentError";
  }
}

/**
 * The gateway's ArmSelector when experiments are configured: keeps each model's live arms,
 * assigns requests sticky by the experiment's key, honours the operator override, and takes arm
 * changes from the admin API (`apply`) and from config reloads (`sync`, which
 * `Gateway.replace()` calls with the new config and runtimes). A reload changes the arms only
 * when the model's `experiment` section itself changed, so an admin change survives unrelated
 * reloads; a reload whose arms cannot be built keeps the running ones (and logs why).
 */
export class ExperimentArms implements ArmSelector {
  readonly #deps: ExperimentArmsDeps;
  readonly #live = new Map<string, LiveExperiment>();
  /** Per model: the runtime and the config section the live arms were last synced with. */
  readonly #synced = new Map<
    string,
    { runtime: ServedModel; section: ExperimentConfig | undefined }
  >();
  #version = 0;

  constructor(deps: ExperimentArmsDeps) {
    this.#deps = deps;
  }

  select(runtime: ServedModel, request: Request, body: Record<string, unknown>): ArmSelection {
    const live = this.#current(runtime);
    if (!live) {
      return {
        arm: "default",
        policy: runtime.defaultPolicy,
        privateHeaders: DEFAULT_PRIVATE_HEADERS,
      };
    }
    const { privateHeaders } = live;
    const header = live.config.overrideHeader;
    const wanted = header ? request.headers.get(header)?.trim() : undefined;
    // Without the admin token the override header is ignored (and not forwarded).
    if (
      wanted && tokenMatches(request.headers.get(OPERATOR_TOKEN_HEADER), this.#deps.adminToken())
    ) {
      const arm = live.arms.find((a) => a.name === wanted);
      if (!arm) {
        throw new HttpError(
          400,
          `Unknown arm "${wanted}" in ${header}: the arms of model '${live.model}' are ${
            live.arms.map((a) => a.name).join(", ")
          }.`,
          { param: header, code: "unknown_arm" },
        );
      }
      return {
        arm: arm.name,
        policy: arm.policy,
        experiment: { version: live.version, assignment: "override", cluster: 0 },
        privateHeaders,
      };
    }
    const value = experimentKeyValue(
      live.key,
      { headers: request.headers, body },
      live.config.prefixTokens,
    );
    const { index, kind, cluster } = assignArm(live.arms, value, {
      salt: live.config.salt,
      fallback: live.config.fallback,
      random: this.#deps.random,
    });
    const arm = live.arms[index];
    return {
      arm: arm.name,
      policy: arm.policy,
      experiment: { version: live.version, assignment: kind, cluster },
      privateHeaders,
    };
  }

  /**
   * Adopts changed `experiment` sections after a (re)load; forgets removed models. The sections
   * come from `config` when given (a reload may keep a runtime built from the old config), else
   * from each runtime's own config.
   */
  sync(runtimes: Iterable<ServedModel>, config?: Pick<Config, "models">): void {
    const present = new Set<string>();
    for (const runtime of runtimes) {
      const model = runtime.config.name;
      present.add(model);
      this.#adopt(
        runtime,
        config
          ? config.models.find((m) => m.name === model)?.experiment
          : runtime.config.experiment,
      );
    }
    for (const model of [...this.#synced.keys()]) {
      if (present.has(model)) continue;
      this.#synced.delete(model);
      if (this.#live.delete(model)) {
        this.#deps.log("experiment ended: model removed", { model });
        this.#deps.onChange?.(model, undefined);
      }
    }
  }

  /**
   * Replaces a model's arms at runtime (admin API); `undefined` ends the experiment. The input
   * is validated like the config file (schema, policy names and parameters, override rule);
   * throws ExperimentError listing every problem.
   */
  apply(
    runtime: ServedModel,
    input: unknown,
    source: ExperimentChangeSource = "admin",
  ): LiveExperiment | undefined {
    this.#current(runtime);
    if (input === undefined || input === null) {
      this.#install(runtime, undefined, source);
      return undefined;
    }
    const parsed = ExperimentSchema.safeParse(input);
    if (!parsed.success) {
      throw new ExperimentError(
        parsed.error.issues.map((issue) => `${formatPath(issue.path)}: ${issue.message}`),
      );
    }
    const problems = armPolicyProblems(parsed.data, runtime.config, "");
    if (parsed.data.overrideHeader && !this.#deps.adminToken()) {
      problems.push("overrideHeader: needs admin.token (the override is honoured only with it)");
    }
    if (problems.length) throw new ExperimentError(problems);
    return this.#install(runtime, parsed.data, source);
  }

  get(model: string): LiveExperiment | undefined {
    return this.#live.get(model);
  }

  list(): LiveExperiment[] {
    return [...this.#live.values()];
  }

  /** The live experiment of a runtime (one never synced adopts its own config section). */
  #current(runtime: ServedModel): LiveExperiment | undefined {
    const synced = this.#synced.get(runtime.config.name);
    if (synced?.runtime !== runtime) this.#adopt(runtime, runtime.config.experiment);
    return this.#live.get(runtime.config.name);
  }

  #adopt(runtime: ServedModel, section: ExperimentConfig | undefined): void {
    const model = runtime.config.name;
    const synced = this.#synced.get(model);
    if (synced?.runtime === runtime && synced.section === section) return;
    this.#synced.set(model, { runtime, section });
    if (!synced) {
      this.#install(runtime, section, "config");
    } else if (JSON.stringify(synced.section) !== JSON.stringify(section)) {
      this.#install(runtime, section, "reload");
    } else {
      // Same section, new runtime (a reload changed something else): rebuild the policies
      // against the new model config, keeping the arms (admin changes included) and version.
      const live = this.#live.get(model);
      if (live && synced.runtime !== runtime) {
        try {
          this.#live.set(model, { ...live, arms: buildArms(live.config, runtime.config) });
        } catch (error) {
          this.#deps.log("experiment arms kept as they were", {
            model,
            error: (error as Error).message,
          });
        }
      }
    }
  }

  #install(
    runtime: ServedModel,
    config: ExperimentConfig | undefined,
    source: ExperimentChangeSource,
  ): LiveExperiment | undefined {
    const model = runtime.config.name;
    const previous = this.#live.get(model);
    if (!config) {
      if (!previous) return undefined;
      this.#live.delete(model);
      this.#deps.log("experiment ended", { model, source, version: previous.version });
      this.#deps.onChange?.(model, undefined);
      return undefined;
    }
    let arms: LiveArm[];
    try {
      arms = buildArms(config, runtime.config);
    } catch (error) {
      // Only reachable from a config that skipped experimentProblems(): keep serving.
      this.#deps.log("experiment change rejected, keeping the running arms", {
        level: "warn",
        model,
        source,
        error: (error as Error).message,
      });
      return previous;
    }
    const live: LiveExperiment = {
      model,
      version: ++this.#version,
      config,
      key: parseExperimentKey(config.key),
      arms,
      source,
      changedAtWallMs: this.#deps.wallNow(),
      privateHeaders: Object.freeze(
        config.overrideHeader
          ? [OPERATOR_TOKEN_HEADER, config.overrideHeader]
          : [OPERATOR_TOKEN_HEADER],
      ),
    };
    this.#live.set(model, live);
    this.#deps.log(previous ? "experiment arms changed" : "experiment started", {
      model,
      source,
      version: live.version,
      key: config.key,
      arms: live.arms.map((a) => `${a.name}=${a.policy.name}×${a.weight}`),
      ...(previous ? { previousArms: previous.arms.map((a) => a.name) } : {}),
    });
    if (source !== "config") this.#deps.onChange?.(model, live);
    return live;
  }
}

function buildArms(config: ExperimentConfig, model: ModelConfig): LiveArm[] {
  return config.arms.map((arm) => ({
    name: arm.name,
    weight: arm.weight,
    policy: buildPolicy(arm.policy, model),
  }));
}

function armPolicyProblems(
  experiment: ExperimentConfig,
  model: Pick<ModelConfig, "prefillModel">,
  path: string,
): string[] {
  const problems: string[] = [];
  experiment.arms.forEach((arm, a) => {
    try {
      buildPolicy(arm.policy, model);
    } catch (error) {
      problems.push(`${path}arms[${a}].policy: ${(error as Error).message}`);
    }
  });
  return problems;
}

/** Every arm's policy name and parameters checked at start, like the models' own policies. */
export function experimentProblems(config: Config): string[] {
  return config.models.flatMap((model, m) =>
    model.experiment ? armPolicyProblems(model.experiment, model, `models[${m}].experiment.`) : []
  );
}

/** Constant-time comparison (of digests, so lengths do not leak either). */
function tokenMatches(given: string | null, expected: string | undefined): boolean {
  if (!given || !expected) return false;
  const a = sha256Hex(new TextEncoder().encode(given.trim()));
  const b = sha256Hex(new TextEncoder().encode(expected));
  let difference = 0;
  for (let i = 0; i < a.length; i++) difference |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return difference === 0;
}
