//! `sub_filter` on the real binary beside Debian's nginx (skipped, saying
//! so, without `/usr/sbin/nginx`): strings replaced in a static file and
//! in a proxied body (a match spanning the proxy's pieces), case-
//! insensitive, several strings in order, `sub_filter_once off`,
//! variables, `sub_filter_types`, `sub_filter_last_modified`, HEAD, and
//! the headers that change with the body (`Content-Length`, `ETag`,
//! `Last-Modified`).

use crate::common;

use crate::common::origin::{Origin, Reply};
use crate::common::{one_worker_conf, Nginx, Resp, Server, TempDir};

fn req(port: u16, method: &str, path: &str) -> Resp {
    let r = format!("{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    std::io::Write::write_all(&mut s, r.as_bytes()).unwrap();
    let mut buf = Vec::new();
    common::read_response(&mut s, &mut buf, method == "HEAD").unwrap()
}

fn page() -> String {
    let mut p = String::from("<html><head><title>Site</title></head><BODY>\n");
    for i in 0..3000 {
        p.push_str(&format!(
            "<p>line {i}: nginx serves http://origin.example/ here</p>\n"
        ));
    }
    p.push_str("</body></html>\n");
    p
}

fn conf(root: &std::path::Path, origin: u16) -> String {
    format!(
        "types {{ text/html html; text/css css; }}\n\
         server {{\n  listen 127.0.0.1:{{PORT}};\n  root {root};\n\
           sub_filter '</body>' '<script src=\"/a.js\"></script></body>';\n\
           sub_filter 'http://origin.example/' 'https://$host/';\n\
           location /all/ {{ alias {root}/; sub_filter NGINX server; sub_filter_once off; }}\n\
           location /css/ {{ alias {root}/; sub_filter_types text/css; sub_filter 'p{{' 'q{{'; }}\n\
           location /lm/ {{ alias {root}/; sub_filter_last_modified on; }}\n\
           location /p/ {{ proxy_pass http://127.0.0.1:{origin}/; }}\n\
         }}",
        root = root.display()
    )
}

/// The header lines the filter changes.
type Changed = Vec<(&'static str, Option<String>)>;

/// Status, body and the headers the filter changes.
fn seen(r: &Resp) -> (u16, Vec<u8>, Changed) {
    let h = [
        "content-type",
        "content-length",
        "transfer-encoding",
        "last-modified",
        "etag",
    ]
    .into_iter()
    .map(|n| (n, r.header(n).map(str::to_string)))
    .collect();
    (r.status, r.body.clone(), h)
}

#[test]
fn strings_are_replaced_as_nginx_replaces_them() {
    let root = TempDir::new("subf");
    root.write("index.html", page());
    root.write("a.css", "p{color:red} p{x}\n");
    let body = page().into_bytes();
    let origin = Origin::start(move |_| {
        let mut r = Reply::ok(&body).paced(1000, std::time::Duration::ZERO);
        r.headers = vec![("Content-Type".into(), "text/html".into())];
        r
    });
    let http = conf(root.path(), origin.port);
    let srv = Server::start(&one_worker_conf(&http));
    let r = req(srv.port, "GET", "/index.html");
    let text = r.text();
    assert!(
        text.ends_with("<script src=\"/a.js\"></script></body></html>\n"),
        "{}",
        &text[text.len() - 80..]
    );
    assert_eq!(text.matches("https://x/").count(), 1);
    assert_eq!(r.header("content-length"), None);
    assert_eq!(r.header("etag"), None);
    assert_eq!(r.header("last-modified"), None);
    let all = req(srv.port, "GET", "/all/index.html").text();
    assert_eq!(all.matches("server serves").count(), 3000);
    let Some(ngx) = Nginx::start(&http) else {
        eprintln!("skipping the comparison: /usr/sbin/nginx is not installed");
        return;
    };
    for (method, path) in [
        ("GET", "/index.html"),
        ("GET", "/all/index.html"),
        ("GET", "/css/a.css"),
        ("GET", "/lm/index.html"),
        ("GET", "/p/index.html"),
        ("HEAD", "/index.html"),
        ("GET", "/a.css"),
    ] {
        let (p, n) = (req(srv.port, method, path), req(ngx.port, method, path));
        assert_eq!(seen(&p), seen(&n), "{method} {path}");
    }
}
