/** A chat message as OpenAI clients send it (content may be a string or content parts). */
export interface ChatMessage {
  role: string;
  content?: unknown;
  name?: string;
  tool_calls?: unknown[];
  tool_call_id?: string;
  [key: string]: unknown;
}

export interface ChatEncodeOptions {
  tools?: unknown[];
  /** Retrieved documents for RAG templates (vLLM's `documents` request field). */
  documents?: unknown[];
  chatTemplateKwargs?: Record<string, unknown>;
  /** Default true: render the assistant turn's opening, as vLLM and SGLang do. */
  addGenerationPrompt?: boolean;
}

export interface EncodeOptions {
  addSpecialTokens?: boolean;
}

/** Turns prompts into the token ids the engine will prefill (docs/compat.md §1). */
export interface PromptTokenizer {
  encode(text: string, options?: EncodeOptions): number[];
  encodeChat(messages: ChatMessage[], options?: ChatEncodeOptions): number[];
}

/** The async form the request path uses: `engine` mode asks the backend over HTTP. */
export interface AsyncPromptTokenizer {
  readonly mode: "local" | "engine" | "none";
  encode(text: string, options?: EncodeOptions): Promise<number[]>;
  encodeChat(messages: ChatMessage[], options?: ChatEncodeOptions): Promise<number[]>;
}
