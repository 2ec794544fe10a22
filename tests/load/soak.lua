-- wrk: a mix of request kinds, one after another on every connection.
-- Valid ones of several sizes and formats (small native JSON, gzipped
-- JSON, KServe JSON of 1024 float32, raw float32 bytes of 4096 elements,
-- a .npy of 16384 float64, KServe binary of 65536 float32, a health
-- probe), and invalid ones that must get their own 4xx: broken JSON, an
-- unknown dtype, a value that does not fit, an axis out of range, an
-- unknown route, a wrong method, an unsupported Content-Type, raw bytes
-- that do not fill the shape, a broken .npy header, a bad KServe
-- datatype, a body that is not the gzip it claims, a body over the
-- server's --max-body-bytes, a bad X-Timeout-Ms. LOAD_DIR holds the
-- bodies soak.sh wrote.
--
-- Each request carries X-Request-Id "k<kind>-..."; tallyd echoes it, so
-- response() knows which kind a status answers, whichever connection it
-- came on, and counts every status that is not the one expected.
local dir = os.getenv("LOAD_DIR")

local function read(name)
  local f = assert(io.open(dir .. "/" .. name, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

local threads = {}
function setup(thread)
  table.insert(threads, thread)
end

local kinds, expect, names = {}, {}, {}
local JSON = "application/json"

local function add(name, status, method, path, headers, body)
  local k = #kinds + 1
  headers["X-Request-Id"] = "k" .. k
  kinds[k] = wrk.format(method, path, headers, body)
  expect[k] = status
  names[k] = name
end

function init(args)
  unexpected = 0
  first_bad = ""
  nkinds = 0
  local hlen = read("kserve_bin.hlen")
  local small = read("small.json")
  add("small json", 200, "POST", "/v1/cumsum", {["Content-Type"] = JSON}, small)
  add("gzip json", 200, "POST", "/v1/cumsum",
      {["Content-Type"] = JSON, ["Content-Encoding"] = "gzip"}, read("small.json.gz"))
  add("kserve json", 200, "POST", "/v2/models/cumsum/infer",
      {["Content-Type"] = JSON}, read("kserve.json"))
  add("raw", 200, "POST", "/v1/cumsum?dtype=float32&shape=4096",
      {["Content-Type"] = "application/octet-stream"}, read("raw.bin"))
  add("npy", 200, "POST", "/v1/cumsum?axis=1",
      {["Content-Type"] = "application/x-npy"}, read("x.npy"))
  add("kserve binary", 200, "POST", "/v2/models/cumsum/infer",
      {["Content-Type"] = "application/octet-stream",
       ["Inference-Header-Content-Length"] = hlen}, read("kserve.bin"))
  add("ready", 200, "GET", "/v2/health/ready", {}, nil)
  add("broken json", 400, "POST", "/v1/cumsum", {["Content-Type"] = JSON},
      '{"dtype":"float32","shape":[3],"data":[1,2,')
  add("unknown dtype", 400, "POST", "/v1/cumsum", {["Content-Type"] = JSON},
      '{"dtype":"float128","shape":[2],"data":[1,2]}')
  add("does not fit", 400, "POST", "/v1/cumsum", {["Content-Type"] = JSON},
      '{"dtype":"int8","shape":[2],"data":[1,300]}')
  add("bad axis", 400, "POST", "/v1/cumsum", {["Content-Type"] = JSON},
      '{"dtype":"int32","shape":[2],"data":[1,2],"axis":3}')
  add("no route", 404, "POST", "/v1/nope", {["Content-Type"] = JSON}, small)
  add("wrong method", 405, "GET", "/v1/cumsum", {}, nil)
  add("media type", 415, "POST", "/v1/cumsum", {["Content-Type"] = "text/csv"}, "1,2,3")
  add("short raw", 400, "POST", "/v1/cumsum?dtype=float32&shape=4097",
      {["Content-Type"] = "application/octet-stream"}, read("raw.bin"))
  add("broken npy", 400, "POST", "/v1/cumsum",
      {["Content-Type"] = "application/x-npy"}, read("broken.npy"))
  add("bad datatype", 400, "POST", "/v2/models/cumsum/infer", {["Content-Type"] = JSON},
      '{"inputs":[{"name":"x","shape":[2],"datatype":"FP128","data":[1,2]}]}')
  add("not gzip", 400, "POST", "/v1/cumsum",
      {["Content-Type"] = JSON, ["Content-Encoding"] = "gzip"}, small)
  add("too large", 413, "POST", "/v1/cumsum?dtype=uint8&shape=2000000",
      {["Content-Type"] = "application/octet-stream"}, read("large.bin"))
  add("bad timeout", 400, "POST", "/v1/cumsum",
      {["Content-Type"] = JSON, ["X-Timeout-Ms"] = "soon"}, small)
  nkinds = #kinds
end

local n = 0
function request()
  n = n + 1
  return kinds[(n % #kinds) + 1]
end

function response(status, headers, body)
  local id = headers["X-Request-Id"] or ""
  local k = tonumber(string.match(id, "^k(%d+)$") or "")
  if k == nil or status ~= expect[k] then
    unexpected = unexpected + 1
    if first_bad == "" then
      first_bad = string.format("%s: status %d (expected %s)",
                                k and names[k] or ("id " .. id), status,
                                k and tostring(expect[k]) or "?")
    end
  end
end

function done(summary, latency, requests)
  local bad, first, nk = 0, "", 0
  for _, t in ipairs(threads) do
    bad = bad + t:get("unexpected")
    nk = t:get("nkinds")
    if first == "" then first = t:get("first_bad") end
  end
  io.write(string.format(
    "RESULT requests=%d connect=%d read=%d write=%d status=%d timeout=%d " ..
      "unexpected=%d kinds=%d seconds=%.1f rps=%.1f p50_ms=%.3f p99_ms=%.3f " ..
      "p999_ms=%.3f max_ms=%.3f\n",
    summary.requests, summary.errors.connect, summary.errors.read,
    summary.errors.write, summary.errors.status, summary.errors.timeout,
    bad, nk, summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    latency:percentile(99.9) / 1000, latency.max / 1000))
  if first ~= "" then
    io.write("FIRST_UNEXPECTED " .. first .. "\n")
  end
end
