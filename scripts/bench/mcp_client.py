#!/usr/bin/env python3
"""Small keep-alive MCP client for scripts/memory.sh (standard library only).

    mcp_client.py URL TOKEN init N [IDS_FILE]   N x initialize (+ notifications/initialized);
                                                session ids appended to IDS_FILE
    mcp_client.py URL TOKEN delete IDS_FILE     DELETE every session listed
    mcp_client.py URL TOKEN call N TOOL         N x modern stateless tools/call TOOL

Prints one JSON line: what was done, how many, how long, failures.
"""
import http.client
import json
import sys
import time
import urllib.parse

LEGACY = "2025-11-25"
MODERN = "2026-07-28"


def main():
    url, token, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    base = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {token}",
    }

    def post(body, headers):
        conn.request("POST", u.path, body=body, headers=headers)
        r = conn.getresponse()
        return r.status, r.getheader("mcp-session-id"), r.read()

    failures, done = 0, 0
    started = time.time()
    if mode == "init":
        n = int(sys.argv[4])
        out = open(sys.argv[5], "a") if len(sys.argv) > 5 else None
        init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": {},
            "clientInfo": {"name": "memory-bench", "version": "1"}}}).encode()
        initialized = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
        for _ in range(n):
            status, sid, body = post(init, base)
            if status != 200 or not sid or b'"result"' not in body:
                failures += 1
                continue
            status, _, _ = post(initialized, dict(base, **{
                "Mcp-Session-Id": sid, "MCP-Protocol-Version": LEGACY}))
            if status != 202:
                failures += 1
            if out:
                out.write(sid + "\n")
            done += 1
    elif mode == "delete":
        for sid in open(sys.argv[4]).read().split():
            conn.request("DELETE", u.path, headers=dict(base, **{
                "Mcp-Session-Id": sid, "MCP-Protocol-Version": LEGACY}))
            r = conn.getresponse()
            r.read()
            if r.status != 204:
                failures += 1
            done += 1
    elif mode == "call":
        n, tool = int(sys.argv[4]), sys.argv[5]
        headers = dict(base, **{"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call",
                                "Mcp-Name": tool})
        for i in range(n):
            body = json.dumps({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": {
                "name": tool, "arguments": {}, "_meta": {
                    "io.modelcontextprotocol/protocolVersion": MODERN,
                    "io.modelcontextprotocol/clientCapabilities": {}}}}).encode()
            status, _, reply = post(body, headers)
            if status != 200 or b'"error"' in reply:
                failures += 1
            done += 1
    else:
        sys.exit(f"unknown mode {mode}")
    took = time.time() - started
    print(json.dumps({"mode": mode, "done": done, "failures": failures,
                      "seconds": round(took, 2), "per_second": round(done / took, 1) if took else 0}))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
