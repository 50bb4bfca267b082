"""A distant tracking server on one machine: forward 127.0.0.1:LISTEN to 127.0.0.1:TARGET, holding every chunk
DELAY_MS in each direction. Used for the MLflow-writer figures in studies/README.md:

    mlflow server --host 127.0.0.1 --port 5077 &
    python studies/delay_proxy.py 5078 5077 10 &
    python studies/tracking_writes.py --tracking-uri http://127.0.0.1:5078

(`tc qdisc ... netem` does the same where the kernel has netem; this machine's does not.)"""

from __future__ import annotations

import asyncio
import sys


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    try:
        while data := await reader.read(65536):
            await asyncio.sleep(delay)
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()


async def serve(listen: int, target: int, delay: float) -> None:
    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        server_r, server_w = await asyncio.open_connection("127.0.0.1", target)
        await asyncio.gather(pipe(client_r, server_w, delay), pipe(server_r, client_w, delay), return_exceptions=True)

    server = await asyncio.start_server(handle, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: delay_proxy.py LISTEN_PORT TARGET_PORT DELAY_MS")
    asyncio.run(serve(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]) / 1000))
