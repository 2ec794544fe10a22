-- wrk: POST a body read from a file. Settings come from the environment:
--   LOAD_PATH   request path (with query)
--   LOAD_BODY   file whose bytes are the body
--   LOAD_TYPE   Content-Type (optional)
--   LOAD_HLEN   Inference-Header-Content-Length (optional, KServe binary)
-- No response() hook: with one, wrk keeps every answer's whole body in a
-- Lua string, which for 64 MiB answers stalled its reading for up to 1.5 s
-- and made the tail of the .npy row (BENCHMARKS.md). Statuses above 399
-- still count as errors in wrk's summary (report.lua).
wrk.method = "POST"
wrk.path = os.getenv("LOAD_PATH")
local f = assert(io.open(os.getenv("LOAD_BODY"), "rb"))
wrk.body = f:read("*a")
f:close()
if os.getenv("LOAD_TYPE") then
  wrk.headers["Content-Type"] = os.getenv("LOAD_TYPE")
end
if os.getenv("LOAD_HLEN") then
  wrk.headers["Inference-Header-Content-Length"] = os.getenv("LOAD_HLEN")
end
