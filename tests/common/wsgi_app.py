"""The WSGI app tests/uwsgi.rs serves through Debian's uWSGI and
tests/scgi.rs through tests/common/scgi_server.py: forms, cookies,
statuses and headers set by the app, the CGI variables it was given, a
fresh token per call (for the caches), an
upload read as a stream, a streamed download, a slow answer. Stdlib only."""

import hashlib
import time
import urllib.parse

# The variables porter and nginx send (those that do not differ by server:
# ports and software are left out).
KEYS = ['QUERY_STRING', 'REQUEST_METHOD', 'CONTENT_TYPE', 'CONTENT_LENGTH',
        'REQUEST_URI', 'PATH_INFO', 'DOCUMENT_URI', 'DOCUMENT_ROOT',
        'SERVER_PROTOCOL', 'REQUEST_SCHEME', 'HTTPS', 'REMOTE_ADDR',
        'SERVER_NAME', 'SCGI', 'HTTP_HOST', 'HTTP_X_CUSTOM', 'HTTP_COOKIE',
        'HTTP_ACCEPT', 'CUSTOM', 'EMPTY']


def body_of(environ):
    n = int(environ.get('CONTENT_LENGTH') or 0)
    return environ['wsgi.input'].read(n) if n else b''


def app(environ, start_response):
    path = environ.get('PATH_INFO') or environ.get('DOCUMENT_URI') or '/'
    query = urllib.parse.parse_qs(environ.get('QUERY_STRING', ''))
    q = {k: v[0] for k, v in query.items()}
    text = [('Content-Type', 'text/plain; charset=utf-8')]

    if path == '/form':
        out = ['method=' + environ['REQUEST_METHOD']]
        out += ['get %s=%s' % kv for kv in sorted(q.items())]
        form = urllib.parse.parse_qs(body_of(environ).decode())
        out += ['post %s=%s' % (k, v[0]) for k, v in sorted(form.items())]
        cookies = environ.get('HTTP_COOKIE', '')
        out += ['cookie ' + c.strip() for c in sorted(cookies.split(';')) if c.strip()]
        start_response('200 OK', text + [
            ('X-App', 'form'),
            ('Set-Cookie', 'seen=yes; Path=/; HttpOnly'),
            ('Set-Cookie', 'again=1; Path=/'),
        ])
        return [('\n'.join(out) + '\n').encode()]

    if path == '/token':
        # A new body on each call: a cached answer repeats an old one.
        token = ('%d\n' % time.time_ns()).encode()
        start_response('200 OK', text + [('Content-Length', str(len(token)))])
        return [token]

    if path == '/params':
        out = ['%s=%s' % (k, environ.get(k, '(unset)')) for k in KEYS]
        return_body = ('\n'.join(out) + '\n').encode()
        start_response('200 OK', text + [('Content-Length', str(len(return_body)))])
        return [return_body]

    if path == '/status':
        code = q.get('code', '200')
        reason = q.get('reason', {'201': 'Created', '404': 'Not Found',
                                  '302': 'Found', '503': 'Service Unavailable',
                                  '204': 'No Content'}.get(code, 'OK'))
        headers = [('X-App', 'status')]
        if 'location' in q:
            headers.append(('Location', q['location']))
        if code == '204':
            start_response(code + ' ' + reason, headers)
            return [b'']
        start_response(code + ' ' + reason, text + headers)
        return [('status %s\n' % code).encode()]

    if path == '/upload':
        h = hashlib.sha256()
        n = 0
        left = int(environ.get('CONTENT_LENGTH') or 0)
        inp = environ['wsgi.input']
        while left > 0:
            chunk = inp.read(min(left, 1 << 16))
            if not chunk:
                break
            n += len(chunk)
            left -= len(chunk)
            h.update(chunk)
        start_response('200 OK', text)
        return [('bytes=%d sha256=%s\n' % (n, h.hexdigest())).encode()]

    if path == '/download':
        mb = int(q.get('mb', '1'))
        block = b'0123456789abcdef' * 65536

        def stream():
            for _ in range(mb):
                yield block
        start_response('200 OK', [('Content-Type', 'application/octet-stream')])
        return stream()

    if path == '/slow':
        time.sleep(float(q.get('s', '3')))
        start_response('200 OK', text)
        return [b'late\n']

    start_response('404 Not Found', text)
    return [b'no such page\n']


application = app
