/**
 * Finds one text field of a multipart/form-data body (RFC 7578) while the body streams in, so that
 * an audio upload's `model` can be read without holding the whole file: chunks are pushed as they
 * arrive, and only the part of the text not yet scanned is kept. Bytes are read as latin1 (one
 * character per byte); the field's value is decoded as UTF-8. Pure.
 */

/** The boundary of a `multipart/form-data` content type, or undefined when it is not one. */
export function multipartBoundary(contentType: string | null): string | undefined {
  if (!contentType || !/^\s*multipart\/form-data\s*;/i.test(contentType)) return undefined;
  const match = /;\s*boundary=(?:"([^"]{1,70})"|([^\s;"]{1,70}))/i.exec(contentType);
  return match ? (match[1] ?? match[2]) : undefined;
}

/** found: the field's value; absent: the body ended (or its last part began) without it. */
export type FieldScan = { kind: "found"; value: string } | { kind: "absent" } | {
  kind: "more";
};

export class FormFieldScanner {
  readonly #delimiter: string;
  readonly #name: string;
  readonly #latin1 = new TextDecoder("latin1");
  /** Text not yet scanned past: from the start of the part being read. */
  #text = "";
  #result: FieldScan = { kind: "more" };

  constructor(boundary: string, name: string) {
    this.#delimiter = `--${boundary}`;
    this.#name = name;
  }

  get result(): FieldScan {
    return this.#result;
  }

  push(chunk: Uint8Array): FieldScan {
    if (this.#result.kind !== "more") return this.#result;
    this.#text += this.#latin1.decode(chunk, { stream: true });
    this.#result = this.#scan();
    return this.#result;
  }

  /** The body ended: a field not found by now is absent. */
  end(): FieldScan {
    if (this.#result.kind === "more") this.#result = { kind: "absent" };
    return this.#result;
  }

  #scan(): FieldScan {
    for (;;) {
      const start = this.#text.indexOf(this.#delimiter);
      if (start < 0) {
        // Keep what could be the start of a delimiter cut by the chunk's end.
        this.#text = this.#text.slice(-(this.#delimiter.length + 2));
        return { kind: "more" };
      }
      const after = start + this.#delimiter.length;
      if (this.#text.length < after + 2) return { kind: "more" };
      if (this.#text.startsWith("--", after)) return { kind: "absent" }; // the closing delimiter
      const headersEnd = this.#text.indexOf("\r\n\r\n", after);
      if (headersEnd < 0) {
        if (this.#text.length - after > MAX_PART_HEADERS) return { kind: "absent" };
        this.#text = this.#text.slice(start);
        return { kind: "more" };
      }
      const headers = this.#text.slice(after, headersEnd);
      const next = this.#text.indexOf(`\r\n${this.#delimiter}`, headersEnd + 4);
      if (this.#isField(headers)) {
        if (next < 0) {
          if (this.#text.length - headersEnd > MAX_FIELD_BYTES) return { kind: "absent" };
          this.#text = this.#text.slice(start);
          return { kind: "more" };
        }
        const raw = this.#text.slice(headersEnd + 4, next);
        const bytes = Uint8Array.from(raw, (c) => c.charCodeAt(0));
        return { kind: "found", value: new TextDecoder().decode(bytes) };
      }
      // Another part (the file): skip to its end, or keep only the tail for the next delimiter.
      if (next < 0) {
        this.#text = this.#text.slice(-(this.#delimiter.length + 2));
        return { kind: "more" };
      }
      this.#text = this.#text.slice(next + 2);
    }
  }

  #isField(headers: string): boolean {
    const disposition = /(?:^|\r\n)content-disposition:\s*form-data\s*;([^\r\n]*)/i.exec(headers);
    if (!disposition || /\bfilename\*?=/i.test(disposition[1])) return false;
    const name = /\bname="([^"]*)"|\bname=([^\s;]+)/i.exec(disposition[1]);
    return (name?.[1] ?? name?.[2]) === this.#name;
  }
}

/** A part's headers longer than this are not a form field the router reads. */
const MAX_PART_HEADERS = 8 * 1024;
/** Nor a field value longer than this (a model name is short). */
const MAX_FIELD_BYTES = 4 * 1024;
