-- wrk script: every request asks for a URI no request of this run asked for
-- before (/k/RUN-THREAD-N), so each one is a cache fill.
--   wrk ... -s unique.lua http://127.0.0.1:PORT/ -- RUN
local next_id = 0
function setup(thread)
   next_id = next_id + 1
   thread:set("thread_id", next_id)
end

local run, n = "0", 0
function init(args)
   run = args[1] or "0"
end

function request()
   n = n + 1
   return wrk.format("GET", "/k/" .. run .. "-" .. thread_id .. "-" .. n)
end
