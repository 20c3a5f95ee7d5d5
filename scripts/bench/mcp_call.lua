-- wrk script for scripts/bench.sh: POST one MCP `tools/call` per request.
--
-- Environment:
--   BENCH_KIND    modern | legacy | ceiling   (ceiling sends the modern request)
--   BENCH_TOOL    tool name                   (default list_agents)
--   BENCH_ARGUMENTS the tool's arguments as JSON (default {})
--   BENCH_TOKEN   bearer token
--   BENCH_SESSION Mcp-Session-Id              (legacy only)
--   BENCH_EXPECT  text every good reply body contains (default structuredContent)
--   BENCH_SHAPE   claude-code (default) | plain: claude-code adds to `_meta` what Claude
--                 Code 2.1.337 adds to every tools/call (its tool use id and a progress
--                 token; in the 2026-07-28 era its clientInfo too), plain adds nothing
--   BENCH_OUT     file that receives one JSON line of results
--
-- Every request gets its own JSON-RPC id (thread * 1e9 + counter): in-flight requests
-- of one session must not share an id. Every reply is checked: a non-2xx status, or a
-- 2xx body without BENCH_EXPECT or with a JSON-RPC error object, counts as an error.
local kind    = os.getenv("BENCH_KIND") or "modern"
local tool    = os.getenv("BENCH_TOOL") or "list_agents"
local token   = os.getenv("BENCH_TOKEN") or "secret"
local session = os.getenv("BENCH_SESSION") or ""
local expect  = os.getenv("BENCH_EXPECT") or "structuredContent"
local out     = os.getenv("BENCH_OUT") or ""
local arguments = os.getenv("BENCH_ARGUMENTS") or "{}"
local shape   = os.getenv("BENCH_SHAPE") or "claude-code"

local MODERN = "2026-07-28"
local LEGACY = "2025-11-25"

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["Authorization"] = "Bearer " .. token

-- What Claude Code adds to every call's `_meta`, in either era.
local client_meta = ""
if shape == "claude-code" then
  client_meta = '"claudecode/toolUseId":"toolu_01AbCdEfGhIjKlMnOpQrStUv","progressToken":3'
elseif shape ~= "plain" then
  error("BENCH_SHAPE must be claude-code or plain, not " .. shape)
end

local params_tail
if kind == "legacy" then
  wrk.headers["MCP-Protocol-Version"] = LEGACY
  wrk.headers["Mcp-Session-Id"] = session
  local meta = client_meta ~= "" and (',"_meta":{' .. client_meta .. '}') or ""
  params_tail = '"arguments":' .. arguments .. meta .. '}}'
else
  wrk.headers["MCP-Protocol-Version"] = MODERN
  wrk.headers["Mcp-Method"] = "tools/call"
  wrk.headers["Mcp-Name"] = tool
  local info = shape == "claude-code"
    and ',"io.modelcontextprotocol/clientInfo":{"name":"claude-code","version":"2.1.337"},' .. client_meta
    or ""
  params_tail = '"arguments":' .. arguments .. ',"_meta":{"io.modelcontextprotocol/protocolVersion":"' .. MODERN ..
                '","io.modelcontextprotocol/clientCapabilities":{}' .. info .. '}}}'
end
local head = '{"jsonrpc":"2.0","id":'
local tail = ',"method":"tools/call","params":{"name":"' .. tool .. '",' .. params_tail
wrk.body = head .. "0" .. tail

local all_threads = {}
local thread_no = 0
function setup(thread)
  thread_no = thread_no + 1
  thread:set("tno", thread_no)
  table.insert(all_threads, thread)
end

function init(args)
  n = 0
  non2xx = 0
  badbody = 0
  first_bad = ""
end

function request()
  n = n + 1
  return wrk.format(nil, nil, nil, head .. (tno * 1000000000 + n) .. tail)
end

function response(status, headers, body)
  if status < 200 or status > 299 then
    non2xx = non2xx + 1
  elseif not string.find(body, expect, 1, true) or string.find(body, '"error":{', 1, true) then
    badbody = badbody + 1
  else
    return
  end
  if first_bad == "" then
    first_bad = status .. " " .. string.sub(body or "", 1, 160)
  end
end

function done(summary, latency, requests)
  local nx, bb, sample = 0, 0, ""
  for _, t in ipairs(all_threads) do
    nx = nx + t:get("non2xx")
    bb = bb + t:get("badbody")
    if sample == "" then sample = t:get("first_bad") end
  end
  local e = summary.errors
  local socket = e.connect + e.read + e.write + e.timeout
  local secs = summary.duration / 1e6
  sample = sample:gsub('[\\"]', "'"):gsub("%c", " ")
  local line = string.format(
    '{"requests":%d,"seconds":%.3f,"rps":%.1f,"p50_ms":%.3f,"p99_ms":%.3f,"max_ms":%.3f,' ..
    '"errors":%d,"socket_errors":%d,"non2xx":%d,"bad_body":%d,"sample":"%s"}',
    summary.requests, secs, summary.requests / secs,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000,
    socket + nx + bb, socket, nx, bb, sample)
  io.write(line .. "\n")
  if out ~= "" then
    local f = io.open(out, "w")
    f:write(line .. "\n")
    f:close()
  end
end
