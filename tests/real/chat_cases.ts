/**
 * Varied chats and completions for the real-engine parity checks: system prompts, long and many
 * turns, tools and tool calls and results, `enable_thinking` and other template kwargs, non-ASCII,
 * empty content, content parts, and completions as text and token ids.
 */
export interface ChatCase {
  name: string;
  messages: Record<string, unknown>[];
  tools?: unknown[];
  chat_template_kwargs?: Record<string, unknown>;
}

const WEATHER_TOOL = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Current weather for a city.",
    parameters: {
      type: "object",
      properties: { city: { type: "string" }, unit: { type: "string", enum: ["C", "F"] } },
      required: ["city"],
    },
  },
};
const SEARCH_TOOL = {
  type: "function",
  function: {
    name: "search",
    description: "Searches the docs.",
    parameters: { type: "object", properties: { q: { type: "string" } } },
  },
};

const TEXTS = [
  "Hello!",
  "What is the capital of France?",
  "Ünïcödé, 日本語のテキスト, emoji 🚀🎉, العربية, Ελληνικά.",
  "Code:\n```python\ndef f(x):\n    return x * 2\n```\nExplain it.",
  "  leading and trailing spaces  ",
  "Numbers 1234567890 and 3.14159 and -42.",
  "A\n\nB\n\n\nC",
  "<think>not really thinking</think> tags in user text",
  "Tabs\tand\ttabs",
  "a".repeat(600),
];

function turns(n: number, seed: number): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (let i = 0; i < n; i++) {
    out.push({ role: "user", content: `${TEXTS[(seed + i) % TEXTS.length]} (turn ${i})` });
    out.push({
      role: "assistant",
      content: `Answer ${i}: ${TEXTS[(seed + i + 3) % TEXTS.length]}`,
    });
  }
  out.push({ role: "user", content: `Last question ${seed}?` });
  return out;
}

export function chatCases(): ChatCase[] {
  const cases: ChatCase[] = [];
  TEXTS.forEach((text, i) =>
    cases.push({ name: `user text ${i}`, messages: [{ role: "user", content: text }] })
  );
  TEXTS.forEach((text, i) =>
    cases.push({
      name: `system + user ${i}`,
      messages: [{ role: "system", content: `You are assistant #${i}. ${TEXTS[(i + 5) % 10]}` }, {
        role: "user",
        content: text,
      }],
    })
  );
  for (const n of [1, 2, 4, 8]) cases.push({ name: `${n} turns`, messages: turns(n, n) });
  for (const enable of [true, false]) {
    cases.push({
      name: `enable_thinking ${enable}`,
      messages: turns(2, 7),
      chat_template_kwargs: { enable_thinking: enable },
    });
  }
  cases.push({
    name: "unknown kwarg",
    messages: turns(1, 2),
    chat_template_kwargs: { foo: "bar" },
  });
  cases.push({
    name: "tools",
    messages: [{ role: "user", content: "Weather in Paris?" }],
    tools: [WEATHER_TOOL],
  });
  cases.push({
    name: "two tools + system",
    messages: [{ role: "system", content: "Use tools." }, {
      role: "user",
      content: "Find docs on KV.",
    }],
    tools: [WEATHER_TOOL, SEARCH_TOOL],
  });
  cases.push({
    name: "tool call and result",
    messages: [
      { role: "user", content: "Weather in Paris?" },
      {
        role: "assistant",
        content: "",
        tool_calls: [{
          id: "call_1",
          type: "function",
          function: { name: "get_weather", arguments: '{"city": "Paris", "unit": "C"}' },
        }],
      },
      { role: "tool", tool_call_id: "call_1", content: '{"temp": 21}' },
    ],
    tools: [WEATHER_TOOL],
  });
  cases.push({
    name: "two tool results in a row",
    messages: [
      { role: "user", content: "Weather in Paris and Rome?" },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          {
            id: "a",
            type: "function",
            function: { name: "get_weather", arguments: '{"city":"Paris"}' },
          },
          {
            id: "b",
            type: "function",
            function: { name: "get_weather", arguments: '{"city":"Rome"}' },
          },
        ],
      },
      { role: "tool", tool_call_id: "a", content: "21" },
      { role: "tool", tool_call_id: "b", content: "25" },
    ],
    tools: [WEATHER_TOOL],
  });
  cases.push({ name: "empty user content", messages: [{ role: "user", content: "" }] });
  cases.push({
    name: "empty system content",
    messages: [{ role: "system", content: "" }, { role: "user", content: "hi" }],
  });
  cases.push({
    name: "content parts",
    messages: [{
      role: "user",
      content: [{ type: "text", text: "part one" }, { type: "text", text: "part two" }],
    }],
  });
  cases.push({
    name: "assistant with reasoning before the last turn",
    messages: [
      { role: "user", content: "2+2?" },
      { role: "assistant", content: "<think>\nadd\n</think>\n\n4" },
      { role: "user", content: "3+3?" },
    ],
  });
  cases.push({
    name: "long document",
    messages: [{ role: "user", content: TEXTS.join(" ").repeat(20) }],
  });
  return cases;
}

/** Completion prompts as text. */
export function textPrompts(): string[] {
  return [
    ...TEXTS,
    TEXTS.join("\n"),
    " ",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
  ];
}
