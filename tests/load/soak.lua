-- wrk: a mix of request kinds, one after another on every connection:
-- small native JSON, KServe JSON of 1024 float32, raw float32 bytes of
-- 4096 elements, and KServe binary of 65536 float32 (LOAD_DIR holds the
-- bodies soak.sh wrote). A status above 399 is an error (wrk's own count:
-- no response() hook, which would make wrk keep every body).
local dir = os.getenv("LOAD_DIR")

local function read(name)
  local f = assert(io.open(dir .. "/" .. name, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

local kinds = {}

function init(args)
  local hlen = read("kserve_bin.hlen")
  kinds = {
    wrk.format("POST", "/v1/cumsum", {["Content-Type"] = "application/json"},
               read("small.json")),
    wrk.format("POST", "/v2/models/cumsum/infer",
               {["Content-Type"] = "application/json"}, read("kserve.json")),
    wrk.format("POST", "/v1/cumsum?dtype=float32&shape=4096",
               {["Content-Type"] = "application/octet-stream"}, read("raw.bin")),
    wrk.format("POST", "/v2/models/cumsum/infer",
               {["Content-Type"] = "application/octet-stream",
                ["Inference-Header-Content-Length"] = hlen}, read("kserve.bin")),
  }
end

local n = 0
function request()
  n = n + 1
  return kinds[(n % #kinds) + 1]
end

function done(summary, latency, requests)
  io.write(string.format(
    "RESULT requests=%d connect=%d read=%d write=%d status=%d timeout=%d " ..
      "seconds=%.1f rps=%.1f p50_ms=%.3f p99_ms=%.3f p999_ms=%.3f max_ms=%.3f\n",
    summary.requests, summary.errors.connect, summary.errors.read,
    summary.errors.write, summary.errors.status, summary.errors.timeout,
    summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    latency:percentile(99.9) / 1000, latency.max / 1000))
end
