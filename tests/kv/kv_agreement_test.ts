import { assertEquals } from "../assert.ts";
import {
  type AgreementSample,
  AgreementWindow,
  judgeSample,
  type KvAgreementState,
} from "../../src/kv/kv_agreement.ts";

const OPTIONS = { toleranceTokens: 16 };

const sample = (local: number, reused: number, pool = local): AgreementSample => ({
  predictedLocalTokens: local,
  predictedPoolTokens: pool,
  reusedTokens: reused,
});

/** The states after each sample, one ms apart. */
function run(window: AgreementWindow, samples: AgreementSample[], from = 0): KvAgreementState[] {
  return samples.map((s, i) => window.observe(s, from + i));
}

Deno.test("judgeSample(): within the tolerance agrees; both missing is no evidence", () => {
  assertEquals(judgeSample(sample(192, 192), OPTIONS), "agree");
  assertEquals(judgeSample(sample(192, 180), OPTIONS), "agree", "the engine's block rounding");
  assertEquals(judgeSample(sample(0, 0), OPTIONS), "cold");
  assertEquals(judgeSample(sample(0, 16), OPTIONS), "cold", "a block the router cannot see");
  assertEquals(judgeSample(sample(0, 0, 192), OPTIONS), "agree", "a pool hit, a local miss");
});

Deno.test("judgeSample(): hits the engine did not reuse overpredict; long unseen reuse is blind", () => {
  assertEquals(judgeSample(sample(192, 0), OPTIONS), "over");
  assertEquals(judgeSample(sample(0, 192), OPTIONS), "blind");
  assertEquals(judgeSample(sample(0, 24), OPTIONS), "agree", "shorter than two chunks: no alarm");
  assertEquals(
    judgeSample(sample(0, 192, 192), OPTIONS),
    "agree",
    "the router knew the pool had it",
  );
});

Deno.test("a window is unknown until enough informative samples, then follows the majority", () => {
  const window = new AgreementWindow(OPTIONS);
  assertEquals(run(window, Array(50).fill(sample(0, 0))).at(-1), "unknown", "cold only");
  assertEquals(run(window, Array(4).fill(sample(0, 160)), 100), Array(4).fill("unknown"));
  assertEquals(window.observe(sample(0, 160), 104), "blind");
  assertEquals(window.snapshot(), { state: "blind", samples: 5, agree: 0, over: 0, blind: 5 });
});

Deno.test("blind is left once its share falls under the leave share, and agree follows", () => {
  const window = new AgreementWindow({ ...OPTIONS, windowSize: 20 });
  run(window, Array(20).fill(sample(0, 160)));
  const states = run(window, Array(20).fill(sample(160, 160)), 100);
  // Blind holds while at least a quarter of the window (5 of 20) is still blind.
  assertEquals(states.indexOf("agree"), 15);
  assertEquals(states.slice(0, 15), Array(15).fill("blind"));
});

Deno.test("overpredicts when most informative samples were predicted hits the engine missed", () => {
  const window = new AgreementWindow(OPTIONS);
  const states = run(window, [
    sample(160, 160),
    sample(160, 0),
    sample(160, 0),
    sample(160, 0),
    sample(160, 0),
  ]);
  assertEquals(states.at(-1), "overpredicts");
});

Deno.test("old samples are forgotten: with no recent evidence the state is unknown again", () => {
  const window = new AgreementWindow({ ...OPTIONS, maxAgeMs: 1_000 });
  run(window, Array(6).fill(sample(0, 160)));
  assertEquals(window.state, "blind");
  assertEquals(window.refresh(2_000), "unknown");
});
