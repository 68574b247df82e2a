import type { DiscoveryConfig } from "../config/schema.ts";
import { AdapterPoller } from "../cluster/adapter_poller.ts";
import { DnsDiscovery, type ResolveDns } from "../cluster/dns_discovery.ts";
import { systemTimers, type Timers } from "../cluster/timers.ts";
import { EngineEventFeed, type KvEventSockets } from "./engine_event_feed.ts";
import { zmtpSockets } from "./kv_event_sockets.ts";
import { MasterEventFeed } from "./master_event_feed.ts";
import { masterUrls } from "../config/kv_masters.ts";
import type { ModelRuntime } from "./model_runtime.ts";

export interface BackgroundWorkOptions {
  /** false: nothing runs by itself (tests drive probes and polls by hand). */
  enabled: boolean;
  resolveDns?: ResolveDns;
  now: () => number;
  timers?: Timers;
  log: (message: string, fields?: Record<string, unknown>) => void;
  /** Whether a discovered instance's host may be used now (default: any). */
  allowsHost?: (host: string) => boolean;
  /** The sockets of the engines' KV event feeds (made on first need; tests pass fakes). */
  kvEventSockets?: () => KvEventSockets;
  /** Reads the master's keys for the pool mirror's snapshots (default: global fetch). */
  fetch?: typeof fetch;
}

/**
 * What runs beside the request path for each model runtime: health probes and load polls (the
 * runtime's cluster), DNS discovery of its instance groups and the feeds of its engines' KV
 * events. Started with a runtime, stopped when a reload retires it, discovery restarted when
 * only its entries change.
 */
export class BackgroundWork {
  readonly #options: BackgroundWorkOptions;
  readonly #discoveries = new Map<ModelRuntime, DnsDiscovery>();
  readonly #feeds = new Map<ModelRuntime, { stop(): Promise<void> }[]>();
  #sockets: KvEventSockets | undefined;
  /** Discoveries replaced by setDiscovery() that may still be ending a round. */
  readonly #retiring = new Set<Promise<void>>();

  constructor(options: BackgroundWorkOptions) {
    this.#options = options;
  }

  /** Starts a runtime's work; `previous` (the runtime it replaces) hands over DNS answers. */
  start(runtime: ModelRuntime, previous?: ModelRuntime): void {
    if (this.#options.enabled) runtime.cluster.start();
    this.setDiscovery(runtime, runtime.config.discovery, previous);
    if (this.#options.enabled) this.#startFeeds(runtime);
    if (this.#options.enabled) this.#startAdapterPoller(runtime);
  }

  /** A model with LoRA adapters learns from each instance's `/v1/models` which it holds. */
  #startAdapterPoller(runtime: ModelRuntime): void {
    const config = runtime.config;
    if (config.loras.length === 0 && !config.loraLoading) return;
    const poller = new AdapterPoller({
      catalog: runtime.adapters,
      instances: () =>
        runtime.cluster.entries().map((e) => ({ id: e.config.id, url: e.config.url })),
      fetch: this.#options.fetch ?? fetch,
      timers: this.#options.timers ?? systemTimers(),
      now: this.#options.now,
      intervalMs: config.health.intervalMs,
      timeoutMs: config.health.timeoutMs,
      log: this.#options.log,
    });
    poller.start();
    this.#feeds.set(runtime, [...(this.#feeds.get(runtime) ?? []), poller]);
  }

  async stop(runtime: ModelRuntime): Promise<void> {
    const discovery = this.#discoveries.get(runtime);
    this.#discoveries.delete(runtime);
    const feeds = this.#feeds.get(runtime) ?? [];
    this.#feeds.delete(runtime);
    await Promise.all([
      runtime.cluster.stop(),
      discovery?.stop(),
      ...feeds.map((f) => f.stop()),
      ...this.#retiring,
    ]);
  }

  /** The KV event feed of each configured instance with `kvEvents`, and the master's. */
  #startFeeds(runtime: ModelRuntime): void {
    const feeds: { stop(): Promise<void> }[] = [];
    const master = this.#masterFeed(runtime);
    if (master) feeds.push(master);
    for (const instance of runtime.config.instances) {
      const index = runtime.engineCaches.get(instance.id);
      if (!instance.kvEvents || !index) continue;
      this.#sockets ??= this.#options.kvEventSockets?.() ?? zmtpSockets();
      const feed = new EngineEventFeed({
        instanceId: instance.id,
        endpoint: instance.kvEvents.endpoint,
        replayEndpoint: instance.kvEvents.replayEndpoint,
        topic: instance.kvEvents.topic,
        index,
        sockets: this.#sockets,
        timers: this.#options.timers ?? systemTimers(),
        now: this.#options.now,
        log: this.#options.log,
      });
      feed.start();
      feeds.push(feed);
    }
    if (feeds.length > 0) this.#feeds.set(runtime, feeds);
  }

  /** The master's KV event feed (`kv.masterEvents`), its snapshots read from `/get_all_keys`. */
  #masterFeed(runtime: ModelRuntime): MasterEventFeed | undefined {
    const events = runtime.config.kv.masterEvents;
    const url = masterUrls(runtime.config.kv)[0];
    if (!events || !runtime.poolMirror || url === undefined) return undefined;
    const fetcher = this.#options.fetch ?? fetch;
    this.#sockets ??= this.#options.kvEventSockets?.() ?? zmtpSockets();
    const feed = new MasterEventFeed({
      endpoint: events.endpoint,
      topic: events.topic,
      mirror: runtime.poolMirror,
      sockets: this.#sockets,
      snapshot: async () => {
        const response = await fetcher(`${url}/get_all_keys`, {
          signal: AbortSignal.timeout(30_000),
        });
        if (!response.ok) return null;
        return (await response.text()).split("\n").map((l) => l.trim()).filter((l) => l !== "");
      },
      timers: this.#options.timers ?? systemTimers(),
      now: this.#options.now,
      resyncIntervalMs: events.resyncIntervalMs,
      log: this.#options.log,
    });
    feed.start();
    return feed;
  }

  /**
   * Makes the runtime's DNS discovery follow `entries`: unchanged entries keep their answers,
   * instances of entries that are gone are drained and removed.
   */
  setDiscovery(
    runtime: ModelRuntime,
    entries: readonly DiscoveryConfig[],
    previous: ModelRuntime = runtime,
  ): void {
    const old = this.#discoveries.get(previous);
    if (old && previous === runtime && JSON.stringify(old.entries) === JSON.stringify(entries)) {
      return;
    }
    if (old && previous === runtime) {
      this.#discoveries.delete(runtime);
      const stopping = old.stop();
      this.#retiring.add(stopping);
      stopping.finally(() => this.#retiring.delete(stopping));
    }
    if (entries.length === 0) {
      if (old && previous === runtime) runtime.cluster.reconcileMembers([], "discovery");
      return;
    }
    const discovery = new DnsDiscovery({
      model: runtime.config.name,
      entries,
      apply: (instances) =>
        runtime.cluster.reconcileMembers(instances, "discovery", { initialState: "starting" }),
      resolveDns: this.#options.resolveDns,
      now: this.#options.now,
      timers: this.#options.timers,
      log: this.#options.log,
      allowsHost: this.#options.allowsHost,
      onRefused: () => runtime.discoveryRefused++,
    });
    if (old) discovery.adopt(old, previous === runtime);
    this.#discoveries.set(runtime, discovery);
    if (this.#options.enabled) discovery.start();
  }
}
