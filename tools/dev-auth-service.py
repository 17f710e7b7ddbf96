#!/usr/bin/env python3
"""A development stand-in for auth-service, for `make run` only: an OAuth2 token endpoint and the credentials API
on loopback, serving the fake credentials in dev/credentials.json. Never use it with real credentials.

As the contract says, a credential with a "tenant" is served only to requests whose Tenant header names it, one
without only to requests without the header; any other is 404, as an unknown id."""
import argparse
import json
import pathlib
import secrets
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = pathlib.Path(__file__).resolve().parent.parent
TOKEN = secrets.token_urlsafe(24)


class Handler(BaseHTTPRequestHandler):
    credentials = {}

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        form = self.rfile.read(length).decode()
        if self.path != "/oauth2/token" or "grant_type=client_credentials" not in form:
            return self.answer(400, {"error": "unsupported_grant_type"})
        self.answer(200, {"access_token": TOKEN, "token_type": "bearer", "expires_in": 3600})

    def do_GET(self):
        prefix = "/api/v1/credentials/"
        if not self.path.startswith(prefix):
            return self.answer(404, {"error": "not found"})
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            return self.answer(401, {"error": "invalid token"})
        credential_id = self.path[len(prefix):]
        credential = dict(self.credentials.get(credential_id) or {})
        tenant = credential.pop("tenant", None)
        if not credential or tenant != self.headers.get("Tenant"):
            return self.answer(404, {"error": f"credential {credential_id} not found"})
        self.answer(200, {"id": credential_id, **credential})

    def log_message(self, format, *args):  # keep `make run` output for the provisioner
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8081)
    parser.add_argument("--credentials", default=str(ROOT / "dev" / "credentials.json"))
    arguments = parser.parse_args()
    Handler.credentials = json.loads(pathlib.Path(arguments.credentials).read_text())
    server = ThreadingHTTPServer(("127.0.0.1", arguments.port), Handler)
    print(f"dev auth-service on http://127.0.0.1:{arguments.port} with credentials {', '.join(Handler.credentials)}")
    server.serve_forever()


if __name__ == "__main__":
    main()
