#!/usr/bin/env python3
"""Smoke-test one MCP server over HTTP: initialize, notifications/initialized, tools/list and a
tools/call of every tool of the suite with the gate inputs of shared TOOLS.md, checking values.

Standard library only (runs inside any CPython image, or beside a server container with
`docker run --network container:<server> ...`). Exit status 0 when every check passes.

  http-smoke.py --port 8000 --transport streamable-http --path /mcp --suite pulse \
      --reply json --session stateful
  http-smoke.py --port 8000 --transport sse --path /sse --suite weekly
  http-smoke.py ... --suite bench --http-api /api/{tool} --http-api-style plain --concurrent 4
"""

import argparse
import ast
import hashlib
import http.client
import json
import queue
import socket
import sys
import threading
import time
import urllib.parse

PROTOCOL = "2025-06-18"
USERS = [
    {"name": "alice", "age": 30, "city": "new york"},
    {"name": "bob", "age": 25, "city": "san francisco"},
    {"name": "charlie", "age": 35, "city": "london"},
    {"name": "diana", "age": 28, "city": "tokyo"},
    {"name": "eve", "age": 32, "city": "paris"},
]
VOLATILE = {"timestamp_ns", "compute_time_ns", "processing_time_ns", "actual_ms", "overhead_ms"}


def _bench_transform():
    upper = {"users": [{k: v.upper() if isinstance(v, str) else v for k, v in u.items()} for u in USERS]}
    return {
        "transformed": upper,
        "stats": {
            "strings_transformed": 10,
            "numbers_found": 5,
            "number_sum": 150.0,
            "json_size_bytes": len(json.dumps(upper).encode("utf-8")),
        },
    }


ERROR = object()
# suite -> [(tool, arguments, expected value or ERROR)]
GATE = {
    "weekly": [
        ("add_numbers", {"a": 17, "b": 25}, 42),
        ("echo", {"message": "hello"}, "hello"),
        ("word_count", {"text": "the quick brown fox"}, 4),
    ],
    "pulse": [
        ("calculate_tax", {"amount": 100}, 8.0),
        ("calculate_tax", {"amount": -1}, ERROR),
        ("checksum", {"values": [1, 2, 3]}, {"count": 3, "sum": 6, "sha256": hashlib.sha256(b"1,2,3").hexdigest()}),
        ("checksum", {"values": []}, ERROR),
    ],
    "bench": [
        ("echo", {"message": "hello benchmark"}, {"message": "hello benchmark"}),
        ("fibonacci", {"n": 25}, {"n": 25, "result": 75025}),
        ("json_transform", {"data": {"users": USERS}}, _bench_transform()),
        ("async_sleep", {"duration_ms": 50}, {"requested_ms": 50}),
        ("payload_echo", {"payload": "x" * 10000}, {"payload": "x" * 10000, "size_bytes": 10000}),
    ],
}


def strip_volatile(value):
    if isinstance(value, dict):
        return {k: strip_volatile(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [strip_volatile(v) for v in value]
    return value


def tool_value(result):
    """The tool's value: structuredContent (unwrapping a lone `result`), else the text content."""
    if result.get("isError"):
        return ERROR
    sc = result.get("structuredContent")
    if isinstance(sc, dict):
        return sc["result"] if set(sc) == {"result"} else sc
    texts = [c.get("text", "") for c in result.get("content", []) if c.get("type") == "text"]
    text = texts[0] if len(texts) == 1 else "".join(texts)
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:  # Gradio's MCP text is str(value): a Python literal for dicts (single quotes, True/None)
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text


def same(got, want):
    if want is ERROR or got is ERROR:
        return got is want
    got, want = strip_volatile(got), strip_volatile(want)
    if isinstance(want, dict) and isinstance(got, dict):
        return set(got) == set(want) and all(same(got[k], want[k]) for k in want)
    if isinstance(want, (int, float)) and isinstance(got, (int, float)) and not isinstance(got, bool):
        return got == want
    return got == want


def _lines(stream):
    """Lines of a streamed body as they arrive (read1: no waiting for a full buffer)."""
    buf = b""
    while True:
        try:
            chunk = stream.read1(65536)
        except (OSError, ValueError, AttributeError, http.client.HTTPException):
            chunk = b""
        if not chunk:
            return
        buf += chunk
        while True:
            cut = min((i for i in (buf.find(b"\r"), buf.find(b"\n")) if i >= 0), default=-1)
            if cut < 0 or (buf[cut:cut + 1] == b"\r" and cut + 1 == len(buf)):
                break  # no full line yet (a lone trailing CR may be half of a CRLF)
            line, rest = buf[:cut], buf[cut + 1:]
            if buf[cut:cut + 1] == b"\r" and rest.startswith(b"\n"):
                rest = rest[1:]
            buf = rest
            yield line.decode("utf-8")


def read_events(stream):
    """Yields (event, data, id) from an SSE byte stream (a file-like http.client response)."""
    event, data, eid = "message", [], None
    for line in _lines(stream):
        if line == "":
            if data or eid is not None:
                yield event, "\n".join(data), eid
            event, data, eid = "message", [], None
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                event = value
            elif field == "data":
                data.append(value)
            elif field == "id":
                eid = value


class Fail(Exception):
    pass


class Streamable:
    def __init__(self, host, port, path, reply, session):
        self.host, self.port, self.path = host, port, path
        self.reply, self.session = reply, session
        self.session_id = None
        self.protocol = None

    def post(self, message, expect_reply=True):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        if self.protocol:
            headers["MCP-Protocol-Version"] = self.protocol
        conn.request("POST", self.path, json.dumps(message), headers)
        resp = conn.getresponse()
        try:
            if not expect_reply:
                resp.read()
                if resp.status != 202:
                    raise Fail(f"notification answered {resp.status}, want 202")
                return None, resp
            if resp.status != 200:
                raise Fail(f"{message['method']} answered HTTP {resp.status}: {resp.read()[:300]!r}")
            ctype = resp.getheader("Content-Type", "").split(";")[0].strip()
            if self.reply and ctype != {"json": "application/json", "sse": "text/event-stream"}[self.reply]:
                raise Fail(f"{message['method']}: reply Content-Type {ctype}, want {self.reply} replies")
            if ctype == "application/json":
                return json.loads(resp.read()), resp
            for _event, data, _eid in read_events(resp):
                if not data.strip():
                    continue  # priming event
                msg = json.loads(data)
                if msg.get("id") == message["id"]:
                    return msg, resp
            raise Fail(f"{message['method']}: SSE reply stream ended without the response")
        finally:
            conn.close()

    def start(self):
        msg, resp = self.post(
            {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "http-smoke", "version": "1"}}}
        )
        sid = resp.getheader("Mcp-Session-Id")
        if self.session == "stateful" and not sid:
            raise Fail("stateful server sent no Mcp-Session-Id on initialize")
        if self.session == "stateless" and sid:
            raise Fail(f"stateless server sent Mcp-Session-Id {sid}")
        self.session_id = sid
        self.protocol = msg["result"]["protocolVersion"]
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, expect_reply=False)
        return msg

    def request(self, rid, method, params):
        return self.post({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})[0]

    def close(self):
        pass


class LegacySse:
    def __init__(self, host, port, path):
        self.host, self.port, self.path = host, port, path
        self.waiting = {}
        self.lock = threading.Lock()
        self.endpoint = queue.Queue()
        self.conn = http.client.HTTPConnection(host, port, timeout=60)
        self.conn.request("GET", path, headers={"Accept": "text/event-stream"})
        self.sock = self.conn.sock
        resp = self.conn.getresponse()
        if resp.status != 200:
            raise Fail(f"GET {path} answered {resp.status}")
        threading.Thread(target=self._pump, args=(resp,), daemon=True).start()
        try:
            ep = self.endpoint.get(timeout=30)
        except queue.Empty:
            raise Fail("no endpoint event on the SSE stream") from None
        base = f"http://{host}:{port}{path}"
        self.post_url = urllib.parse.urlsplit(urllib.parse.urljoin(base, ep))

    def _pump(self, resp):
        try:
            for event, data, _eid in read_events(resp):
                if event == "endpoint":
                    self.endpoint.put(data.strip())
                elif event == "message" and data.strip():
                    msg = json.loads(data)
                    with self.lock:
                        q = self.waiting.get(msg.get("id"))
                    if q:
                        q.put(msg)
        except (OSError, ValueError, http.client.HTTPException):
            pass  # the stream ended (or was shut down by close())

    def send(self, message):
        target = self.post_url.path + (f"?{self.post_url.query}" if self.post_url.query else "")
        conn = http.client.HTTPConnection(self.post_url.hostname, self.post_url.port, timeout=60)
        conn.request("POST", target, json.dumps(message), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        body = resp.read()
        conn.close()
        if resp.status not in (200, 202):
            raise Fail(f"POST {target} answered {resp.status}: {body[:200]!r}")

    def request(self, rid, method, params):
        q = queue.Queue()
        with self.lock:
            self.waiting[rid] = q
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        try:
            return q.get(timeout=60)
        except queue.Empty:
            raise Fail(f"{method} (id {rid}): no response on the SSE stream") from None
        finally:
            with self.lock:
                self.waiting.pop(rid, None)

    def start(self):
        msg = self.request(0, "initialize", {
            "protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "http-smoke", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return msg

    def close(self):
        # shutdown, not close: close would wait for the pump thread's blocked read
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def rest_call(host, port, template, style, tool, arguments):
    path = template.replace("{tool}", tool)
    conn = http.client.HTTPConnection(host, port, timeout=60)
    try:
        if style == "plain":
            conn.request("POST", path, json.dumps(arguments), {"Content-Type": "application/json"})
            resp = conn.getresponse()
            body = resp.read()
            if resp.status != 200:
                raise Fail(f"POST {path} answered {resp.status}: {body[:200]!r}")
            return json.loads(body)
        (only,) = arguments.values()
        conn.request("POST", path, json.dumps({"data": [only]}), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        body = resp.read()
        if resp.status != 200:
            raise Fail(f"POST {path} answered {resp.status}: {body[:200]!r}")
        event_id = json.loads(body)["event_id"]
        conn.request("GET", f"{path}/{event_id}")
        resp = conn.getresponse()
        for event, data, _eid in read_events(resp):
            if event == "complete":
                return json.loads(data)[0]
            if event == "error":
                raise Fail(f"GET {path}/{event_id}: error event {data[:200]!r}")
        raise Fail(f"GET {path}/{event_id}: stream ended without a complete event")
    finally:
        conn.close()


def wait_port(host, port, seconds):
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection((host, port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise Fail(f"nothing listens on {host}:{port} after {seconds} s") from None
            time.sleep(0.1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--transport", choices=["streamable-http", "sse"], required=True)
    ap.add_argument("--path", required=True)
    ap.add_argument("--suite", choices=sorted(GATE), required=True)
    ap.add_argument("--reply", choices=["json", "sse"], help="streamable: the reply mode to insist on")
    ap.add_argument("--session", choices=["stateful", "stateless"], help="streamable: the session mode to insist on")
    ap.add_argument("--http-api", help="REST route template, e.g. /api/{tool}")
    ap.add_argument("--http-api-style", choices=["plain", "gradio"], default="plain")
    ap.add_argument("--concurrent", type=int, default=0, help="also run N concurrent async_sleep/echo calls")
    ap.add_argument("--wait", type=float, default=60, help="seconds to wait for the port")
    a = ap.parse_args()

    label = f"{a.suite} {a.transport}" + (f" {a.reply}/{a.session}" if a.transport == "streamable-http" else "")
    try:
        wait_port(a.host, a.port, a.wait)
        t0 = time.monotonic()
        if a.transport == "streamable-http":
            client = Streamable(a.host, a.port, a.path, a.reply, a.session)
        else:
            client = LegacySse(a.host, a.port, a.path)
        init = client.start()
        if "result" not in init:
            raise Fail(f"initialize failed: {init}")
        proto = init["result"]["protocolVersion"]
        listed = client.request(1, "tools/list", {})
        names = sorted(t["name"] for t in listed["result"]["tools"])
        want_names = sorted({t for t, _, _ in GATE[a.suite]})
        if names != want_names:
            raise Fail(f"tools/list names {names}, want {want_names}")
        for i, (tool, args, want) in enumerate(GATE[a.suite]):
            msg = client.request(10 + i, "tools/call", {"name": tool, "arguments": args})
            got = tool_value(msg["result"]) if "result" in msg else ERROR
            if not same(got, want):
                raise Fail(f"{tool}({json.dumps(args)[:80]}) -> {json.dumps(msg)[:400]}, want {want if want is not ERROR else 'an error'}")
        if a.concurrent:
            tool, args = ("async_sleep", {"duration_ms": 50}) if a.suite == "bench" else GATE[a.suite][0][:2]
            errors = []

            def one(rid):
                try:
                    msg = client.request(rid, "tools/call", {"name": tool, "arguments": args})
                    if "result" not in msg or msg["result"].get("isError"):
                        errors.append(msg)
                except Exception as e:  # noqa: BLE001
                    errors.append(repr(e))

            threads = [threading.Thread(target=one, args=(100 + i,)) for i in range(a.concurrent)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if errors:
                raise Fail(f"concurrent calls failed: {errors[:2]}")
        if a.http_api:
            for tool, args, want in GATE[a.suite]:
                if want is ERROR:
                    continue
                got = rest_call(a.host, a.port, a.http_api, a.http_api_style, tool, args)
                if not same(got, want):
                    raise Fail(f"REST {tool} -> {json.dumps(got)[:300]}")
        client.close()
    except (Fail, OSError, KeyError, ValueError) as e:
        print(f"FAIL {label}: {type(e).__name__}: {e}")
        return 1
    extra = (" +concurrent" if a.concurrent else "") + (" +rest" if a.http_api else "")
    print(f"ok   {label} (protocol {proto}, {len(GATE[a.suite])} calls{extra}, {time.monotonic() - t0:.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
