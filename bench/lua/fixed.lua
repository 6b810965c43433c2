-- wrk script for one fixed URI (the URL's path): only adds the JSON summary.
--   wrk ... -s fixed.lua http://127.0.0.1:PORT/path
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local summary = dofile(dir .. "summary.lua")

function done(s, latency, requests)
   summary.done(s, latency, requests)
end
