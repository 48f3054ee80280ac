-- wrk script for bench/proxy.sh: requests the paths in ZW_PATHS (space separated) in turn and
-- prints exact totals at the end, which proxy.sh parses (wrk's own summary rounds).
local paths = {}
for path in string.gmatch(os.getenv("ZW_PATHS") or "/", "%S+") do
    paths[#paths + 1] = path
end

if #paths > 1 then
    local i = 0
    request = function()
        i = i + 1
        return wrk.format(nil, paths[(i % #paths) + 1])
    end
else
    wrk.path = paths[1]
end

done = function(summary, latency, requests)
    local e = summary.errors
    io.write(string.format(
        "zipwire-bench requests=%d bytes=%d duration_us=%d socket_errors=%d status_errors=%d\n",
        summary.requests, summary.bytes, summary.duration,
        e.connect + e.read + e.write + e.timeout, e.status))
end
