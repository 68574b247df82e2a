/**
 * Texts the fast path must encode exactly like the exact path before it is switched on (checked
 * once at load): many scripts, code, numbers, whitespace of every kind, long runs, and the strings
 * where the two BPE procedures could break ties differently (`FastPathPlan.tieHazards`).
 */
import { byteLevelTokenBytes } from "./byte_level.ts";

const BASE = [
  "Hello, how are you? I'm fine; you're late, they'll see. DON'T SHOUT, it's 'quoted'.",
  "naïve café — déjà vu, e\u0301 vs é, Å vs A\u030a, ﬁ ligature, Ⅻ, ½, ², ①",
  "数学是科学的皇后。日本語のテキスト、カタカナ、ひらがな。한국어 문장입니다.",
  "Русский текст, ελληνικά, עברית, العربية, हिन्दी, ไทย, tiếng Việt",
  "emoji 🚀🔥 mix 👩‍👩‍👧‍👦 🇫🇷 ❤️ 1️⃣ ✔︎",
  "def f(x):\n\treturn x**2  # square\n\n\nclass A:\n    pass\r\n\r\n}}]]))",
  "numbers 1234567890 3.14159 1e-9 -42 0x1F 1,000,000 ٣٤٥ ๑๒๓",
  "   leading spaces\n\n\n   \t\t\n  trailing   \n",
  "\u00a0nbsp\u2009thin\u3000ideographic\u2028line\u2029para\u0085nel\u000bvt\u000cff\u001cfs\u200bzwsp\ufeffbom",
  '<|im_start|> looks special <tool_call> {"name": "x", "arguments": {"a": 1}} </tool_call>',
  "https://example.com/path?q=1&r=%20#frag user@example.com C:\\Windows\\System32",
  "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
  "lone surrogate \ud800 and \udfff end",
];

function runs(): string[] {
  const out: string[] = [];
  for (const c of [" ", "\t", "\n", "=", "-", "*", "#", ".", "_", "/", "0", "a", "、", "!"]) {
    for (const n of [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 64, 65, 130]) {
      out.push(c.repeat(n), `x${c.repeat(n)}y`, ` ${c.repeat(n)}\n`);
    }
  }
  return out;
}

export function fastPathProbeTexts(tieHazards: readonly string[], maxHazards = 2000): string[] {
  const texts = [...BASE, ...runs()];
  const decoder = new TextDecoder("utf-8", { fatal: true });
  for (const hazard of tieHazards.slice(0, maxHazards)) {
    const bytes = byteLevelTokenBytes(hazard);
    if (!bytes) continue;
    let text: string;
    try {
      text = decoder.decode(bytes);
    } catch {
      continue; // a partial UTF-8 sequence cannot be typed as text
    }
    texts.push(text, text + text, ` ${text} `, `a${text}${text.slice(0, 1)}`);
  }
  return texts;
}
