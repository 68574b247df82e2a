import { describeScheme, kvBlockText } from "../src/hashing/detect_report.ts";
import type { ModelRuntime } from "../src/runtime/model_runtime.ts";
import { detectForRuntime } from "../src/diagnostics/runtime_detect.ts";

/**
 * `keys --detect`: which key schemes the store holds for this prompt, best first, and the `kv`
 * block of the best. Exit 0 when one matched, 3 when the store could not be asked, 4 when none
 * of the candidates' keys exist (the engines have not served this prompt, or a scheme outside
 * the candidates).
 */
export async function runDetect(
  runtime: ModelRuntime,
  tokens: number[],
  json: boolean,
  out: (line: string) => void,
): Promise<number> {
  const started = performance.now();
  const result = await detectForRuntime(runtime, [tokens]);
  const elapsedMs = Math.round(performance.now() - started);
  if (!result.asked) {
    console.error(`keys: the store could not be asked (${result.error}); nothing was detected`);
    return 3;
  }
  if (json) {
    out(JSON.stringify(result.schemes, null, 2));
    return result.schemes.length > 0 ? 0 : 4;
  }
  out(
    `detect: ${tokens.length} tokens, ${result.candidates} candidate schemes, ` +
      `${result.probedKeys} first keys asked, ${result.survivors} present, ` +
      `${result.confirmedKeys} keys confirmed, ${elapsedMs} ms`,
  );
  if (result.schemes.length === 0) {
    out("no candidate scheme has keys in the store for this prompt: send it through the engines");
    out("first (or use a prompt they served), then run --detect again");
    return 4;
  }
  result.schemes.forEach((scheme, i) => {
    out(`#${i + 1} ${scheme.presentChunks} chunk(s) present from key 0: ${describeScheme(scheme)}`);
  });
  out("paste into the model's config:");
  const store = { url: runtime.config.kv.url, modelName: runtime.config.name };
  for (const line of kvBlockText(result.schemes[0], store).split("\n")) out(line);
  return 0;
}
