//! porter and Debian's nginx (when installed) on one server block, asked
//! the same requests: [`Both`] starts them over a shared docroot and an
//! in-test origin, [`Both::ports`] names each for messages. Without
//! nginx only porter's answer is checked, against what NGINX gives
//! (written in the test).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use super::{one_server_conf, read_response, Nginx, Resp, Server, TempDir};

/// porter and (when installed) nginx on the same settings.
pub struct Both {
    /// porter.
    pub porter: Server,
    /// nginx, when installed.
    pub nginx: Option<Nginx>,
    _docroot: TempDir,
}

impl Both {
    /// `http_extra` at the `http` level, one server named `localhost`
    /// around `server_body`; in both, `{ORIGIN}` is replaced by `origin`
    /// and `{DOCROOT}` by a directory both serve, holding `f.txt`.
    pub fn start(http_extra: &str, server_body: &str, origin: u16) -> Both {
        let docroot = TempDir::new("docroot");
        docroot.write("f.txt", "file");
        let o = origin.to_string();
        let d = docroot.path().display().to_string();
        let (h, s) = (
            http_extra.replace("{ORIGIN}", &o).replace("{DOCROOT}", &d),
            server_body.replace("{ORIGIN}", &o).replace("{DOCROOT}", &d),
        );
        let porter = Server::start(&one_server_conf(&h, &s));
        let nginx = Nginx::start(&format!(
            "{h}\nserver {{\n listen 127.0.0.1:{{PORT}};\n server_name localhost;\n{s}\n}}\n"
        ));
        if nginx.is_none() {
            eprintln!("nginx not installed: checking porter alone");
        }
        Both {
            porter,
            nginx,
            _docroot: docroot,
        }
    }

    /// The ports to ask, each with a name for messages.
    pub fn ports(&self) -> Vec<(&'static str, u16)> {
        let mut v = vec![("porter", self.porter.port)];
        if let Some(n) = &self.nginx {
            v.push(("nginx", n.port));
        }
        v
    }
}

/// The answer to the raw request `raw` (HEAD's without a body).
pub fn ask(port: u16, raw: &str) -> Resp {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(raw.as_bytes()).unwrap();
    let mut buf = Vec::new();
    read_response(&mut s, &mut buf, raw.starts_with("HEAD ")).expect("response")
}

/// `GET path` with `headers` (each line ending in CRLF).
pub fn get_h(port: u16, path: &str, headers: &str) -> Resp {
    ask(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{headers}Connection: close\r\n\r\n"),
    )
}

/// How many header lines named `name` the answer has.
pub fn header_count(r: &Resp, name: &str) -> usize {
    r.headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(name))
        .count()
}

/// The raw bytes of an answer, read until the peer closes.
pub fn raw_answer(port: u16, req: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut v = Vec::new();
    let _ = s.read_to_end(&mut v);
    String::from_utf8_lossy(&v).into_owned()
}
