"""Drive the bot with the official Python MCP client (`mcp` on PyPI); scripts/interop.sh runs this
under scripts/interop/.venv/bin/python.

  py-client.py --url URL --mode auto|legacy|2026-07-28

The bearer token comes from the environment (INTEROP_TOKEN), not argv; it is sent as
`Authorization: Bearer …` on every request via create_mcp_http_client(headers=…).

Steps: connect (Client(mode=…): auto probes server/discover and falls back to initialize; legacy
is the initialize handshake), tools/list (>= 18 incl. health, server_log, db_query,
send_message), tools/call health (structured content uptime_secs is a number), tools/call
server_log (structured content lines is a list). Prints one line per step and a final
`PASS: <label>` or `FAIL: <label> — <reason>`; exit 0 iff PASS.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import traceback
from importlib.metadata import version

REQUIRED_TOOLS = ("health", "server_log", "db_query", "send_message")
MIN_TOOLS = 18


class CheckFailure(Exception):
    pass


def say(msg: str) -> None:
    print(f"  {msg}", flush=True)


def expect(cond: bool, msg: str) -> None:
    if not cond:
        raise CheckFailure(msg)


def short(v, n: int = 300) -> str:
    s = v if isinstance(v, str) else json.dumps(v, default=str)
    return s if len(s) <= n else s[:n] + "…"


def leaf_exceptions(e: BaseException):
    if isinstance(e, BaseExceptionGroup):
        for sub in e.exceptions:
            yield from leaf_exceptions(sub)
    else:
        yield e


def describe_error(e: BaseException) -> str:
    text = "".join(traceback.format_exception_only(type(e), e)).strip()
    err = getattr(e, "error", None)  # mcp.shared.exceptions.MCPError carries the JSON-RPC error
    if err is not None and hasattr(err, "code"):
        text += f" [JSON-RPC error code={err.code} message={err.message!r}"
        text += f" data={short(err.data, 400)}]" if getattr(err, "data", None) is not None else "]"
    return text


async def run(url: str, mode: str, token: str, timeout: float) -> None:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    say(f"client: mcp=={version('mcp')} (Python {sys.version.split()[0]}), Client(mode={mode!r})")
    headers = {"Authorization": f"Bearer {token}"}
    async with create_mcp_http_client(headers=headers) as http:
        transport = streamable_http_client(url, http_client=http)
        async with asyncio.timeout(timeout * 4):
            started = time.monotonic()
            async with Client(transport, mode=mode, read_timeout_seconds=timeout) as client:
                negotiated = client.protocol_version
                info = client.server_info
                say(
                    f"connect: ok in {int((time.monotonic() - started) * 1000)} ms — server "
                    f"{getattr(info, 'name', '?')}@{getattr(info, 'version', '?')}, protocol {negotiated}"
                )
                if mode == "legacy":
                    expect(not str(negotiated).startswith("2026"), f"legacy mode negotiated {negotiated}")
                else:
                    # The bot speaks 2026-07-28: auto must choose it rather than fall back.
                    expect(negotiated == "2026-07-28", f"expected protocol 2026-07-28 in mode {mode}, got {negotiated}")

                listed = await client.list_tools()
                names = [t.name for t in listed.tools]
                say(f"tools/list: {len(names)} tools: {', '.join(names)}")
                expect(len(names) >= MIN_TOOLS, f"expected at least {MIN_TOOLS} tools, got {len(names)}")
                missing = [n for n in REQUIRED_TOOLS if n not in names]
                expect(not missing, f"tools/list lacks {', '.join(missing)}")

                health = await client.call_tool("health", {})
                expect(not health.is_error, f"health returned is_error: {short(str(health.content))}")
                sc = health.structured_content or {}
                uptime = sc.get("uptime_secs")
                expect(
                    isinstance(uptime, (int, float)) and not isinstance(uptime, bool),
                    f"health structured content uptime_secs is not a number: {short(sc)}",
                )
                say(f"tools/call health: ok — uptime_secs={uptime}, keys: {', '.join(sc)}")

                log = await client.call_tool("server_log", {"limit": 5})
                expect(not log.is_error, f"server_log returned is_error: {short(str(log.content))}")
                lines = (log.structured_content or {}).get("lines")
                expect(isinstance(lines, list), f"server_log structured content lines is not a list: {short(log.structured_content)}")
                last = lines[-1].get("message") if lines and isinstance(lines[-1], dict) else (lines[-1] if lines else None)
                say(f"tools/call server_log: ok — {len(lines)} lines; last: {short(last, 120)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True)
    ap.add_argument("--mode", default="auto")
    args = ap.parse_args()
    token = os.environ.get("INTEROP_TOKEN", "")
    timeout = float(os.environ.get("INTEROP_TIMEOUT_MS", "20000")) / 1000
    label = f"python-mcp streamable-http mode={args.mode}"
    try:
        asyncio.run(run(args.url, args.mode, token, timeout))
    except BaseException as e:  # ExceptionGroups from anyio task groups included
        if isinstance(e, KeyboardInterrupt):
            raise
        leaves = list(leaf_exceptions(e))
        checks = [x for x in leaves if isinstance(x, CheckFailure)]
        if checks:
            reason = "; ".join(str(x) for x in checks)
        else:
            reason = " | ".join(describe_error(x) for x in leaves)
            for x in leaves:
                tb = "".join(traceback.format_exception(type(x), x, x.__traceback__)[-4:])
                say("error:\n" + "\n".join("      " + line for line in tb.rstrip().splitlines()))
        print(f"FAIL: {label} — {short(reason, 1500)}", flush=True)
        return 1
    print(f"PASS: {label}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
