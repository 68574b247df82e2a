/**
 * What the probe accepts as an answer: an error in OpenAI's shape (4xx), or a valid answer when the
 * input was in fact valid (a JSON completion with choices, or an SSE stream ending in `[DONE]`).
 * A 5xx, a non-JSON error or a stream without its end is a problem.
 */
export function answerProblem(
  status: number,
  contentType: string,
  text: string,
): string | undefined {
  if (status >= 500) return `status ${status}`;
  if (status >= 200 && status < 300) return validAnswerProblem(contentType, text);
  if (status < 400) return `status ${status}`;
  return errorShapeProblem(text);
}

function validAnswerProblem(contentType: string, text: string): string | undefined {
  if (contentType.startsWith("text/event-stream")) {
    return text.includes("data: [DONE]") ? undefined : "a stream without data: [DONE]";
  }
  try {
    const body = JSON.parse(text);
    return Array.isArray(body.choices) ? undefined : "a 2xx JSON body without choices";
  } catch {
    return "a 2xx body that is not JSON";
  }
}

function errorShapeProblem(text: string): string | undefined {
  let body: { error?: Record<string, unknown> };
  try {
    body = JSON.parse(text);
  } catch {
    return "an error body that is not JSON";
  }
  const error = body.error;
  if (typeof error !== "object" || error === null) return "no error object";
  if (typeof error.message !== "string" || error.message === "") return "no error.message";
  if (typeof error.type !== "string") return "no error.type";
  if (!("param" in error) || !("code" in error)) return "error.param or error.code missing";
  return undefined;
}
