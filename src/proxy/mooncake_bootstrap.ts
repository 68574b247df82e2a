import { engineIdOf } from "./pd_protocol.ts";

/**
 * The engine id behind each vLLM MooncakeConnector bootstrap server (`GET /query`, docs/compat.md
 * §7), asked once per server and remembered; a failed or empty answer is asked again next time.
 */
export class BootstrapEngineIds {
  readonly #known = new Map<string, Promise<string | undefined>>();
  readonly #fetch: typeof fetch;
  readonly #timeoutMs: number;

  constructor(options: { fetch: typeof fetch; timeoutMs: number }) {
    this.#fetch = options.fetch;
    this.#timeoutMs = options.timeoutMs;
  }

  /** The engine id of data-parallel rank 0 at `http://host:port/query`, or undefined. */
  engineId(host: string, port: number): Promise<string | undefined> {
    const url = `http://${
      host.includes(":") && !host.startsWith("[") ? `[${host}]` : host
    }:${port}`;
    let known = this.#known.get(url);
    if (!known) {
      known = this.#ask(url);
      this.#known.set(url, known);
      known.then((id) => id === undefined && this.#known.delete(url));
    }
    return known;
  }

  async #ask(url: string): Promise<string | undefined> {
    try {
      const response = await this.#fetch(`${url}/query`, {
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
      if (!response.ok) {
        await response.body?.cancel();
        return undefined;
      }
      return engineIdOf(await response.json());
    } catch {
      return undefined;
    }
  }
}
