import { assertEquals } from "../assert.ts";
import { FormFieldScanner, multipartBoundary } from "../../src/openai/multipart_field.ts";

const encoder = new TextEncoder();

function body(fields: [string, string, string?][], boundary = "b0undary"): Uint8Array {
  const text =
    fields.map(([name, value, filename]) =>
      `--${boundary}\r\nContent-Disposition: form-data; name="${name}"` +
      (filename ? `; filename="${filename}"\r\nContent-Type: audio/wav` : "") +
      `\r\n\r\n${value}\r\n`
    ).join("") + `--${boundary}--\r\n`;
  return encoder.encode(text);
}

/** Scans `bytes` cut into pieces of `size` bytes. */
function scan(bytes: Uint8Array, size: number, name = "model") {
  const scanner = new FormFieldScanner("b0undary", name);
  for (let at = 0; at < bytes.length && scanner.result.kind === "more"; at += size) {
    scanner.push(bytes.subarray(at, at + size));
  }
  return scanner.end();
}

Deno.test("multipartBoundary() reads a form's boundary, quoted or not", () => {
  assertEquals(multipartBoundary("multipart/form-data; boundary=abc"), "abc");
  assertEquals(multipartBoundary('Multipart/Form-Data; charset=x; boundary="a b"'), "a b");
  assertEquals(multipartBoundary("application/json"), undefined);
  assertEquals(multipartBoundary("multipart/form-data"), undefined);
  assertEquals(multipartBoundary(null), undefined);
});

Deno.test("FormFieldScanner finds a field before or after a file, however the body is cut", () => {
  const file = "RIFF" + "x".repeat(5000) + "--b0und"; // looks like a delimiter's start, is not
  const cases = [
    body([["model", "whisper-ü"], ["file", file, "a.wav"]]),
    body([["file", file, "a.wav"], ["language", "en"], ["model", "whisper-ü"]]),
  ];
  for (const bytes of cases) {
    for (const size of [1, 7, 64, 4096, bytes.length]) {
      assertEquals(scan(bytes, size), { kind: "found", value: "whisper-ü" }, `cut every ${size}`);
    }
  }
  assertEquals(scan(body([["file", file, "model"]]), 13), { kind: "absent" }, "a file is no field");
  assertEquals(scan(body([["language", "en"]]), 5), { kind: "absent" });
  assertEquals(scan(body([["modelx", "m"]]), 5), { kind: "absent" });
});
