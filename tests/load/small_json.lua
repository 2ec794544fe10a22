-- wrk: POST /v1/cumsum (or LOAD_PATH) with 16 float32 values as JSON.
wrk.method = "POST"
wrk.path = os.getenv("LOAD_PATH") or "/v1/cumsum"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"dtype":"float32","shape":[16],"data":[0.5,1,1.5,2,2.5,3,3.5,4,4.5,5,5.5,6,6.5,7,7.5,8],"axis":0}'

function response(status, headers, body)
  if status ~= 200 then
    io.stderr:write("unexpected status " .. status .. ": " .. body .. "\n")
  end
end
