"""A small SCGI server (stdlib only) for tests/scgi.rs: reads the
netstring of headers and the body (CONTENT_LENGTH bytes) and answers with
the WSGI app of wsgi_app.py as CGI output (`Status:` and headers, then
the body). A few paths misbehave on purpose, for porter's handling of bad
answers. Usage: scgi_server.py PORT|unix:PATH"""

import os
import socket
import socketserver
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wsgi_app import app  # noqa: E402

# Answers that are not valid SCGI responses, by path.
BAD = {
    '/bad/header': b'Content-Type: text/plain\r\nBad Header\r\n\r\nx',
    '/bad/status': b'Status: abc\r\nContent-Type: text/plain\r\n\r\nx',
    '/bad/nothing': b'',
    '/bad/half-head': b'Status: 200 OK\r\nContent-Ty',
    '/bad/too-big': b'X-Big: ' + b'a' * 10000 + b'\r\n\r\n',
    '/bad/short': b'Status: 200 OK\r\nContent-Length: 100\r\n\r\nonly ten..',
}


def read_netstring(f):
    digits = b''
    while True:
        c = f.read(1)
        if not c:
            raise EOFError
        if c == b':':
            break
        digits += c
    data = f.read(int(digits))
    if f.read(1) != b',':
        raise ValueError('bad netstring')
    parts = data.split(b'\0')
    return {parts[i].decode('latin-1'): parts[i + 1].decode('latin-1')
            for i in range(0, len(parts) - 1, 2)}


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        try:
            env = read_netstring(self.rfile)
        except (EOFError, ValueError):
            return
        path = env.get('DOCUMENT_URI', '/')
        if path in BAD:
            self.wfile.write(BAD[path])
            self.wfile.flush()
            if path == '/bad/half-head':
                time.sleep(0.2)
            return
        env['wsgi.input'] = self.rfile
        env['wsgi.url_scheme'] = 'http'
        head = {}

        def start_response(status, headers, exc_info=None):
            head['status'] = status
            head['headers'] = headers

        result = app(env, start_response)
        out = 'Status: %s\r\n' % head['status']
        out += ''.join('%s: %s\r\n' % h for h in head['headers']) + '\r\n'
        self.wfile.write(out.encode('latin-1'))
        for piece in result:
            self.wfile.write(piece)
        self.wfile.flush()


class TCP(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class Unix(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True


def main():
    where = sys.argv[1]
    if where.startswith('unix:'):
        path = where[5:]
        server = Unix(path, Handler)
        os.chmod(path, 0o666)
    else:
        server = TCP(('127.0.0.1', int(where)), Handler)
    server.serve_forever()


if __name__ == '__main__':
    main()
