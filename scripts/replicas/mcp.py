#!/usr/bin/env python3
"""Stateless (2026-07-28) MCP calls through the balancer, for scripts/replicas.sh.

  mcp.py call URL TOOL [JSON_ARGUMENTS]   one tools/call; prints structuredContent as JSON
                                          (exit 1 when the result is an error)
  mcp.py spread URL COUNT                 COUNT health calls; prints the replica ids that
                                          answered, one per line with its count
  mcp.py load URL SECONDS RESTART_AT RESTART_COMMAND
                                          calls list_conversations from 4 threads for SECONDS
                                          while RESTART_COMMAND (run at RESTART_AT s) restarts
                                          PostgreSQL; prints a summary as JSON and exits 1 when
                                          a request failed outside the restart or without an
                                          error that says what to do

The bearer token comes from the environment (PORTHOLE_TOKEN), never from argv.
"""
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

VERSION = "2026-07-28"
TOKEN = os.environ.get("PORTHOLE_TOKEN", "")


def call(url, tool, arguments, timeout=30):
    """One stateless tools/call; returns (ok, structuredContent or error text)."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": tool,
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": VERSION,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "replicas.sh", "version": "1"},
            },
        },
    }
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={
            "authorization": f"Bearer {TOKEN}",
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": VERSION,
            "mcp-method": "tools/call",
            "mcp-name": tool,
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            text = response.read().decode()
    except urllib.error.HTTPError as e:
        return False, f"HTTP {e.code}: {e.read().decode(errors='replace')[:300]}"
    except (urllib.error.URLError, OSError) as e:
        return False, f"connection: {e}"
    if text.startswith("event:") or text.startswith("data:"):
        text = "".join(l[5:] for l in text.splitlines() if l.startswith("data:"))
    message = json.loads(text)
    if "error" in message:
        return False, json.dumps(message["error"])
    result = message["result"]
    if result.get("isError"):
        return False, result["content"][0]["text"]
    return True, result.get("structuredContent")


def main():
    command, url = sys.argv[1], sys.argv[2]
    if command == "call":
        arguments = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
        ok, value = call(url, sys.argv[3], arguments)
        print(json.dumps(value) if ok else value)
        sys.exit(0 if ok else 1)
    if command == "spread":
        seen = {}
        for _ in range(int(sys.argv[3])):
            ok, value = call(url, "health", {})
            if not ok:
                print(f"health failed: {value}", file=sys.stderr)
                sys.exit(1)
            replica = value["replica"]["id"]
            seen[replica] = seen.get(replica, 0) + 1
        for replica, count in sorted(seen.items()):
            print(f"{replica} {count}")
        return
    if command == "load":
        seconds, restart_at, restart = float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
        outcomes, lock, start = [], threading.Lock(), time.monotonic()
        window = {}

        def worker():
            while time.monotonic() - start < seconds:
                sent = time.monotonic() - start
                ok, value = call(url, "list_conversations", {"limit": 5}, timeout=20)
                done = time.monotonic() - start
                with lock:
                    outcomes.append((sent, done, ok, None if ok else value))

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        time.sleep(restart_at)
        window["from"] = time.monotonic() - start
        subprocess.run(restart, shell=True, check=True)
        window["to"] = time.monotonic() - start
        for t in threads:
            t.join()
        failed = [o for o in outcomes if not o[2]]
        # A request "in flight" during the restart: sent before it ended, answered after
        # it began (with a second of slack for the pool to notice closed connections).
        in_flight = lambda o: o[0] <= window["to"] + 1.0 and o[1] >= window["from"]
        unexplained = [o for o in failed if not in_flight(o) or "retry" not in (o[3] or "")]
        summary = {
            "requests": len(outcomes),
            "failed": len(failed),
            "restart_window_s": [round(window["from"], 2), round(window["to"], 2)],
            "failed_outside_window_or_unclear": len(unexplained),
            "ok_after_restart": sum(1 for o in outcomes if o[2] and o[0] > window["to"]),
            "example_error": failed[0][3] if failed else None,
        }
        if unexplained:
            summary["unexplained"] = [o[3] for o in unexplained[:3]]
        print(json.dumps(summary, indent=2))
        sys.exit(1 if unexplained or summary["ok_after_restart"] == 0 else 0)
    print(__doc__, file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    main()
