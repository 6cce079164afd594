"""A real OTLP/HTTP receiver for tests: oteltest's HttpSink (the server
behind its `otelsink --http` command), on a free port instead of 4318.

Prints `LISTENING <port>` once it accepts connections, then one line per
exported span: `SPAN <json>` with the span's name, hex trace/span ids,
service name and attributes (values as strings), and one line per export
request: `DUMP <json string>` with the text form of the whole request, so
that a test can search everything that was received. Runs until stdin
closes (the test ends) or it is killed.
"""

import json
import logging
import sys
import threading
import time

from oteltest.sink import HttpSink
from oteltest.sink.handler import RequestHandler


def value_text(value):
    kind = value.WhichOneof("value")
    return "" if kind is None else str(getattr(value, kind))


class Printer(RequestHandler):
    def __init__(self):
        self.lock = threading.Lock()

    def emit(self, line):
        with self.lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def handle_logs(self, request, headers):
        pass

    def handle_metrics(self, request, headers):
        pass

    def handle_trace(self, request, headers):
        self.emit("DUMP " + json.dumps(str(request)))
        content_type = next(
            (v for k, v in headers.items() if k.lower() == "content-type"), ""
        )
        for resource_spans in request.resource_spans:
            service = ""
            for attr in resource_spans.resource.attributes:
                if attr.key == "service.name":
                    service = value_text(attr.value)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self.emit("SPAN " + json.dumps({
                        "name": span.name,
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex(),
                        "service": service,
                        "content_type": content_type,
                        "attributes": {a.key: value_text(a.value) for a in span.attributes},
                    }))


def main():
    logging.basicConfig(level=logging.WARNING)
    sink = HttpSink(Printer(), logging.getLogger("otelsink"), port=0)
    sink.start()
    deadline = time.monotonic() + 30
    while sink.httpd is None:
        if time.monotonic() > deadline:
            sys.exit("the sink did not start")
        time.sleep(0.02)
    print("LISTENING %d" % sink.httpd.server_address[1], flush=True)
    sys.stdin.read()
    sink.httpd.shutdown()


if __name__ == "__main__":
    main()
