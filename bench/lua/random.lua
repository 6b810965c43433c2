-- wrk script: each request asks for a URI drawn at random from a list file
-- (one URI a line). Every wrk thread seeds its own generator (they would
-- otherwise all draw the same sequence).
--   wrk ... -s random.lua http://127.0.0.1:PORT/ -- LIST_FILE SEED
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local summary = dofile(dir .. "summary.lua")

local next_id = 0
function setup(thread)
   next_id = next_id + 1
   thread:set("thread_id", next_id)
end

local uris = {}
function init(args)
   local list = args[1]
   local seed = tonumber(args[2] or "1")
   for line in io.lines(list) do
      if #line > 0 then uris[#uris + 1] = line end
   end
   if #uris == 0 then error("no URIs in " .. tostring(list)) end
   math.randomseed(seed * 1000003 + (thread_id or 0) * 7919)
   for _ = 1, 20 do math.random() end
end

function request()
   return wrk.format("GET", uris[math.random(#uris)])
end

function done(s, latency, requests)
   summary.done(s, latency, requests)
end
