-- wrk script for one fixed URI, paced: each connection waits DELAY_MS
-- milliseconds after a response before it sends its next request, so the
-- client offers a bounded rate (conns × 1000 / (DELAY_MS + latency) per
-- second) instead of saturating the server. wrk times each request from
-- its send, so the pause is not part of the latency.
--   wrk ... -s paced.lua http://127.0.0.1:PORT/path -- DELAY_MS
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local summary = dofile(dir .. "summary.lua")

local pause = 1

function init(args)
   pause = tonumber(args[1]) or 1
end

function delay()
   return pause
end

function done(s, latency, requests)
   summary.done(s, latency, requests)
end
