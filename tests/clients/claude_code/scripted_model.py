#!/usr/bin/env python3
"""A scripted model on loopback speaking the Anthropic Messages API (with
streaming SSE), for driving the real Claude Code CLI headless against a
Corkboard gateway. No model runs: each answer follows from the
conversation so far.

Script (the tool names are Claude Code's for an MCP server named
"corkboard"):
1. no tool result yet: call add_comment on SCRIPT_ISSUE;
2. a result saying the call awaits a person's approval: write the handle
   to STATE_DIR/handle, wait until STATE_DIR/approved exists (the test
   approves through the admin API meanwhile), then call collect_approval
   with the handle;
3. a result saying the approved call ran: answer "DONE: the approved call
   ran once" and end the turn.
Requests from Claude Code that offer no corkboard tools (titles, quota
checks) get a short text answer. Every request is logged (one JSON line
each: path, tools offered, the last tool result's first 200 characters) to
STATE_DIR/requests.log; never any credential.

Usage: scripted_model.py PORT_FILE   (listens on a free port, writes it)
Environment: STATE_DIR, SCRIPT_ISSUE.
"""
import json
import os
import re
import sys
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STATE_DIR = os.environ["STATE_DIR"]
ISSUE = os.environ["SCRIPT_ISSUE"]
PREFIX = "mcp__corkboard__"


def log(entry):
    with open(os.path.join(STATE_DIR, "requests.log"), "a") as f:
        f.write(json.dumps(entry) + "\n")


def result_text(block):
    content = block.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(c.get("text", "") for c in content if isinstance(c, dict))
    return ""


def last_tool_result(messages):
    for message in reversed(messages):
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, list):
            continue
        for block in reversed(content):
            if isinstance(block, dict) and block.get("type") == "tool_result":
                return result_text(block)
    return None


def decide(body):
    """(kind, payload): ("tool", (name, input)) or ("text", str)."""
    tools = [t.get("name", "") for t in body.get("tools") or []]
    if PREFIX + "add_comment" not in tools:
        return "text", "ok"
    result = last_tool_result(body.get("messages") or [])
    if result is None:
        return "tool", (PREFIX + "add_comment", {"issue_id": ISSUE, "body": "from claude code"})
    if "awaits a person's approval" in result:
        handle = re.search(r"apr_[0-9A-Z]{26}", result).group(0)
        with open(os.path.join(STATE_DIR, "handle"), "w") as f:
            f.write(handle)
        deadline = time.time() + 120
        while not os.path.exists(os.path.join(STATE_DIR, "approved")):
            if time.time() > deadline:
                return "text", "FAILED: nobody approved"
            time.sleep(0.05)
        return "tool", (PREFIX + "collect_approval", {"handle": handle})
    # Claude Code hands the model the structured result when there is one.
    if "ran once" in result or '"status":"ran"' in result:
        return "text", "DONE: the approved call ran once"
    return "text", "UNEXPECTED: " + result[:300]


def sse(event, data):
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply_json(self, status, value):
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.reply_json(200, {})

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        path = self.path.split("?")[0]
        if path.endswith("/count_tokens"):
            return self.reply_json(200, {"input_tokens": 10})
        if not path.endswith("/v1/messages"):
            return self.reply_json(404, {"type": "error", "error": {"type": "not_found_error", "message": path}})
        kind, payload = decide(body)
        log({
            "path": path,
            "stream": bool(body.get("stream")),
            "tools": [t.get("name") for t in body.get("tools") or [] if t.get("name", "").startswith(PREFIX)],
            "last_result": (last_tool_result(body.get("messages") or []) or "")[:200],
            "answer": kind,
            "payload": payload[0] if kind == "tool" else payload[:200],
        })
        model = body.get("model", "claude-scripted")
        message_id = "msg_" + uuid.uuid4().hex[:24]
        if kind == "tool":
            name, tool_input = payload
            block = {"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:24], "name": name, "input": tool_input}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": payload}
            stop = "end_turn"
        usage = {"input_tokens": 10, "output_tokens": 10}
        if not body.get("stream"):
            return self.reply_json(200, {
                "id": message_id, "type": "message", "role": "assistant", "model": model,
                "content": [block], "stop_reason": stop, "stop_sequence": None, "usage": usage,
            })
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        out = [sse("message_start", {"type": "message_start", "message": {
            "id": message_id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}})]
        if kind == "tool":
            out.append(sse("content_block_start", {"type": "content_block_start", "index": 0,
                "content_block": {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}))
            out.append(sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}}))
        else:
            out.append(sse("content_block_start", {"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}))
            out.append(sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": block["text"]}}))
        out.append(sse("content_block_stop", {"type": "content_block_stop", "index": 0}))
        out.append(sse("message_delta", {"type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 10}}))
        out.append(sse("message_stop", {"type": "message_stop"}))
        self.wfile.write(b"".join(out))
        self.wfile.flush()
        self.close_connection = True


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(sys.argv[1], "w") as f:
        f.write(str(server.server_address[1]))
    server.serve_forever()


if __name__ == "__main__":
    main()
