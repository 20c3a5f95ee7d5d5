#!/usr/bin/env python3
"""The soak's load driver (scripts/soak.sh): concurrent MCP clients of both protocol
eras against one bot, each looping over a weighted mix of what users really do, and
checking every reply.

Client threads (`--clients`, half 2026-07-28 stateless, half 2025-11-25 in a session):
  send_message (the bot calls the fake OpenAI-compatible model), send_message as a task
  polled with tasks/get until it completes (at most 12 at once: the bot allows a caller
  16 unfinished tasks), db_query, server_log read twice with its
  cursor, list_traces then get_trace of the newest, get_llm_calls, tools/list, and for
  the legacy half the session deleted (DELETE) and a new one initialized.
Stream threads (`--streams`, half each): a 2026 `subscriptions/listen` stream or a
  legacy GET stream held open for 20-40 s, read, closed and opened again.
One toggler: `toggle_mcp_server` off, then on again, every 20 s.

A reply counts as an error when its HTTP status is not the expected one, it is not
JSON-RPC, it carries a JSON-RPC error or a tool result with isError, or a task ends in
any state but completed. Writes a JSON summary (`--out`) every second: operations and
errors by kind, and the first error messages. Standard library only.
"""

import argparse
import http.client
import json
import random
import select
import threading
import time

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
TASKS = "io.modelcontextprotocol/tasks"

# The bot lets one caller (one token) have 16 unfinished tasks; like a well-behaved
# client, the driver keeps its own below that.
TASK_SLOTS = threading.BoundedSemaphore(12)

STATS = {"ops": {}, "errors": {}, "first_errors": []}
LOCK = threading.Lock()
STOP = threading.Event()


def count(kind, error=None):
    with LOCK:
        STATS["ops"][kind] = STATS["ops"].get(kind, 0) + 1
        if error is not None:
            STATS["errors"][kind] = STATS["errors"].get(kind, 0) + 1
            if len(STATS["first_errors"]) < 20:
                STATS["first_errors"].append(f"{kind}: {error}"[:500])


class Failure(Exception):
    pass


class Client:
    """One MCP client on one keep-alive connection."""

    def __init__(self, port, token, era, name):
        self.port, self.token, self.era, self.name = port, token, era, name
        self.conn = None
        self.session = None
        self.next_id = 0

    def connect(self):
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        return self.conn

    def http(self, method, headers, body=None):
        for attempt in (0, 1):
            conn = self.connect()
            try:
                conn.request(method, "/mcp", body=body, headers=headers)
                response = conn.getresponse()
                return response.status, response.getheader("content-type") or "", response.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                # A keep-alive connection the server closed between requests: reconnect once.
                self.conn.close()
                self.conn = None
                if attempt:
                    raise

    def headers(self, method=None, name=None):
        h = {
            "authorization": f"Bearer {self.token}",
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
        }
        if self.era == "modern":
            h["mcp-protocol-version"] = MODERN
            if method:
                h["mcp-method"] = method
            if name:
                h["mcp-name"] = name
        else:
            h["mcp-protocol-version"] = LEGACY
            if self.session:
                h["mcp-session-id"] = self.session
        return h

    def rpc(self, method, params, tasks=False):
        """Sends one request; returns its result or raises Failure."""
        self.next_id += 1
        params = dict(params)
        name = params.get("name") or params.get("taskId")
        if self.era == "modern":
            caps = {"extensions": {TASKS: {}}} if tasks else {}
            params["_meta"] = {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": caps,
                "io.modelcontextprotocol/clientInfo": {"name": self.name, "version": "1"},
            }
        body = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        header_name = name if method in ("tools/call", "tasks/get") else None
        status, ctype, raw = self.http("POST", self.headers(method, header_name), body)
        if status != 200:
            raise Failure(f"{method}: HTTP {status}: {raw[:300]!r}")
        message = None
        if ctype.startswith("text/event-stream"):
            for line in raw.decode("utf-8", "replace").splitlines():
                if line.startswith("data:"):
                    data = json.loads(line[5:].strip())
                    if data.get("id") == self.next_id:
                        message = data
        else:
            message = json.loads(raw)
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            raise Failure(f"{method}: no JSON-RPC reply: {raw[:300]!r}")
        if "error" in message:
            raise Failure(f"{method}: error {message['error']}")
        result = message.get("result")
        if isinstance(result, dict) and result.get("isError"):
            raise Failure(f"{method}: tool error {json.dumps(result)[:300]}")
        return result

    def call(self, tool, arguments, tasks=False, task=None):
        params = {"name": tool, "arguments": arguments}
        if task is not None:
            params["task"] = task
        return self.rpc("tools/call", params, tasks=tasks)

    def initialize(self):
        self.session = None
        body = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": {},
            "clientInfo": {"name": self.name, "version": "1"}}})
        h = self.headers()
        conn = self.connect()
        conn.request("POST", "/mcp", body=body, headers=h)
        response = conn.getresponse()
        response.read()
        session = response.getheader("mcp-session-id")
        if response.status != 200 or not session:
            raise Failure(f"initialize: HTTP {response.status}, session {session!r}")
        self.session = session
        status, _, raw = self.http("POST", self.headers(), json.dumps(
            {"jsonrpc": "2.0", "method": "notifications/initialized"}))
        if status != 202:
            raise Failure(f"notifications/initialized: HTTP {status}: {raw[:200]!r}")

    def delete_session(self):
        status, _, raw = self.http("DELETE", self.headers())
        if status not in (200, 204):
            raise Failure(f"DELETE: HTTP {status}: {raw[:200]!r}")
        self.initialize()


def structured(result):
    return (result or {}).get("structuredContent") or {}


def op_send_message(c):
    s = structured(c.call("send_message", {"content": "soak: say something short"}))
    if "Soak reply" not in s.get("response", ""):
        raise Failure(f"send_message: unexpected reply {json.dumps(s)[:300]}")


def op_task(c):
    with TASK_SLOTS:
        run_task(c)


def run_task(c):
    if c.era == "modern":
        created = c.call("send_message", {"content": "soak task"}, tasks=True)
        task_id = (created or {}).get("taskId")
    else:
        created = c.call("send_message", {"content": "soak task"}, task={"ttl": 60000})
        task_id = ((created or {}).get("task") or {}).get("taskId")
    if not task_id:
        raise Failure(f"task: no taskId in {json.dumps(created)[:300]}")
    deadline = time.time() + 60
    while time.time() < deadline:
        task = c.rpc("tasks/get", {"taskId": task_id}, tasks=True)
        status = (task or {}).get("status")
        if status != "working":
            if status != "completed":
                raise Failure(f"task {task_id} ended {status}: {json.dumps(task)[:300]}")
            return
        time.sleep(0.1)
    raise Failure(f"task {task_id} still working after 60 s")


def op_db_query(c):
    s = structured(c.call("db_query", {"query": "SELECT count(*) FROM conversations"}))
    if not s.get("rows"):
        raise Failure(f"db_query: no rows {json.dumps(s)[:300]}")


def op_server_log(c):
    first = structured(c.call("server_log", {"limit": 20}))
    cursor = first.get("cursor")
    if cursor is None:
        raise Failure(f"server_log: no cursor {json.dumps(first)[:300]}")
    c.call("server_log", {"since": cursor, "limit": 20})


def op_traces(c):
    s = structured(c.call("list_traces", {"limit": 5}))
    traces = s.get("traces") or []
    if traces and traces[0].get("trace_id"):
        c.call("get_trace", {"trace_id": traces[0]["trace_id"]})


def op_llm_calls(c):
    c.call("get_llm_calls", {"limit": 5})


def op_tools_list(c):
    result = c.rpc("tools/list", {})
    if not (result or {}).get("tools"):
        raise Failure("tools/list: no tools")


def op_session_cycle(c):
    c.delete_session()


OPS = [
    ("send_message", op_send_message, 10),
    ("task", op_task, 4),
    ("db_query", op_db_query, 12),
    ("server_log", op_server_log, 12),
    ("traces", op_traces, 8),
    ("get_llm_calls", op_llm_calls, 5),
    ("tools_list", op_tools_list, 10),
    ("session_cycle", op_session_cycle, 2),
]


def client_loop(port, token, index):
    era = "modern" if index % 2 == 0 else "legacy"
    c = Client(port, token, era, f"soak-{index}")
    rng = random.Random(index)
    ops = [op for op in OPS if era == "legacy" or op[0] != "session_cycle"]
    weights = [w for _, _, w in ops]
    try:
        if era == "legacy":
            c.initialize()
    except Exception as e:  # noqa: BLE001 - every failure is counted
        count("initialize", repr(e))
    while not STOP.is_set():
        kind, fn, _ = rng.choices(ops, weights)[0]
        try:
            fn(c)
            count(f"{era}:{kind}")
        except Exception as e:  # noqa: BLE001 - every failure is counted
            count(f"{era}:{kind}", repr(e))
            if c.conn:
                c.conn.close()
            c.conn = None


def stream_loop(port, token, index):
    """Holds a listen (2026) or GET (legacy) stream open, reads it, and opens another."""
    era = "modern" if index % 2 == 0 else "legacy"
    rng = random.Random(1000 + index)
    kind = f"{era}:stream"
    while not STOP.is_set():
        c = Client(port, token, era, f"soak-stream-{index}")
        try:
            if era == "legacy":
                c.initialize()
                h = c.headers()
                h["accept"] = "text/event-stream"
                body, method = None, "GET"
            else:
                h = c.headers("subscriptions/listen")
                body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
                                   "params": {"_meta": {
                                       "io.modelcontextprotocol/protocolVersion": MODERN,
                                       "io.modelcontextprotocol/clientCapabilities": {}},
                                       "notifications": {"toolsListChanged": True}}})
                method = "POST"
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request(method, "/mcp", body=body, headers=h)
            response = conn.getresponse()
            ctype = response.getheader("content-type") or ""
            if response.status != 200 or not ctype.startswith("text/event-stream"):
                raise Failure(f"stream: HTTP {response.status} {ctype}: {response.read(300)!r}")
            hold = time.time() + rng.uniform(20, 40)
            while time.time() < hold and not STOP.is_set():
                ready, _, _ = select.select([conn.sock], [], [], 1.0)
                if ready and not response.read1(65536):
                    raise Failure("stream closed by the server")
            conn.close()
            if era == "legacy":
                status, _, raw = c.http("DELETE", c.headers())
                if status not in (200, 204):
                    raise Failure(f"DELETE after the stream: HTTP {status}: {raw[:200]!r}")
            count(kind)
        except Exception as e:  # noqa: BLE001 - every failure is counted
            count(kind, repr(e))
            time.sleep(1)


def toggle_loop(port, token, server):
    c = Client(port, token, "modern", "soak-toggler")
    while not STOP.wait(15):
        for enabled in (False, True):
            try:
                c.call("toggle_mcp_server", {"name": server, "enabled": enabled})
                count("toggle_mcp_server")
            except Exception as e:  # noqa: BLE001 - every failure is counted
                count("toggle_mcp_server", repr(e))
            STOP.wait(5)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--secs", type=int, default=600)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--mcp-server", default="fixture")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    threads = [threading.Thread(target=client_loop, args=(args.port, args.token, i), daemon=True)
               for i in range(args.clients)]
    threads += [threading.Thread(target=stream_loop, args=(args.port, args.token, i), daemon=True)
                for i in range(args.streams)]
    threads.append(threading.Thread(target=toggle_loop, args=(args.port, args.token, args.mcp_server),
                                    daemon=True))
    started = time.time()
    for t in threads:
        t.start()

    def dump():
        with LOCK:
            snapshot = json.loads(json.dumps(STATS))
        snapshot["elapsed_secs"] = round(time.time() - started, 1)
        snapshot["total_ops"] = sum(snapshot["ops"].values())
        snapshot["total_errors"] = sum(snapshot["errors"].values())
        with open(args.out, "w") as f:
            json.dump(snapshot, f, indent=1, sort_keys=True)

    while time.time() - started < args.secs:
        time.sleep(1)
        dump()
    STOP.set()
    for t in threads:
        t.join(timeout=70)
    dump()


if __name__ == "__main__":
    main()
