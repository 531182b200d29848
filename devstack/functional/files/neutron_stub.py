"""A tiny stand-in for the Neutron API, enough for servers booted with no network.

Nova Zed calls Neutron for server show, delete, live migration and shelve even
when a server has no ports. Collection GETs answer an empty list, quota GETs
answer -1 (unlimited), single resources answer 404, writes answer 404 too (no
resource exists). Usage: neutron_stub.py HOST PORT
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

QUOTA_KEYS = ("network", "subnet", "port", "router", "floatingip",
              "security_group", "security_group_rule", "rbac_policy", "subnetpool")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _send(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True

    def _not_found(self):
        self._send(404, {"NeutronError": {"type": "NotFound", "message": "dvms neutron stub: nothing here", "detail": ""}})

    def do_GET(self):
        path = self.path.split("?", 1)[0].rstrip("/")
        parts = [p for p in path.split("/") if p]
        if parts and parts[0] == "v2.0":
            parts = parts[1:]
        if not parts:
            self._send(200, {"versions": [{"id": "v2.0", "status": "CURRENT", "links": []}]})
            return
        if parts[0].endswith(".json"):
            parts[0] = parts[0][:-5]
        if parts[0] == "quotas":
            self._send(200, {"quota": {k: -1 for k in QUOTA_KEYS}})
            return
        if len(parts) == 1:
            self._send(200, {parts[0].replace("-", "_"): []})
            return
        self._not_found()

    def _write(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self._not_found()

    do_POST = do_PUT = do_DELETE = _write

    def log_message(self, fmt, *args):
        sys.stdout.write("%s %s\n" % (self.log_date_time_string(), fmt % args))
        sys.stdout.flush()


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    ThreadingHTTPServer((host, port), Handler).serve_forever()


if __name__ == "__main__":
    main()
