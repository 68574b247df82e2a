/**
 * Instance groups given as DNS names (e.g. a Kubernetes headless Service), resolved periodically
 * into instances of one model.
 *
 *   A / AAAA: one instance per address, with the entry's port:
 *             id `{name}-{address}:{port}`, url `{scheme}://{address}:{port}`, kvHost = address.
 *   SRV:      one instance per (target, port) pair; each target is resolved to its addresses
 *             (A, else AAAA) so that the URL and kvHost carry the pod IP the KV store reports.
 *             A target that does not resolve is used by name (url and kvHost = the host name).
 *             SRV priority and weight are ignored: every target is a serving instance.
 *
 * Every entry of a model has its own timer; after each round the union over all entries is
 * handed to `apply` (typically `cluster.reconcileMembers(instances, "discovery")`), so several
 * entries of one model never remove each other's instances. A failed resolution (error, timeout,
 * NXDOMAIN) keeps that entry's previous set and is logged once per outage; an answer with no
 * records is a real, empty set.
 *
 * An instance whose URL carries credentials or whose host `allowsHost` refuses
 * (`admin.allowedInstanceHosts`) is skipped: logged and counted (`onRefused`) when first seen.
 *
 * Edge: the resolver, the clock and the timers are passed in (default `Deno.resolveDns`).
 */
import { hasUserinfo, urlHost } from "../config/instance_url.ts";
import { type DiscoveryConfig, type InstanceConfig, instanceIdProblem } from "../config/schema.ts";
import { PeriodicTask } from "./periodic_task.ts";
import { systemTimers, type Timers } from "./timers.ts";

export interface SrvAnswer {
  target: string;
  port: number;
  priority?: number;
  weight?: number;
}

/** `Deno.resolveDns`'s shape, narrowed to the record types discovery uses. */
export type ResolveDns = (
  query: string,
  recordType: "A" | "AAAA" | "SRV",
  options?: { signal?: AbortSignal },
) => Promise<string[] | SrvAnswer[]>;

export interface DnsDiscoveryOptions {
  model: string;
  entries: readonly DiscoveryConfig[];
  /** Receives the union of every entry's current instances after each changed round. */
  apply: (instances: InstanceConfig[]) => void;
  resolveDns?: ResolveDns;
  now: () => number;
  timers?: Timers;
  /** Deadline of one entry's resolution, SRV targets included (default 5 000 ms). */
  timeoutMs?: number;
  log?: (message: string, fields?: Record<string, unknown>) => void;
  /** Whether a discovered URL's host may be used (default: any). */
  allowsHost?: (host: string) => boolean;
  /** Told of each instance newly refused (its host is not allowed, or its URL has userinfo). */
  onRefused?: (instance: InstanceConfig) => void;
}

export interface DiscoveryEntryState {
  name: string;
  hostname: string;
  /** The entry's instances (the last good answer; empty until one arrived). */
  instances: InstanceConfig[];
  lastResolvedAtMs?: number;
  /** Why the last resolution failed, while it keeps failing. */
  lastError?: string;
  consecutiveFailures: number;
  /** Instances refused since start (each counted when it first appeared). */
  refused: number;
}

interface EntryState extends DiscoveryEntryState {
  /** Ids refused in the last answer, so that each is logged once per appearance. */
  refusedIds: Set<string>;
  config: DiscoveryConfig;
  resolved: boolean;
  signature: string;
  task?: PeriodicTask;
}

const defaultResolveDns: ResolveDns = (query, recordType, options) =>
  Deno.resolveDns(query, recordType as "A", options);

export class DnsDiscovery {
  readonly model: string;
  readonly #options: DnsDiscoveryOptions;
  readonly #resolve: ResolveDns;
  readonly #timers: Timers;
  readonly #entries: EntryState[];
  #lastApplied: string | undefined;
  #running = false;
  /** Set by stop(): a round still resolving then applies nothing (a successor owns the cluster). */
  #stopped = false;

  constructor(options: DnsDiscoveryOptions) {
    this.model = options.model;
    this.#options = options;
    this.#resolve = options.resolveDns ?? defaultResolveDns;
    this.#timers = options.timers ?? systemTimers();
    this.#entries = options.entries.map((config) => ({
      config,
      name: config.name,
      hostname: config.hostname,
      instances: [],
      consecutiveFailures: 0,
      refused: 0,
      refusedIds: new Set(),
      resolved: false,
      signature: "",
    }));
  }

  /**
   * Takes over the answers of an older discovery for entries configured identically (a reload),
   * so that their instances are not dropped and re-added while the first rounds run; those of
   * entries no longer configured are removed at once. `sameTarget`: both apply to the same
   * cluster (else the adopted instances are applied to the new one now).
   */
  adopt(previous: DnsDiscovery, sameTarget: boolean): void {
    for (const entry of this.#entries) {
      const old = previous.#entries.find((o) => sameEntry(o.config, entry.config));
      if (!old?.resolved) continue;
      entry.instances = [...old.instances];
      entry.resolved = true;
      entry.signature = old.signature;
      if (old.lastResolvedAtMs !== undefined) entry.lastResolvedAtMs = old.lastResolvedAtMs;
    }
    // Instances of entries no longer configured go now, not at the next change.
    this.#lastApplied = sameTarget ? previous.#lastApplied : undefined;
    this.#applyUnion();
  }

  get entries(): readonly DiscoveryConfig[] {
    return this.#entries.map((e) => e.config);
  }

  /** Resolves every entry at once, then each again every `intervalMs`. */
  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#stopped = false;
    for (const entry of this.#entries) {
      entry.task = new PeriodicTask(
        () => this.#round(entry),
        entry.config.intervalMs,
        this.#timers,
        this.#options.now,
      );
      entry.task.start();
    }
  }

  async stop(): Promise<void> {
    this.#running = false;
    this.#stopped = true;
    await Promise.all(this.#entries.map((entry) => entry.task?.stop()));
  }

  /** One resolution of every entry now (start-up without background work, and tests). */
  async refresh(): Promise<void> {
    await Promise.all(this.#entries.map((entry) => this.#round(entry)));
  }

  /** The union of every entry's current instances, deduplicated by id. */
  instances(): InstanceConfig[] {
    const byId = new Map<string, InstanceConfig>();
    for (const entry of this.#entries) {
      for (const instance of entry.instances) {
        if (!byId.has(instance.id)) byId.set(instance.id, instance);
      }
    }
    return [...byId.values()];
  }

  states(): DiscoveryEntryState[] {
    return this.#entries.map((e) => {
      const state: DiscoveryEntryState = {
        name: e.name,
        hostname: e.hostname,
        instances: [...e.instances],
        consecutiveFailures: e.consecutiveFailures,
        refused: e.refused,
      };
      if (e.lastResolvedAtMs !== undefined) state.lastResolvedAtMs = e.lastResolvedAtMs;
      if (e.lastError !== undefined) state.lastError = e.lastError;
      return state;
    });
  }

  async #round(entry: EntryState): Promise<void> {
    let instances: InstanceConfig[];
    try {
      instances = await this.#withDeadline((signal) => this.#resolveEntry(entry.config, signal));
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (entry.consecutiveFailures === 0) {
        this.#options.log?.("discovery: resolution failed, keeping the previous instances", {
          level: "warn",
          model: this.model,
          discovery: entry.name,
          hostname: entry.hostname,
          error: message,
          kept: entry.instances.length,
        });
      }
      entry.consecutiveFailures++;
      entry.lastError = message;
      return;
    }
    if (this.#stopped) return;
    if (entry.consecutiveFailures > 0) {
      this.#options.log?.("discovery: resolution recovered", {
        model: this.model,
        discovery: entry.name,
        failures: entry.consecutiveFailures,
      });
    }
    entry.consecutiveFailures = 0;
    delete entry.lastError;
    entry.lastResolvedAtMs = this.#options.now();
    instances = this.#admitted(entry, instances);
    const signature = signatureOf(instances);
    if (entry.resolved && signature === entry.signature) return;
    entry.resolved = true;
    entry.signature = signature;
    entry.instances = instances;
    this.#applyUnion();
  }

  /** The instances whose URLs may be used; the others are logged and counted once. */
  #admitted(entry: EntryState, instances: InstanceConfig[]): InstanceConfig[] {
    const refusedIds = new Set<string>();
    const admitted = instances.filter((instance) => {
      const reason = this.#refusal(instance);
      if (reason === undefined) return true;
      refusedIds.add(instance.id);
      if (!entry.refusedIds.has(instance.id)) {
        entry.refused++;
        this.#options.log?.("discovery: instance refused", {
          model: this.model,
          discovery: entry.name,
          // Only an allowed-list refusal names the instance: another URL may hold credentials.
          instance: reason.allowList ? instance.id : "(redacted)",
          reason: reason.text,
        });
        this.#options.onRefused?.(instance);
      }
      return false;
    });
    entry.refusedIds = refusedIds;
    return admitted;
  }

  #refusal(instance: InstanceConfig): { text: string; allowList: boolean } | undefined {
    const idProblem = instanceIdProblem(instance.id);
    if (idProblem) return { text: `its id ${idProblem}`, allowList: false };
    const url = instance.url;
    const host = urlHost(url);
    if (host === undefined || hasUserinfo(url)) {
      return {
        text: "not a usable URL (a record with credentials or an invalid host)",
        allowList: false,
      };
    }
    const allows = this.#options.allowsHost;
    if (allows && !allows(host)) {
      return { text: `host ${host} is not in admin.allowedInstanceHosts`, allowList: true };
    }
    return undefined;
  }

  #applyUnion(): void {
    const union = this.instances();
    const signature = signatureOf(union);
    if (signature === this.#lastApplied) return;
    this.#lastApplied = signature;
    this.#options.log?.("discovery: instances changed", {
      model: this.model,
      instances: union.map((i) => i.id),
    });
    this.#options.apply(union);
  }

  async #resolveEntry(config: DiscoveryConfig, signal: AbortSignal): Promise<InstanceConfig[]> {
    const hosts: { host: string; port: number }[] = [];
    if (config.recordType === "SRV") {
      const answers = await this.#resolve(config.hostname, "SRV", { signal }) as SrvAnswer[];
      const resolved = await Promise.all(answers.map(async (answer) => {
        const target = answer.target.replace(/\.$/, "");
        const addresses = await this.#addressesOf(target, signal);
        return addresses.map((host) => ({ host, port: answer.port }));
      }));
      hosts.push(...resolved.flat());
    } else {
      const answers = await this.#resolve(config.hostname, config.recordType, { signal });
      for (const address of answers as string[]) hosts.push({ host: address, port: config.port! });
    }
    const byId = new Map<string, InstanceConfig>();
    for (const { host, port } of hosts) {
      const instance: InstanceConfig = {
        id: `${config.name}-${host}:${port}`,
        url: `${config.scheme}://${host.includes(":") ? `[${host}]` : host}:${port}`,
        kvHost: host,
        role: config.role,
        engine: config.engine,
      };
      if (config.bootstrapPort !== undefined) instance.bootstrapPort = config.bootstrapPort;
      byId.set(instance.id, instance);
    }
    return [...byId.values()].sort((a, b) => a.id.localeCompare(b.id));
  }

  /** An SRV target's addresses: itself when it is one, else A, else AAAA, else its name. */
  async #addressesOf(target: string, signal: AbortSignal): Promise<string[]> {
    if (isIpAddress(target)) return [target];
    for (const type of ["A", "AAAA"] as const) {
      try {
        const addresses = await this.#resolve(target, type, { signal }) as string[];
        if (addresses.length > 0) return addresses;
      } catch {
        // try the next family, then fall back to the name
      }
    }
    return [target];
  }

  #withDeadline<T>(run: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const timeoutMs = this.#options.timeoutMs ?? 5_000;
    const controller = new AbortController();
    let timer: unknown;
    const deadline = new Promise<never>((_, reject) => {
      timer = this.#timers.setTimeout(() => {
        const error = new Error(`DNS resolution timed out after ${timeoutMs} ms`);
        controller.abort(error);
        reject(error);
      }, timeoutMs);
    });
    return Promise.race([run(controller.signal), deadline]).finally(() =>
      this.#timers.clearTimeout(timer)
    );
  }
}

function signatureOf(instances: readonly InstanceConfig[]): string {
  return instances.map((i) =>
    `${i.id}\t${i.url}\t${i.kvHost}\t${i.role}\t${i.engine}\t${i.bootstrapPort ?? ""}`
  ).sort()
    .join("\n");
}

function sameEntry(a: DiscoveryConfig, b: DiscoveryConfig): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

function isIpAddress(host: string): boolean {
  return /^\d{1,3}(\.\d{1,3}){3}$/.test(host) || host.includes(":");
}
