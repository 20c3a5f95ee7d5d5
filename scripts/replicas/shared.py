#!/usr/bin/env python3
"""The state that crosses replicas, driven from outside for scripts/replicas.sh: an MCP
task (the Tasks extension) and a legacy session, through nginx and on single replicas.

  shared.py start URL                 starts a db_query write as a task and waits until it
                                      asks for confirmation (input_required); prints
                                      {"taskId": …, "owner": <the replica running it>}
  shared.py listen REPLICA_URL TASK STATUS
                                      holds a subscriptions/listen stream for TASK on that
                                      replica; exits 0 once notifications/tasks says STATUS
                                      (prints it), 1 after 60 s
  shared.py poll URL TASK SECONDS     polls tasks/get for SECONDS; exits 1 if the task
                                      left input_required (a restart must not fail it); a
                                      request cut by a replica's death is counted, not fatal
  shared.py answer URL TASK           tasks/update with the confirmation, then polls until
                                      the task completed; prints the task
  shared.py cancel URL TASK           tasks/cancel, then reads the task back (cancelled),
                                      again 2 s later (still cancelled), and counts the
                                      writes `start` asks for: only the answered one ran
  shared.py session URL_A URL_B …     a legacy session made on URL_A and used on every other
                                      replica, ended (DELETE) on URL_A: prints, per replica,
                                      how long until it answered 404; exits 1 if any took a
                                      second or more

Every modern request goes to URL as sent, so through nginx it lands on any replica. The
bearer token comes from the environment (PORTHOLE_TOKEN), never from argv.
"""
import json
import os
import sys
import time
import urllib.error
import urllib.request

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
TOKEN = os.environ.get("PORTHOLE_TOKEN", "")
TASKS = "io.modelcontextprotocol/tasks"
# The memory each task's db_query write would add.
WRITE_KEY = "replicas-sh"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "extensions": {TASKS: {}}},
    "io.modelcontextprotocol/clientInfo": {"name": "replicas.sh", "version": "1"},
}
# Without the extension, a tools/call answers at once instead of with a task.
PLAIN_META = {**META, "io.modelcontextprotocol/clientCapabilities": {}}


def send(url, body, headers, method="POST", timeout=30):
    """One HTTP request; returns (status, response headers, body text)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={
        "authorization": f"Bearer {TOKEN}",
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        **headers,
    })
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.headers, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode(errors="replace")


def message_of(text):
    """The JSON-RPC message of a reply, plain or as one SSE event."""
    if text.startswith("event:") or text.startswith("data:"):
        text = "".join(l[5:] for l in text.splitlines() if l.startswith("data:"))
    return json.loads(text)


def modern(url, method, params, name=None, meta=META):
    """A stateless request; returns its result (raises Failed on an error)."""
    headers = {"mcp-protocol-version": MODERN, "mcp-method": method}
    if name:
        headers["mcp-name"] = name
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    status, _, text = send(url, body, headers)
    message = message_of(text) if status == 200 else {}
    if status != 200 or "error" in message:
        raise Failed(f"{method}: HTTP {status}: {text[:300]}")
    return message["result"]


class Failed(Exception):
    """A request that did not get its result."""


def read_one(url, sql):
    """The first column of the first row `db_query` reads."""
    call = {"name": "db_query", "arguments": {"query": sql}}
    return modern(url, "tools/call", call, "db_query", PLAIN_META)["structuredContent"]["rows"][0][0]


def get_task(url, task):
    return modern(url, "tasks/get", {"taskId": task}, task)


def wait_for(url, task, status, seconds=20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        current = get_task(url, task)
        if current["status"] == status:
            return current
        time.sleep(0.2)
    sys.exit(f"task {task} did not reach {status}: {json.dumps(current)[:300]}")


def start(url):
    sql = f"INSERT INTO memories (key, value, updated_at) VALUES ('{WRITE_KEY}', 'v', 'now')"
    call = {"name": "db_query", "arguments": {"query": sql}}
    created = modern(url, "tools/call", call, "db_query")
    task = created["taskId"]
    wait_for(url, task, "input_required")
    owner = read_one(url, f"SELECT owner_replica FROM mcp_tasks WHERE id = '{task}'")
    print(json.dumps({"taskId": task, "owner": owner}))


def listen(url, task, status):
    body = {"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen",
            "params": {"_meta": META, "notifications": {"taskIds": [task]}}}
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={
        "authorization": f"Bearer {TOKEN}", "content-type": "application/json",
        "accept": "application/json, text/event-stream", "mcp-protocol-version": MODERN,
        "mcp-method": "subscriptions/listen",
    })
    deadline = time.monotonic() + 60
    with urllib.request.urlopen(request, timeout=60) as stream:
        for line in stream:
            line = line.decode().strip()
            if not line.startswith("data:"):
                continue
            message = json.loads(line[5:])
            params = message.get("params", {})
            if message.get("method") == "notifications/tasks" and params.get("status") == status:
                print(json.dumps({"taskId": params["taskId"], "status": status}))
                return 0
            if time.monotonic() > deadline:
                break
    return 1


def poll(url, task, seconds):
    polls, cut, deadline = 0, 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            status = get_task(url, task)["status"]
        except (Failed, OSError):
            cut += 1
            continue
        polls += 1
        if status != "input_required":
            sys.exit(f"task {task} read {status} after {polls} polls")
        time.sleep(0.25)
    print(f"{polls} polls, still input_required ({cut} cut by the restart)")


def answer(url, task):
    parked = get_task(url, task)
    key = next(iter(parked["inputRequests"]))
    confirm = {key: {"action": "accept", "content": {"confirm": True}}}
    modern(url, "tasks/update", {"taskId": task, "inputResponses": confirm}, task)
    done = wait_for(url, task, "completed")
    print(json.dumps({"status": done["status"], "result": done["result"]["structuredContent"]}))


def cancel(url, task):
    modern(url, "tasks/cancel", {"taskId": task}, task)
    first = get_task(url, task)["status"]
    time.sleep(2)
    later = get_task(url, task)["status"]
    writes = read_one(url, f"SELECT COUNT(*) FROM memories WHERE key = '{WRITE_KEY}'")
    print(json.dumps({"read": first, "two_seconds_later": later, "writes": writes}))
    return 0 if first == later == "cancelled" and writes == 1 else 1


def legacy(url, session, request_id, method):
    headers = {"mcp-protocol-version": LEGACY}
    if session:
        headers["mcp-session-id"] = session
    params = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "replicas.sh", "version": "1"}} \
        if method == "initialize" else {}
    return send(url, {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}, headers)


def session(urls):
    first, others = urls[0], urls[1:]
    status, headers, _ = legacy(first, None, 1, "initialize")
    session_id = headers.get("mcp-session-id")
    if status != 200 or not session_id:
        sys.exit(f"initialize: HTTP {status}")
    for url in others:
        status, _, text = legacy(url, session_id, 2, "tools/list")
        if status != 200:
            sys.exit(f"the session does not work on {url}: HTTP {status} {text[:200]}")
    status, _, _ = send(first, None, {"mcp-session-id": session_id}, method="DELETE")
    if status != 204:
        sys.exit(f"DELETE: HTTP {status}")
    ended, worst = time.monotonic(), 0.0
    for url in others:
        while True:
            status, _, _ = legacy(url, session_id, 3, "tools/list")
            waited = time.monotonic() - ended
            if status == 404 or waited >= 1.0:
                break
            time.sleep(0.05)
        print(f"{url}: {'refused' if status == 404 else f'still {status}'} {waited * 1000:.0f} ms after the DELETE")
        worst = max(worst, waited if status == 404 else 1.0)
    return 0 if worst < 1.0 else 1


def main():
    command, args = sys.argv[1], sys.argv[2:]
    try:
        run(command, args)
    except Failed as e:
        sys.exit(str(e))


def run(command, args):
    if command == "start":
        start(args[0])
    elif command == "listen":
        sys.exit(listen(args[0], args[1], args[2]))
    elif command == "poll":
        poll(args[0], args[1], float(args[2]))
    elif command == "answer":
        answer(args[0], args[1])
    elif command == "cancel":
        sys.exit(cancel(args[0], args[1]))
    elif command == "session":
        sys.exit(session(args))
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
