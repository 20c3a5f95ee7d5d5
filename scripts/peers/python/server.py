"""The official Python MCP SDK (`mcp`, MCPServer) as a peer for `scripts/bench.sh --peers`.

Issue 20: "the TypeScript and Python SDKs at c=16 once". The SDK's own recommended stateless
setup: `MCPServer.streamable_http_app(stateless_http=True, json_response=True)`, which
serves the 2026-07-28 revision (one self-contained POST with the `_meta` envelope, no
session) and 2025-era requests statelessly, with JSON replies. One tool, `list_agents` (no
arguments), answers the `result` member of the saved Porthole reply in BENCH_RESULT_FILE as
is (content and structuredContent), so every server in the bench sends the same result.
Every request must carry `Authorization: Bearer $BENCH_TOKEN` (hmac.compare_digest over
SHA-256 digests), else 401. The SDK's own DNS-rebinding guard (Host/Origin allow-list for
127.0.0.1) stays on, as it is by default.

Run production-like under uvicorn: one worker, no access log, log level warning; uvloop
and httptools only if they are installed (the pinned venv has neither, so asyncio + h11).
Nothing to install: the SDK, uvicorn and starlette come from the pinned venv of
`scripts/interop.sh --install-only`:

    PORT=0 BENCH_TOKEN=secret BENCH_RESULT_FILE=result.json \\
        scripts/interop/.venv/bin/python scripts/peers/python/server.py
    # prints: python_peer listening on 127.0.0.1:<port>

scripts/bench/sdk_peers.sh starts it that way (pinned with taskset).
"""

from __future__ import annotations

import hashlib
import hmac
import importlib.util
import json
import os
import sys
from importlib.metadata import version

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult

# ---- the fixed result ----------------------------------------------------------------------
_path = os.environ.get("BENCH_RESULT_FILE")
if not _path:
    sys.exit("BENCH_RESULT_FILE must name the saved reply")
with open(_path, encoding="utf-8") as f:
    _saved = json.load(f).get("result")
if not isinstance(_saved, dict) or not isinstance(_saved.get("content"), list):
    sys.exit(f"{_path} holds no tools/call result")
RESULT = CallToolResult.model_validate(_saved)

# ---- the MCP server ------------------------------------------------------------------------
mcp = MCPServer("python_peer", version=version("mcp"), log_level="WARNING")


@mcp.tool(description="The agents that exist right now (a fixed answer for benchmarks)")
def list_agents() -> CallToolResult:
    # A CallToolResult return is passed through as is (no output schema, no wrapping).
    return RESULT


mcp_app = mcp.streamable_http_app(stateless_http=True, json_response=True)

# ---- bearer check (pure ASGI, in front of the SDK's app) -------------------------------------
TOKEN_DIGEST = hashlib.sha256(os.environ.get("BENCH_TOKEN", "secret").encode()).digest()


async def app(scope, receive, send):
    if scope["type"] == "http":
        given = b""
        for name, value in scope["headers"]:
            if name == b"authorization":
                if value.startswith(b"Bearer "):
                    given = value[7:]
                break
        if not hmac.compare_digest(hashlib.sha256(given).digest(), TOKEN_DIGEST):
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"text/plain"),
                        (b"content-length", b"12"),
                        (b"www-authenticate", b"Bearer"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
    await mcp_app(scope, receive, send)  # http and lifespan (starts the session manager)


# ---- serving -------------------------------------------------------------------------------
class Server(uvicorn.Server):
    """Prints the one "listening" line once uvicorn accepts connections."""

    async def startup(self, sockets=None):
        await super().startup(sockets=sockets)
        if self.started:
            port = self.servers[0].sockets[0].getsockname()[1]
            sys.stdout.write(f"python_peer listening on 127.0.0.1:{port}\n")
            sys.stdout.flush()


def main() -> None:
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=int(os.environ.get("PORT", "0")),
        workers=1,
        access_log=False,
        log_level="warning",
        # uvicorn's "auto" picks uvloop / httptools when installed; say so explicitly.
        loop="uvloop" if importlib.util.find_spec("uvloop") else "asyncio",
        http="httptools" if importlib.util.find_spec("httptools") else "h11",
        lifespan="on",
    )
    Server(config).run()


if __name__ == "__main__":
    main()
