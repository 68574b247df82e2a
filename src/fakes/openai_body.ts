/** An OpenAI request body as a fake engine receives it (validated only as far as the fake needs). */
export type OpenAiBody = Record<string, unknown>;
