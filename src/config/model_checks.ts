/**
 * The checks of one model that the field types cannot express. They run on each model that
 * parsed, whatever is wrong elsewhere in the file, so one report lists every problem. Paths are
 * relative to the model (zod prefixes `models[i]`).
 */
import type { z } from "zod";
import { KEY_FORMAT_PRESETS } from "../hashing/key_format.ts";
import { createKeyScheme, KeySchemeError, keySchemeOptionsFromKv } from "../hashing/key_scheme.ts";
import { buildPolicy } from "../scheduling/named_policy.ts";
import { isPolicyName, policyNames } from "../scheduling/registry.ts";
import { didYouMean } from "./did_you_mean.ts";
import type { ModelSchema } from "./model_schema.ts";

type Model = z.output<typeof ModelSchema>;

function addIssue(ctx: z.RefinementCtx, path: PropertyKey[], message: string): void {
  ctx.addIssue({ code: "custom", path, message });
}

/** Every check of one model. */
export function checkModel(model: Model, ctx: z.RefinementCtx): void {
  checkInstanceIds(model, ctx);
  checkDiscovery(model, ctx);
  checkModelNeeds(model, ctx);
  checkRoles(model, ctx);
  checkPolicy(model.policy, model, ["policy"], ctx);
  model.experiment?.arms.forEach((arm, a) =>
    checkPolicy(arm.policy, model, ["experiment", "arms", a, "policy"], ctx)
  );
  checkKeyScheme(model, ctx);
}

/** The policy builds: a known name (else the closest one is suggested) and valid parameters. */
function checkPolicy(
  spec: Model["policy"],
  model: Model,
  path: PropertyKey[],
  ctx: z.RefinementCtx,
): void {
  try {
    buildPolicy(spec, model);
  } catch (error) {
    const name = typeof spec === "string" ? spec : spec.name;
    const hint = isPolicyName(name) ? "" : didYouMean(name, policyNames());
    addIssue(ctx, path, `${(error as Error).message}${hint}`);
  }
}

/** The store keys can be built: hash, seed, chunk sizes, key format and its parameters agree. */
function checkKeyScheme(model: Model, ctx: z.RefinementCtx): void {
  try {
    createKeyScheme(keySchemeOptionsFromKv(model.kv, model.name));
  } catch (error) {
    const problems = error instanceof KeySchemeError ? error.problems : [(error as Error).message];
    for (const problem of problems) {
      if (!problem.startsWith("keyFormat")) addIssue(ctx, ["kv"], problem);
      else addIssue(ctx, ["kv", "keyFormat"], problem + keyFormatHint(model.kv.keyFormat));
    }
  }
}

/** A key format that is no template (no placeholder) was meant as a preset: the closest one. */
function keyFormatHint(keyFormat: string): string {
  return keyFormat.includes("{") ? "" : didYouMean(keyFormat, KEY_FORMAT_PRESETS);
}

function checkInstanceIds(model: Model, ctx: z.RefinementCtx): void {
  const ids = new Set<string>();
  model.instances.forEach((instance, i) => {
    if (ids.has(instance.id)) {
      addIssue(ctx, ["instances", i, "id"], `duplicate instance id "${instance.id}"`);
    }
    ids.add(instance.id);
  });
}

function checkDiscovery(model: Model, ctx: z.RefinementCtx): void {
  const groups = new Set<string>();
  model.discovery.forEach((entry, d) => {
    if (groups.has(entry.name)) {
      addIssue(
        ctx,
        ["discovery", d, "name"],
        `duplicate discovery name "${entry.name}" (instance ids derive from it)`,
      );
    }
    groups.add(entry.name);
    if (entry.recordType !== "SRV" && entry.port === undefined) {
      addIssue(
        ctx,
        ["discovery", d, "port"],
        `required for ${entry.recordType} records (only SRV records carry ports)`,
      );
    }
  });
}

/** Fields one setting of a model makes required. */
function checkModelNeeds(model: Model, ctx: z.RefinementCtx): void {
  if (model.instances.length === 0 && model.discovery.length === 0) {
    addIssue(ctx, ["instances"], "a model needs at least one instance or a discovery entry");
  }
  const urls = model.kv.url;
  if (Array.isArray(urls) && new Set(urls).size !== urls.length) {
    addIssue(ctx, ["kv", "url"], "lists the same master twice");
  }
  if (model.kv.store === "mooncake" && !model.kv.url) {
    addIssue(
      ctx,
      ["kv", "url"],
      'required when kv.store is "mooncake" (the master\'s HTTP port, default 9003; ' +
        "an array of URLs for an HA group)",
    );
  }
  if (model.tokenizer.mode === "local" && !model.tokenizer.path) {
    addIssue(
      ctx,
      ["tokenizer", "path"],
      'required when tokenizer.mode is "local" (a directory with tokenizer.json)',
    );
  }
  if (model.slo.admission && model.slo.ttftS === undefined && model.slo.tbtS === undefined) {
    addIssue(ctx, ["slo", "admission"], "admission needs slo.ttftS and/or slo.tbtS");
  }
}

/**
 * A disaggregated model needs a prefill and a decode instance (configured or discovered); prefill
 * and decode roles mean nothing without the protocol that joins them.
 */
function checkRoles(model: Model, ctx: z.RefinementCtx): void {
  const members = [...model.instances, ...model.discovery];
  const count = (role: string) => members.filter((i) => i.role === role).length;
  if (model.disaggregation) {
    const pd = model.disaggregation;
    if (pd.protocol === "sglang" && pd.localPrefill.mode !== "off") {
      addIssue(
        ctx,
        ["disaggregation", "localPrefill", "mode"],
        'must be "off" with the sglang protocol: an SGLang decode server refuses a request ' +
          "without a bootstrap room, so it cannot prefill one itself",
      );
    }
    const missing = (["prefill", "decode"] as const).filter((role) => count(role) === 0);
    if (missing.length === 0) return;
    addIssue(
      ctx,
      ["disaggregation"],
      `needs at least one ${missing.join(" and one ")} instance (instances or discovery entries ` +
        `with role "prefill" / "decode"); it has ${count("prefill")} prefill, ` +
        `${count("decode")} decode and ${count("neutral")} neutral`,
    );
    return;
  }
  for (
    const [key, list] of [["instances", model.instances], ["discovery", model.discovery]] as const
  ) {
    list.forEach((member, i) => {
      if (member.role === "neutral") return;
      addIssue(
        ctx,
        [key, i, "role"],
        `role "${member.role}" needs the model's disaggregation section (the P/D protocol the ` +
          `engines speak: "vllm-nixl", "vllm-mooncake" or "sglang")`,
      );
    });
  }
}
