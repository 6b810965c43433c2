//! `uwsgi_pass suwsgi://` with `uwsgi_ssl_*`, beside nginx: a uwsgi
//! responder behind TLS (Python's `ssl`, a certificate from a test CA)
//! answers the `A` var it got; with the CA trusted and the right
//! `uwsgi_ssl_name` both servers pass the answer on, with a name the
//! certificate does not hold both answer 502.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::common::tls::{Alg, Ca};
use crate::common::*;

const RESPONDER: &str = r#"
import socket, ssl, sys, threading
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", int(sys.argv[3]))); srv.listen(16)
def exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c: raise EOFError
        b += c
    return b
def serve(c):
    try:
        s = ctx.wrap_socket(c, server_side=True)
        h = exact(s, 4)
        size = h[1] | h[2] << 8
        v = exact(s, size); i = 0; env = {}
        while i + 2 <= size:
            n = v[i] | v[i + 1] << 8; k = v[i + 2:i + 2 + n]; i += 2 + n
            n = v[i] | v[i + 1] << 8; env[k] = v[i + 2:i + 2 + n]; i += 2 + n
        body = b"A=" + env.get(b"A", b"-") + b"\n"
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        s.close()
    except Exception:
        c.close()
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;

struct Responder(Child);

impl Drop for Responder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn suwsgi_speaks_tls_to_the_application_as_nginx_does() {
    let dir = TempDir::new("suwsgi");
    let ca = Ca::new();
    let (crt, key) = ca.leaf(&["app.test"], Alg::Ecdsa).write(dir.path(), "app");
    let ca_pem = dir.write("ca.pem", ca.pem());
    let script = dir.write("responder.py", RESPONDER);
    let port = free_port();
    let _app = Responder(
        Command::new("/usr/bin/python3")
            .arg(&script)
            .arg(&crt)
            .arg(&key)
            .arg(port.to_string())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    assert!(
        wait_port(port, Duration::from_secs(10)),
        "responder did not start"
    );
    let loc = |path: &str, name: &str| {
        format!(
            "    location {path} {{\n      uwsgi_param A {path};\n      \
             uwsgi_pass suwsgi://127.0.0.1:{port};\n      uwsgi_ssl_verify on;\n      \
             uwsgi_ssl_trusted_certificate {ca};\n      uwsgi_ssl_name {name};\n    }}\n",
            ca = ca_pem.display()
        )
    };
    let conf = format!(
        "  server {{\n    listen 127.0.0.1:{{PORT}};\n{}{}  }}",
        loc("/good", "app.test"),
        loc("/wrong", "other.test")
    );
    let p = Server::start(&one_worker_conf(&conf));
    let n = Nginx::start(&conf).expect("nginx is not installed");
    for (who, port) in [("porter", p.port), ("nginx", n.port)] {
        let r = get(port, "/good");
        assert_eq!(r.status, 200, "{who}: {}", p.read("logs/error.log"));
        assert_eq!(r.text(), "A=/good\n", "{who}");
        assert_eq!(get(port, "/wrong").status, 502, "{who}");
    }
    // The log thread writes the line: wait for it.
    let log = p.wait_log(
        "logs/error.log",
        "upstream: \"suwsgi://127.0.0.1:",
        Duration::from_secs(5),
    );
    assert!(log.contains("upstream: \"suwsgi://127.0.0.1:"), "{log}");
}
