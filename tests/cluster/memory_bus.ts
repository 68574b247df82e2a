/**
 * An in-memory pub/sub channel several replicas share, standing in for Redis: `state.down` makes
 * every publish fail (the message is lost), `sent` keeps what went out, and each end can be told
 * that its connection came back.
 */
import type { PubSub } from "../../src/cluster/shared_state.ts";

export interface MemoryPubSub extends PubSub {
  /** Tells this end's listeners that its connection is back. */
  reconnect(): void;
}

export function memoryBus() {
  const subscribers: ((message: string) => void)[] = [];
  const allReconnects: (() => void)[] = [];
  const state = { down: false, sent: [] as string[] };
  const pubsub = (): MemoryPubSub => {
    const reconnects: (() => void)[] = [];
    return {
      publish(message) {
        if (state.down) return Promise.reject(new Error("connection refused"));
        state.sent.push(message);
        for (const subscriber of subscribers) queueMicrotask(() => subscriber(message));
        return Promise.resolve();
      },
      subscribe(onMessage) {
        subscribers.push(onMessage);
        return Promise.resolve();
      },
      onReconnect(listener) {
        reconnects.push(listener);
        allReconnects.push(listener);
      },
      reconnect: () => reconnects.forEach((listener) => listener()),
      close: () => Promise.resolve(),
    };
  };
  return { pubsub, state, reconnect: () => allReconnects.forEach((listener) => listener()) };
}
