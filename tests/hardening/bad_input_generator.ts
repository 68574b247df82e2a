/**
 * The hardening probe's inputs, deterministic for a seed: every field with every wrong value,
 * broken JSON, the wrong envelope, then random mutations of valid bodies (one to three fields,
 * anywhere in the body, set to wrong values) until `count` inputs.
 */
import { seededRandom } from "../../src/sim/rng.ts";
import { fieldInputs } from "./field_inputs.ts";
import { headerInputs } from "./header_inputs.ts";
import {
  CHAT,
  COMPLETIONS,
  jsonInput,
  type ProbeInput,
  validChat,
  validCompletion,
} from "./probe_input.ts";
import { rawInputs } from "./raw_inputs.ts";
import { WRONG_VALUES } from "./wrong_values.ts";

export function generateBadInputs(seed: number, count: number): ProbeInput[] {
  const random = seededRandom(seed);
  const inputs = [...fieldInputs(), ...rawInputs(), ...headerInputs()];
  while (inputs.length < count) inputs.push(randomMutation(random));
  return shuffled(inputs, random);
}

const MUTABLE_KEYS = [
  "prompt",
  "messages",
  "max_tokens",
  "stream",
  "n",
  "stop",
  "temperature",
  "logit_bias",
  "stream_options",
  "tools",
  "chat_template_kwargs",
  "cache_salt",
  "user",
];

function randomMutation(random: () => number): ProbeInput {
  const chat = random() < 0.5;
  const body = chat ? validChat() : validCompletion();
  if (random() < 0.5) body.stream = true;
  const pick = <T>(list: readonly T[]) => list[Math.floor(random() * list.length)];
  for (let i = 0, n = 1 + Math.floor(random() * 3); i < n; i++) {
    const value = pick(WRONG_VALUES);
    if (chat && random() < 0.3) {
      body.messages = [{ role: "user", content: "hi", [pick(["role", "content", "name"])]: value }];
    } else body[pick(MUTABLE_KEYS)] = value;
  }
  return jsonInput("random_mutation", chat ? CHAT : COMPLETIONS, body);
}

function shuffled<T>(items: T[], random: () => number): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [items[i], items[j]] = [items[j], items[i]];
  }
  return items;
}
