#!/usr/bin/env python3
"""A fake OpenAI-compatible chat-completions server for the soak (scripts/soak.sh).

A real HTTP server on 127.0.0.1:0 (threaded, HTTP/1.1 keep-alive) that answers every
`POST .../chat/completions` with a short streamed reply in OpenAI's wire format: text
deltas, a finish reason, a usage chunk without choices, then `data: [DONE]`. It prints
`PORT <n>` once listening and counts requests in `--stats` (a JSON file rewritten every
second). Standard library only.
"""

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

COUNT = {"requests": 0, "bad": 0}
LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length)
        try:
            request = json.loads(body)
            ok = self.path.endswith("/chat/completions") and request.get("stream") is True
        except ValueError:
            ok = False
        with LOCK:
            COUNT["requests"] += 1
            if not ok:
                COUNT["bad"] += 1
        if not ok:
            self.send_response(400)
            self.send_header("content-type", "application/json")
            payload = b'{"error":{"message":"expected a streamed chat completion"}}'
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        chunks = [
            {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Soak "}}]},
            {"choices": [{"index": 0, "delta": {"content": "reply, "}}]},
            {"choices": [{"index": 0, "delta": {"content": "all well."}}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            {"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 4}},
        ]
        out = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
        out += b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--stats", required=True)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(f"PORT {server.server_address[1]}", flush=True)

    def write_stats():
        while True:
            time.sleep(1)
            with LOCK:
                snapshot = dict(COUNT)
            with open(args.stats, "w") as f:
                json.dump(snapshot, f)

    threading.Thread(target=write_stats, daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
