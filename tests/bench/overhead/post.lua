-- wrk script of tests/bench/overhead_bench.ts: POSTs JSON bodies read from a file, one per line,
-- rotating through them. Every "@@ID@@" in a body is replaced by a number unique to the request
-- (a token id, or the first word of a message), so no two requests of a run, nor of two runs,
-- are the same prompt: the router's tokenizer cache and predicted index see new text every time.
--
-- Arguments (after `--`): <path> <bodies file> <first id> <threads>
-- done() prints one line `WRKJSON {...}` (latencies in microseconds) for the benchmark to read.

local MARKER = "@@ID@@"
local thread_count = 0

function setup(thread)
  thread:set("thread_index", thread_count)
  thread_count = thread_count + 1
end

local path = "/"
local bodies = {}
local counter = 0
local first_id = 0
local threads = 1

local function split(text)
  local parts = {}
  local start = 1
  while true do
    local at = string.find(text, MARKER, start, true)
    if at == nil then
      parts[#parts + 1] = string.sub(text, start)
      return parts
    end
    parts[#parts + 1] = string.sub(text, start, at - 1)
    start = at + #MARKER
  end
end

function init(args)
  path = args[1]
  first_id = tonumber(args[3])
  threads = tonumber(args[4])
  for line in io.lines(args[2]) do
    if #line > 0 then bodies[#bodies + 1] = split(line) end
  end
  if #bodies == 0 then error("no bodies in " .. args[2]) end
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
end

function request()
  local index = (thread_index or 0)
  local id = first_id + counter * threads + index
  local parts = bodies[(counter % #bodies) + 1]
  counter = counter + 1
  local body
  if #parts == 1 then
    body = parts[1]
  else
    body = table.concat(parts, tostring(id))
  end
  return wrk.format(nil, path, nil, body)
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests":%d,"duration_us":%d,"bytes":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,' ..
    '"mean_us":%.1f,"max_us":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d}\n',
    summary.requests, summary.duration, summary.bytes, latency:percentile(50),
    latency:percentile(90), latency:percentile(99), latency.mean, latency.max,
    e.connect, e.read, e.write, e.status, e.timeout))
end
