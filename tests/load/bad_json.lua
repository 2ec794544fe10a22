-- wrk: POST /v1/cumsum with a body that is not JSON: every answer a 400.
-- For the access log's cost under a flood of failing requests.
wrk.method = "POST"
wrk.path = "/v1/cumsum"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"dtype":"float32","shape":[16],"data":[0.5,1,1.5,'
