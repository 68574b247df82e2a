/**
 * A varied synthetic corpus for comparing the fast path with the exact path: English, code, CJK,
 * emoji, many scripts, whitespace runs of every kind, numbers, special tokens typed in text, long
 * repeated characters, random code points (lone surrogates included).
 */
import { mulberry32 } from "../../src/sim/rng.ts";

const WORDS =
  ("the of and to in is you that it he was for on are as with his they at be this have " +
    "from or one had by word but not what all were we when your can said there use an each which she " +
    "do how their if will up other about out many then them these so some her would make like him into " +
    "time has look two more write go see number no way could people my than first water been call who " +
    "I'm you're they'll we've she'd it's don't CAN'T Hello WORLD naïve café résumé Zürich").split(
      " ",
    );

const SNIPPETS = [
  "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
  "for (let i = 0; i < n; i++) {\n\tsum += a[i] * b[i]; // dot\n}\n",
  "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;\n",
  '{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}',
  '<div class="x">&nbsp;&lt;tag&gt;</div>\r\n',
  "    \n\n\t\t  \n   ",
  "数学是科学的皇后。机器学习模型需要大量的数据进行训练，然后才能做出准确的预测。",
  "日本語の文章です。カタカナとひらがなを混ぜて書きます。東京は日本の首都です。",
  "한국어 문장도 포함합니다. 서울은 대한민국의 수도입니다.",
  "Привет, мир! Ελληνικά γράμματα. שלום עולם. مرحبا بالعالم. नमस्ते दुनिया. สวัสดีชาวโลก",
  "emoji 🚀🔥💯 family 👩‍👩‍👧‍👦 flags 🇫🇷🇯🇵 keycap 1️⃣ skin 👍🏽 ❤️‍🔥",
  "pi = 3.14159265358979, e = 2.718281828, 1e-9, -42, 0x1F, 1,234,567.89, ٣٤٥, ๑๒๓, ⅫⅣ",
  "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
  "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>",
  '<tool_call>\n{"name": "f"}\n</tool_call><|endoftext|><|fim_prefix|>x<|fim_suffix|>',
  "e\u0301 A\u030a \u1e9b\u0323 ﬁ ½ ² \u00a0 \u2009 \u3000 \u2028 \u2029 \u0085 \u000b \u000c \u200b \ufeff",
  "https://example.com/a/b?c=1&d=%20#frag mail@example.org C:\\path\\to\\file.txt",
  "=====================================================================",
  "--------------------------------------------------------------------------------",
  "****\t****\t****\n####  ####\n....  ....\n____  ____",
];

function randomCodePoint(rnd: () => number): string {
  const r = rnd();
  if (r < 0.5) return String.fromCharCode(0x20 + Math.floor(rnd() * 95));
  if (r < 0.8) return String.fromCharCode(0xa0 + Math.floor(rnd() * (0xd7ff - 0xa0)));
  if (r < 0.97) return String.fromCodePoint(0x10000 + Math.floor(rnd() * 0x2ffff));
  return String.fromCharCode(0xd800 + Math.floor(rnd() * 0x800)); // lone surrogate
}

export function variedCorpus(seed = 7, count = 1200): string[] {
  const rnd = mulberry32(seed);
  const pick = <T>(items: T[]) => items[Math.floor(rnd() * items.length)];
  const texts: string[] = [...SNIPPETS];
  for (let i = 0; i < count; i++) {
    const kind = rnd();
    let text = "";
    if (kind < 0.35) {
      const n = 5 + Math.floor(rnd() * 80);
      for (let w = 0; w < n; w++) {
        text += pick(WORDS) + (rnd() < 0.1 ? pick([".", ",", "!", "?", ";", ":"]) : "") +
          pick([" ", " ", " ", "  ", "\n", "\t"]);
      }
    } else if (kind < 0.6) {
      for (let k = 0; k < 1 + Math.floor(rnd() * 4); k++) text += pick(SNIPPETS);
    } else if (kind < 0.75) {
      const n = 1 + Math.floor(rnd() * 60);
      for (let c = 0; c < n; c++) text += randomCodePoint(rnd);
    } else if (kind < 0.9) {
      const ch = pick([" ", "\t", "\n", "\r\n", "a", "=", "-", "0", "!", "、", "🙂", "é"]);
      text = pick(WORDS) + ch.repeat(1 + Math.floor(rnd() * 300)) + pick(WORDS);
    } else {
      for (let d = 0; d < 1 + Math.floor(rnd() * 30); d++) {
        text += String(Math.floor(rnd() * 10 ** (1 + Math.floor(rnd() * 12)))) +
          pick([" ", ".", ",", "", "\n"]);
      }
    }
    texts.push(text);
  }
  // Very long runs: beyond the fast path's long-run limit, handled by the exact path.
  texts.push(
    "A".repeat(3000),
    " ".repeat(2000) + "x",
    "x" + "\n".repeat(1500),
    "=".repeat(5000),
    "ab".repeat(2000),
  );
  return texts;
}
