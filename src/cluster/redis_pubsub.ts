/**
 * The shared-state channel over Redis pub/sub (node-redis): one connection publishes, one
 * subscribes (Redis requires a dedicated one). Commands never queue while offline, so a replica
 * cut from Redis fails fast and keeps its own view; the client reconnects with backoff and
 * resubscribes by itself.
 */
import { createClient } from "redis";
import type { PubSub } from "./shared_state.ts";

export function createRedisPubSub(url: string, channel: string): PubSub {
  const options = {
    url,
    disableOfflineQueue: true,
    socket: { reconnectStrategy: (retries: number) => Math.min(50 * 2 ** retries, 2_000) },
  };
  const publisher = createClient(options);
  const subscriber = createClient(options);
  const reconnectListeners: (() => void)[] = [];
  let bothEverReady = false;
  // Errors are reported through failed publishes; these handlers only keep them from throwing.
  publisher.on("error", () => {});
  subscriber.on("error", () => {});
  // Back online means both connections ready again, the subscriber resubscribed (node-redis
  // resubscribes before "ready"): what is asked for now, this replica hears the answer of.
  const ready = () => {
    if (!publisher.isReady || !subscriber.isReady) return;
    if (bothEverReady) { for (const listener of reconnectListeners) listener(); }
    bothEverReady = true;
  };
  publisher.on("ready", ready);
  subscriber.on("ready", ready);
  const connecting = Promise.allSettled([publisher.connect(), subscriber.connect()]);
  return {
    async publish(message) {
      if (!publisher.isReady) throw new Error("Redis is not connected");
      await publisher.publish(channel, message);
    },
    async subscribe(onMessage) {
      await connecting;
      await subscriber.subscribe(channel, (message) => onMessage(message));
    },
    onReconnect(listener) {
      reconnectListeners.push(listener);
    },
    async close() {
      // A client still connecting (Redis down) is dropped at once; an open one closes cleanly.
      for (const client of [publisher, subscriber]) if (!client.isOpen) client.destroy();
      await Promise.allSettled([
        ...[publisher, subscriber].filter((c) => c.isOpen).map((c) => c.close()),
        connecting,
      ]);
    },
  };
}
