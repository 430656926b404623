"""A loopback proxy that adds deskbridge's bearer token, so the MCP conformance suite (which cannot send headers)
can test a real `deskbridge serve` with its token check on.

Requests for the proxy's own address are re-addressed to the server; any other Host or Origin (the suite's
DNS-rebinding probes) is passed through untouched, so the server's own checks answer them.

    python conformance/token_proxy.py LISTEN_PORT UPSTREAM_PORT TOKEN
"""

from __future__ import annotations

import sys

import httpx2
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "authorization"}


def build(listen_port: int, upstream_port: int, token: str) -> Starlette:
    client = httpx2.AsyncClient(timeout=None)
    own_hosts = {f"localhost:{listen_port}", f"127.0.0.1:{listen_port}"}
    own_origins = {f"http://{h}" for h in own_hosts}

    async def forward(request: Request) -> StreamingResponse:
        headers = []
        for key, value in request.headers.items():
            if key in HOP_BY_HOP:
                continue
            value = value.strip(" \t")  # optional whitespace is not part of the value (RFC 9110 §5.5)
            if key == "host" and value in own_hosts:
                value = f"127.0.0.1:{upstream_port}"
            if key == "origin" and value in own_origins:
                value = f"http://127.0.0.1:{upstream_port}"
            headers.append((key, value))
        headers.append(("authorization", f"Bearer {token}"))
        url = f"http://127.0.0.1:{upstream_port}{request.url.path}"
        upstream = client.build_request(request.method, url, headers=headers, content=await request.body())
        response = await client.send(upstream, stream=True)
        out_headers = {k: v for k, v in response.headers.items() if k not in HOP_BY_HOP}
        return StreamingResponse(response.aiter_raw(), status_code=response.status_code, headers=out_headers,
                                 background=BackgroundTask(response.aclose))

    return Starlette(routes=[Route("/{path:path}", forward, methods=["GET", "POST", "DELETE"])])


if __name__ == "__main__":
    listen, upstream, secret = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    uvicorn.run(build(listen, upstream, secret), host="127.0.0.1", port=listen, log_level="warning")
