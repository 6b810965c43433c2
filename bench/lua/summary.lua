-- Shared by the bench/run wrk scripts (loaded with dofile): prints one line
-- "BENCHJSON {...}" with the totals and latency percentiles (microseconds)
-- that bench/run parses. wrk's own text output stays above it.
local M = {}

local PCTS = {1, 5, 10, 20, 25, 30, 40, 50, 60, 70, 75, 80, 85, 90, 95, 97.5,
              99, 99.5, 99.9, 99.95, 99.99, 99.999}

function M.done(summary, latency, requests)
   local p = {}
   for _, q in ipairs(PCTS) do
      p[#p + 1] = string.format('"%s":%d', tostring(q), latency:percentile(q))
   end
   local e = summary.errors
   io.write(string.format(
      'BENCHJSON {"requests":%d,"duration_us":%d,"bytes":%d,' ..
      '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
      '"latency_us":{"min":%d,"max":%d,"mean":%.3f,"stdev":%.3f,"percentiles":{%s}}}\n',
      summary.requests, summary.duration, summary.bytes,
      e.connect, e.read, e.write, e.status, e.timeout,
      latency.min, latency.max, latency.mean, latency.stdev, table.concat(p, ",")))
end

return M
