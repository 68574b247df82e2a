/**
 * Sends probe inputs to a router, `concurrency` at a time, judging each answer. Returns the
 * problems found (bounded) and a count of answers by status.
 */
import { answerProblem } from "./probe_answer.ts";
import type { ProbeInput } from "./probe_input.ts";

export interface ProbeOutcome {
  sent: number;
  byStatus: Map<number, number>;
  problems: string[];
}

export async function sendProbe(
  url: string,
  inputs: readonly ProbeInput[],
  concurrency: number,
): Promise<ProbeOutcome> {
  const outcome: ProbeOutcome = { sent: 0, byStatus: new Map(), problems: [] };
  let next = 0;
  const worker = async () => {
    while (next < inputs.length) {
      const index = next++;
      const problem = await sendOne(url, inputs[index], outcome);
      if (problem && outcome.problems.length < 20) {
        outcome.problems.push(`#${index} ${inputs[index].family}: ${problem}`);
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return outcome;
}

async function sendOne(
  url: string,
  input: ProbeInput,
  outcome: ProbeOutcome,
): Promise<string | undefined> {
  outcome.sent++;
  try {
    const response = await fetch(`${url}${input.path}`, {
      method: input.method,
      headers: input.headers,
      body: input.body,
    });
    const text = await response.text();
    outcome.byStatus.set(response.status, (outcome.byStatus.get(response.status) ?? 0) + 1);
    const problem = answerProblem(
      response.status,
      response.headers.get("content-type") ?? "",
      text,
    );
    return problem && `${problem}: ${text.slice(0, 200)}`;
  } catch (error) {
    return `transport error ${error}`;
  }
}
