/**
 * Valid bodies with the wrong envelope: content types, odd headers, other methods and paths.
 */
import {
  CHAT,
  COMPLETIONS,
  jsonInput,
  type ProbeInput,
  validChat,
  validCompletion,
} from "./probe_input.ts";

const CONTENT_TYPES = [
  "",
  "text/plain",
  "application/x-www-form-urlencoded",
  "multipart/form-data; boundary=xyz",
  "application/json; charset=utf-16",
  "application/json; charset=latin1",
  "application/JSON",
  "application/json;;;",
  "application/xml",
  "*/*",
  "application/octet-stream",
  "application/json, text/plain",
];

const ODD_HEADERS: Record<string, string>[] = [
  { authorization: "Bearer" },
  { authorization: "Basic !!!" },
  { authorization: `Bearer ${"t".repeat(4_000)}` },
  { "x-tidegate-instance": "e1" },
  { "x-tidegate-admin": "1", "x-tidegate-arm": "b" },
  { "x-request-id": "r".repeat(2_000) },
  { "x-request-id": "\u00ff\u00fe" },
  { traceparent: "00-zz-zz-zz" },
  { traceparent: "ff-00000000000000000000000000000000-0000000000000000-01" },
  { tracestate: "=,=,=" },
  { accept: "text/event-stream" },
  { accept: "application/xml" },
  { "accept-encoding": "br, gzip, zstd" },
  { "content-encoding": "gzip" },
  { "content-encoding": "identity, identity" },
  { "x-forwarded-for": "not an address, ::1, 999.1.1.1" },
  { forwarded: 'for="[::1]";by=x;proto=gopher' },
  { host: "evil.example" },
  { cookie: "a=".repeat(500) },
  { range: "bytes=0-1" },
  { "if-none-match": "*" },
];

// Not here: `Connection: upgrade` + `Upgrade: websocket`, a connection-level header: it is sent
// over a raw socket in tests/gateway/client_connection_test.ts.

const OTHER_METHODS = ["GET", "PUT", "PATCH", "DELETE", "OPTIONS"];
/** fetch() refuses a body on GET and HEAD. */
const METHODS_WITH_BODY = ["PUT", "PATCH", "DELETE", "OPTIONS"];
const ODD_PATHS = [
  "/v1/completions/",
  "/v1//completions",
  "/V1/COMPLETIONS",
  "/v1/completions?x=%zz",
  "/v1/chat/completions/../completions",
  "/v1/%63ompletions",
  "/v1/completions%00",
  "/%ff",
  "/v1/embeddings",
  "/v2/completions",
];

export function headerInputs(): ProbeInput[] {
  const inputs: ProbeInput[] = [];
  for (const [path, body] of [[COMPLETIONS, validCompletion()], [CHAT, validChat()]] as const) {
    for (const type of CONTENT_TYPES) {
      inputs.push(jsonInput("header.content_type", path, body, { "content-type": type }));
    }
    for (const headers of ODD_HEADERS) {
      inputs.push(jsonInput("header.odd", path, body, headers));
      inputs.push(jsonInput("header.odd_stream", path, { ...body, stream: true }, headers));
    }
    for (const method of OTHER_METHODS) {
      inputs.push({ ...jsonInput("method", path, body), method, body: undefined });
    }
    for (const method of METHODS_WITH_BODY) {
      inputs.push({ ...jsonInput("method_with_body", path, body), method });
    }
  }
  for (const path of ODD_PATHS) inputs.push(jsonInput("path", path, validCompletion()));
  return inputs;
}
