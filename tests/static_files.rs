//! Static serving over real sockets: headers, types, index, locations,
//! root/alias, error_page, add_header, return, try_files, conditionals,
//! ranges, keep-alive and pipelining, sendfile on and off.

use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::differential::{self, req, Cases};
use crate::common::*;

fn docroot() -> TempDir {
    let d = TempDir::new("root");
    d.write("index.html", "<h1>home</h1>\n");
    d.write("a.txt", "abcdefghijklmnopqrstuvwxyz\n");
    d.write("style.CSS", "body{}\n");
    d.write("noext", "x");
    d.write("dir/index.html", "dir index\n");
    d.write("empty/.keep", "");
    d.write("sub/page.html", "sub page\n");
    d.write("alias/target.txt", "aliased\n");
    d.write("errors/404.html", "custom not found\n");
    d.write("space name.txt", "spaced\n");
    d
}

fn start(root: &TempDir, extra: &str) -> Server {
    Server::start(&http_conf(&format!(
        "    root {};\n{extra}",
        root.path().display()
    )))
}

#[test]
fn get_and_head_send_nginx_headers() {
    let root = docroot();
    let s = start(&root, "");
    let r = get(s.port, "/a.txt");
    assert_eq!(r.status_line, "HTTP/1.1 200 OK");
    assert_eq!(r.text(), "abcdefghijklmnopqrstuvwxyz\n");
    assert_eq!(r.header("Content-Type"), Some("text/plain"));
    assert_eq!(r.header("Content-Length"), Some("27"));
    assert_eq!(r.header("Accept-Ranges"), Some("bytes"));
    assert_eq!(
        r.header("Server"),
        Some(concat!("porter/", env!("CARGO_PKG_VERSION")))
    );
    assert!(r.header("Date").unwrap().ends_with(" GMT"));
    let meta = std::fs::metadata(root.path().join("a.txt")).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        r.header("ETag").unwrap(),
        format!("\"{:x}-{:x}\"", meta.mtime(), meta.size())
    );
    assert!(r.header("Last-Modified").unwrap().ends_with(" GMT"));
    let names: Vec<&str> = r.headers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "Server",
            "Date",
            "Content-Type",
            "Content-Length",
            "Last-Modified",
            "Connection",
            "ETag",
            "Accept-Ranges"
        ]
    );
    let h = raw(
        s.port,
        b"HEAD /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(h.status, 200);
    assert_eq!(h.header("Content-Length"), Some("27"));
    assert!(h.body.is_empty());
}

#[test]
fn content_types_from_types_and_defaults() {
    let root = docroot();
    let s = start(&root, "");
    assert_eq!(
        get(s.port, "/style.CSS").header("Content-Type"),
        Some("text/css")
    );
    assert_eq!(
        get(s.port, "/noext").header("Content-Type"),
        Some("application/octet-stream")
    );
    assert_eq!(get(s.port, "/").header("Content-Type"), Some("text/html"));
    // Without a types block NGINX's built-in map applies (html, gif, jpg).
    let s2 = Server::start(&format!(
        "daemon off; pid {{PREFIX}}/p.pid; error_log {{PREFIX}}/logs/e.log; events {{}}\nhttp {{ access_log off; server {{ listen 127.0.0.1:{{PORT}}; root {}; }} }}",
        root.path().display()
    ));
    assert_eq!(
        get(s2.port, "/index.html").header("Content-Type"),
        Some("text/html")
    );
    assert_eq!(
        get(s2.port, "/style.CSS").header("Content-Type"),
        Some("text/plain")
    );
}

#[test]
fn index_directories_and_missing_files() {
    let root = docroot();
    let s = start(&root, "");
    assert_eq!(get(s.port, "/").text(), "<h1>home</h1>\n");
    assert_eq!(get(s.port, "/dir/").text(), "dir index\n");
    let r = get(s.port, "/dir");
    assert_eq!(r.status, 301);
    assert_eq!(
        r.header("Location"),
        Some(format!("http://localhost:{}/dir/", s.port).as_str())
    );
    let r = get(s.port, "/empty/");
    assert_eq!(r.status, 403);
    assert!(r.text().contains("<title>403 Forbidden</title>"));
    assert_eq!(get(s.port, "/nodir/").status, 404);
    assert_eq!(get(s.port, "/missing.txt").status, 404);
    assert_eq!(get(s.port, "/space%20name.txt").text(), "spaced\n");
    // Each worker writes its own lines: wait for the last request's.
    s.wait_log("logs/error.log", "is forbidden", Duration::from_secs(5));
    let log = s.wait_log("logs/error.log", "missing.txt", Duration::from_secs(5));
    assert!(
        log.contains(&format!(
            "directory index of \"{}/empty/\" is forbidden",
            root.path().display()
        )),
        "{log}"
    );
    assert!(
        log.contains("open() \"")
            && log.contains("/missing.txt\" failed (2: No such file or directory)"),
        "{log}"
    );
}

#[test]
fn methods() {
    let root = docroot();
    let s = start(&root, "");
    let post = |p: &str| {
        raw(
            s.port,
            format!(
                "POST {p} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
            .as_bytes(),
        )
    };
    assert_eq!(post("/a.txt").status, 405);
    assert_eq!(post("/a.txt").status_line, "HTTP/1.1 405 Not Allowed");
    assert_eq!(post("/missing").status, 404);
    for m in ["DELETE", "PUT", "OPTIONS", "PATCH", "FOO"] {
        let r = raw(
            s.port,
            format!("{m} /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        );
        assert_eq!(r.status, 405, "{m}");
    }
}

#[test]
fn uri_normalisation_never_leaves_the_root() {
    let root = docroot();
    std::fs::write(
        root.path()
            .parent()
            .unwrap()
            .join(format!("secret-{}", std::process::id())),
        "secret",
    )
    .unwrap();
    let s = start(&root, "");
    assert_eq!(get(s.port, "/sub/../a.txt").status, 200);
    assert_eq!(get(s.port, "//sub///page.html").text(), "sub page\n");
    assert_eq!(get(s.port, "/sub/./page.html").status, 200);
    assert_eq!(
        get(s.port, "/%61.txt").text(),
        "abcdefghijklmnopqrstuvwxyz\n"
    );
    assert_eq!(get(s.port, "/sub%2f..%2fa.txt").status, 200);
    let secret = format!("/../secret-{}", std::process::id());
    assert_eq!(get(s.port, &secret).status, 400);
    assert_eq!(
        get(s.port, &format!("/sub/../..{}", &secret[3..])).status,
        400
    );
    assert_eq!(get(s.port, "/%2e%2e/etc/passwd").status, 400);
    assert_eq!(get(s.port, "/a%00.txt").status, 400);
    assert_eq!(get(s.port, "/a%zz").status, 400);
    let _ = std::fs::remove_file(
        root.path()
            .parent()
            .unwrap()
            .join(format!("secret-{}", std::process::id())),
    );
}

#[test]
fn locations_alias_and_exact() {
    let root = docroot();
    let s = start(
        &root,
        &format!(
            "    location = /exact {{ return 200 \"exact\"; }}\n\
             location /exact {{ return 200 \"prefix\"; }}\n\
             location ^~ /img/ {{ alias {}/alias/; }}\n\
             location /sub/ {{ add_header X-Loc sub; }}\n\
             location /sub/deeper/ {{ return 200 \"deeper\"; }}\n",
            root.path().display()
        ),
    );
    assert_eq!(get(s.port, "/exact").text(), "exact");
    assert_eq!(get(s.port, "/exactly").text(), "prefix");
    assert_eq!(get(s.port, "/img/target.txt").text(), "aliased\n");
    let r = get(s.port, "/sub/page.html");
    assert_eq!(r.header("X-Loc"), Some("sub"));
    assert_eq!(get(s.port, "/sub/deeper/x").text(), "deeper");
}

#[test]
fn return_with_variables_and_redirects() {
    let root = docroot();
    let s = start(
        &root,
        "    location /r { return 200 \"uri=$uri args=$args p=$arg_p host=$host m=$request_method ru=$request_uri\"; }\n\
         location /go { return 301 /target?from=$uri; }\n\
         location /ext { return 302 https://example.com$request_uri; }\n\
         location /gone { return 410; }\n\
         location /close { return 444; }\n",
    );
    let r = get(s.port, "/r/x?p=7&q=1");
    assert_eq!(
        r.text(),
        "uri=/r/x args=p=7&q=1 p=7 host=localhost m=GET ru=/r/x?p=7&q=1"
    );
    assert_eq!(r.header("Content-Type"), Some("application/octet-stream"));
    let r = get(s.port, "/go");
    assert_eq!(r.status, 301);
    assert_eq!(
        r.header("Location"),
        Some(format!("http://localhost:{}/target?from=/go", s.port).as_str())
    );
    let r = get(s.port, "/ext/y?z");
    assert_eq!(r.status_line, "HTTP/1.1 302 Moved Temporarily");
    assert_eq!(r.header("Location"), Some("https://example.com/ext/y?z"));
    assert!(r.text().contains("<title>302 Found</title>"));
    assert_eq!(get(s.port, "/gone").status, 410);
    assert!(try_raw(s.port, b"GET /close HTTP/1.1\r\nHost: x\r\n\r\n").is_none());
}

#[test]
fn error_page_and_add_header_always() {
    let root = docroot();
    let s = start(
        &root,
        "    error_page 404 /errors/404.html;\n\
         add_header X-Plain yes;\n\
         add_header X-Always yes always;\n\
         add_header X-Status $status always;\n\
         location /eq { error_page 404 =200 /errors/404.html; }\n\
         location /redir { error_page 404 http://example.com/nf; }\n\
         location /errors/ { internal; }\n",
    );
    let r = get(s.port, "/nothing-here");
    assert_eq!(r.status, 404);
    assert_eq!(r.text(), "custom not found\n");
    assert_eq!(r.header("X-Plain"), None);
    assert_eq!(r.header("X-Always"), Some("yes"));
    assert_eq!(r.header("X-Status"), Some("404"));
    let ok = get(s.port, "/a.txt");
    assert_eq!(ok.header("X-Plain"), Some("yes"));
    assert_eq!(ok.header("X-Status"), Some("200"));
    let r = get(s.port, "/eq/none");
    assert_eq!((r.status, r.text().as_str()), (200, "custom not found\n"));
    let r = get(s.port, "/redir/none");
    assert_eq!(r.status, 302);
    assert_eq!(r.header("Location"), Some("http://example.com/nf"));
    // `internal`: direct requests get 404 (here: the custom page, since
    // error_page's target is reachable internally).
    let r = get(s.port, "/errors/404.html");
    assert_eq!(r.status, 404);
}

#[test]
fn try_files_and_expires_and_charset() {
    let root = docroot();
    let s = start(
        &root,
        "    location /app/ { try_files $uri $uri/ /index.html; }\n\
         location /strict/ { try_files $uri =418; }\n\
         location /cached/ { alias /nonexistent/; expires 1h; }\n\
         charset utf-8;\n",
    );
    assert_eq!(get(s.port, "/app/anything").text(), "<h1>home</h1>\n");
    assert_eq!(get(s.port, "/strict/x").status, 418);
    assert_eq!(
        get(s.port, "/a.txt").header("Content-Type"),
        Some("text/plain; charset=utf-8")
    );
    let s2 = start(&root, "    location / { expires 1h; }\n");
    let r = get(s2.port, "/a.txt");
    assert_eq!(r.header("Cache-Control"), Some("max-age=3600"));
    assert!(r.header("Expires").is_some());
}

#[test]
fn conditional_requests() {
    let root = docroot();
    let s = start(&root, "");
    let first = get(s.port, "/a.txt");
    let etag = first.header("ETag").unwrap().to_string();
    let lm = first.header("Last-Modified").unwrap().to_string();
    let r = get_with(s.port, "/a.txt", &format!("If-None-Match: {etag}\r\n"));
    assert_eq!(r.status, 304);
    assert!(r.header("Content-Length").is_none() && r.header("Content-Type").is_none());
    assert_eq!(r.header("ETag"), Some(etag.as_str()));
    assert_eq!(
        get_with(s.port, "/a.txt", &format!("If-Modified-Since: {lm}\r\n")).status,
        304
    );
    assert_eq!(
        get_with(
            s.port,
            "/a.txt",
            "If-Modified-Since: Thu, 01 Jan 1970 00:00:00 GMT\r\n"
        )
        .status,
        200
    );
    assert_eq!(
        get_with(s.port, "/a.txt", "If-None-Match: \"nope\"\r\n").status,
        200
    );
    assert_eq!(
        get_with(s.port, "/a.txt", "If-Match: \"nope\"\r\n").status,
        412
    );
    assert_eq!(
        get_with(s.port, "/a.txt", &format!("If-Match: {etag}\r\n")).status,
        200
    );
    assert_eq!(
        get_with(
            s.port,
            "/a.txt",
            "If-Unmodified-Since: Thu, 01 Jan 1970 00:00:00 GMT\r\n"
        )
        .status,
        412
    );
}

#[test]
fn filter_chain_order_as_nginx() {
    let root = docroot();
    let s = start(
        &root,
        "    add_header X-A a always;\n\
         location /keep/ { error_page 404 /errors/404.html; }\n\
         location /ok/ { error_page 404 =200 /errors/404.html; }\n\
         location = /r.json { return 200 \"{}\"; }\n\
         location /dir { try_files $uri $uri/ =404; }\n",
    );
    let count = |r: &Resp, name: &str| r.headers.iter().filter(|(n, _)| n == name).count();
    // A 416 keeps the 200's add_header lines and adds its own pass's.
    let r = get_with(s.port, "/a.txt", "Range: bytes=100-\r\n");
    assert_eq!(r.status, 416);
    assert_eq!(r.header("Content-Range"), Some("bytes */27"));
    assert_eq!(count(&r, "X-A"), 2);
    assert!(r.header("ETag").is_none() && r.header("Last-Modified").is_none());
    // An error page keeping its status: ETag, no Last-Modified, no
    // conditionals or ranges.
    let r = get_with(
        s.port,
        "/keep/missing",
        "If-None-Match: *\r\nRange: bytes=0-1\r\n",
    );
    assert_eq!(r.status, 404);
    assert_eq!(r.text(), "custom not found\n");
    assert!(r.header("ETag").is_some() && r.header("Last-Modified").is_none());
    // One sent with 200: conditionals and ranges apply.
    assert_eq!(
        get_with(s.port, "/ok/missing", "If-None-Match: *\r\n").status,
        304
    );
    let r = get_with(s.port, "/ok/missing", "Range: bytes=0-1\r\n");
    assert_eq!((r.status, r.text().as_str()), (206, "cu"));
    // `return` text: typed by extension, conditionals without validators.
    let r = get(s.port, "/r.json");
    assert_eq!(r.header("Content-Type"), Some("application/json"));
    assert_eq!(
        get_with(s.port, "/r.json", "If-None-Match: *\r\n").status,
        304
    );
    assert_eq!(
        get_with(s.port, "/r.json", "If-Match: \"x\"\r\n").status,
        412
    );
    // try_files `$uri/` finds the directory; the handler adds the slash.
    let r = get(s.port, "/dir");
    assert_eq!(r.status, 301);
    assert!(r.header("Location").unwrap().ends_with("/dir/"));
    // Malformed requests get the server's `always` headers.
    let r = raw(
        s.port,
        b"GET /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: x\r\n\r\n",
    );
    assert_eq!((r.status, r.header("X-A")), (400, Some("a")));
    let r = raw(
        s.port,
        b"GET /a.txt HTTP/1.2\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.status, 200);
}

#[test]
fn ranges() {
    let root = docroot();
    let s = start(
        &root,
        "    location /limited/ { alias ROOT/; max_ranges 1; }\n"
            .replace("ROOT", root.path().to_str().unwrap())
            .as_str(),
    );
    let r = get_with(s.port, "/a.txt", "Range: bytes=1-3\r\n");
    assert_eq!(r.status, 206);
    assert_eq!(r.text(), "bcd");
    assert_eq!(r.header("Content-Range"), Some("bytes 1-3/27"));
    assert!(r.header("Accept-Ranges").is_none());
    assert_eq!(
        get_with(s.port, "/a.txt", "Range: bytes=-2\r\n").text(),
        "z\n"
    );
    assert_eq!(
        get_with(s.port, "/a.txt", "Range: bytes=25-\r\n").text(),
        "z\n"
    );
    let r = get_with(s.port, "/a.txt", "Range: bytes=100-\r\n");
    assert_eq!(r.status, 416);
    assert_eq!(r.header("Content-Range"), Some("bytes */27"));
    assert_eq!(get_with(s.port, "/a.txt", "Range: pages=1\r\n").status, 200);
    let r = get_with(s.port, "/a.txt", "Range: bytes=0-1,5-6\r\n");
    assert_eq!(r.status, 206);
    let ct = r.header("Content-Type").unwrap().to_string();
    let boundary = ct.strip_prefix("multipart/byteranges; boundary=").unwrap();
    assert_eq!(boundary.len(), 20);
    let want = format!(
        "\r\n--{b}\r\nContent-Type: text/plain\r\nContent-Range: bytes 0-1/27\r\n\r\nab\r\n--{b}\r\nContent-Type: text/plain\r\nContent-Range: bytes 5-6/27\r\n\r\nfg\r\n--{b}--\r\n",
        b = boundary
    );
    assert_eq!(r.text(), want);
    assert_eq!(
        r.header("Content-Length"),
        Some(want.len().to_string().as_str())
    );
    // If-Range with a stale validator: the whole file.
    assert_eq!(
        get_with(
            s.port,
            "/a.txt",
            "Range: bytes=1-3\r\nIf-Range: \"old\"\r\n"
        )
        .status,
        200
    );
    let etag = get(s.port, "/a.txt").header("ETag").unwrap().to_string();
    assert_eq!(
        get_with(
            s.port,
            "/a.txt",
            &format!("Range: bytes=1-3\r\nIf-Range: {etag}\r\n")
        )
        .status,
        206
    );
    // max_ranges 1: two ranges get the full response.
    assert_eq!(
        get_with(s.port, "/limited/a.txt", "Range: bytes=0-1,5-6\r\n").status,
        200
    );
    assert_eq!(
        get_with(s.port, "/limited/a.txt", "Range: bytes=0-1\r\n").status,
        206
    );
}

fn big_file(root: &TempDir, name: &str, len: usize) -> Vec<u8> {
    let data: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
    root.write(name, &data);
    data
}

#[test]
fn large_files_intact_with_and_without_sendfile() {
    let root = docroot();
    let data = big_file(&root, "big.bin", 5 * 1024 * 1024 + 123);
    for sendfile in ["on", "off"] {
        let s = start(
            &root,
            &format!("    sendfile {sendfile};\n    sendfile_max_chunk 128k;\n"),
        );
        let r = get(s.port, "/big.bin");
        assert_eq!(r.status, 200);
        assert!(r.body == data, "sendfile {sendfile}: body differs");
        let r = get_with(s.port, "/big.bin", "Range: bytes=1000000-3000000\r\n");
        assert!(
            r.body == data[1_000_000..=3_000_000],
            "sendfile {sendfile}: range differs"
        );
    }
}

#[test]
fn a_slow_download_does_not_block_its_worker() {
    let root = docroot();
    big_file(&root, "huge.bin", 64 * 1024 * 1024);
    let s = Server::start(
        &http_conf(&format!(
            "    root {};\n    sendfile on;\n    sendfile_max_chunk 256k;\n",
            root.path().display()
        ))
        .replace("worker_processes 2;", "worker_processes 1;"),
    );
    // A slow reader of a big file must not block a small request on the
    // same (single) worker.
    let mut slow = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    slow.write_all(b"GET /huge.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let t = Instant::now();
    let r = get(s.port, "/a.txt");
    assert_eq!(r.status, 200);
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "small request waited {:?}",
        t.elapsed()
    );
    drop(slow);
}

#[test]
fn keep_alive_and_pipelining() {
    let root = docroot();
    let s = start(&root, "    keepalive_requests 3;\n");
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    // Three pipelined requests in one write.
    c.write_all(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\nHEAD /a.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /dir/ HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut buf = Vec::new();
    let r1 = read_response(&mut c, &mut buf, false).unwrap();
    assert_eq!(r1.header("Connection"), Some("keep-alive"));
    assert_eq!(r1.text(), "abcdefghijklmnopqrstuvwxyz\n");
    let r2 = read_response(&mut c, &mut buf, true).unwrap();
    assert_eq!(r2.status, 200);
    let r3 = read_response(&mut c, &mut buf, false).unwrap();
    assert_eq!(r3.text(), "dir index\n");
    // keepalive_requests 3: the third response closes.
    assert_eq!(r3.header("Connection"), Some("close"));
    assert!(read_all(&mut c).is_empty());

    // HTTP/1.0: close unless keep-alive was asked for.
    let r = raw(s.port, b"GET /a.txt HTTP/1.0\r\n\r\n");
    assert_eq!(r.header("Connection"), Some("close"));
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    c.write_all(b"GET /a.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        .unwrap();
    let mut buf = Vec::new();
    let r = read_response(&mut c, &mut buf, false).unwrap();
    assert_eq!(r.header("Connection"), Some("keep-alive"));
    c.write_all(b"GET /a.txt HTTP/1.0\r\n\r\n").unwrap();
    let r = read_response(&mut c, &mut buf, false).unwrap();
    assert_eq!(r.header("Connection"), Some("close"));
}

#[test]
fn request_bodies_are_discarded_between_requests() {
    let root = docroot();
    let s = start(&root, "");
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    c.write_all(b"GET /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET /dir/ HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nGET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut buf = Vec::new();
    assert_eq!(read_response(&mut c, &mut buf, false).unwrap().status, 200);
    assert_eq!(
        read_response(&mut c, &mut buf, false).unwrap().text(),
        "dir index\n"
    );
    assert_eq!(read_response(&mut c, &mut buf, false).unwrap().status, 200);
    let r = get_with(s.port, "/a.txt", "Content-Length: 2000000\r\n");
    assert_eq!(r.status, 413);
}

#[test]
fn timeouts_close_connections() {
    let root = docroot();
    let s = start(
        &root,
        "    keepalive_timeout 1 7;\n    client_header_timeout 1;\n",
    );
    // Keep-alive timeout, announced with the second parameter.
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    c.write_all(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut buf = Vec::new();
    let r = read_response(&mut c, &mut buf, false).unwrap();
    assert_eq!(r.header("Keep-Alive"), Some("timeout=7"));
    let t = Instant::now();
    assert!(read_all(&mut c).is_empty());
    assert!(
        t.elapsed() >= Duration::from_millis(800) && t.elapsed() < Duration::from_secs(4),
        "{:?}",
        t.elapsed()
    );
    // Header timeout: a partial head is dropped after client_header_timeout.
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    c.write_all(b"GET /a.txt HTTP/1.1\r\nHo").unwrap();
    let t = Instant::now();
    assert!(read_all(&mut c).is_empty());
    assert!(
        t.elapsed() >= Duration::from_millis(800) && t.elapsed() < Duration::from_secs(4),
        "{:?}",
        t.elapsed()
    );
}

#[test]
fn server_names_pick_the_server() {
    let root = docroot();
    let other = TempDir::new("other");
    other.write("a.txt", "other\n");
    let conf = format!(
        "daemon off; pid {{PREFIX}}/p.pid; error_log {{PREFIX}}/logs/e.log; events {{}}\nhttp {{ access_log off;\n\
         server {{ listen 127.0.0.1:{{PORT}}; server_name main.test; root {}; }}\n\
         server {{ listen 127.0.0.1:{{PORT}} default_server; server_name *.other.test; root {}; }}\n}}",
        root.path().display(),
        other.path().display()
    );
    let s = Server::start(&conf);
    let host = |h: &str| {
        raw(
            s.port,
            format!("GET /a.txt HTTP/1.1\r\nHost: {h}\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .text()
    };
    assert_eq!(host("main.test"), "abcdefghijklmnopqrstuvwxyz\n");
    assert_eq!(host("MAIN.test:8080"), "abcdefghijklmnopqrstuvwxyz\n");
    assert_eq!(host("www.other.test"), "other\n");
    assert_eq!(host("unknown.test"), "other\n"); // default_server
}

#[test]
fn stub_status_reports_counters() {
    let root = docroot();
    let s = start(&root, "    location = /status { stub_status; }\n");
    get(s.port, "/a.txt");
    let r = get(s.port, "/status");
    let t = r.text();
    assert!(t.starts_with("Active connections: "), "{t}");
    assert!(t.contains("\nserver accepts handled requests\n "), "{t}");
    assert!(
        t.contains("\nReading: ") && t.contains(" Writing: ") && t.contains(" Waiting: "),
        "{t}"
    );
    let nums: Vec<u64> = t
        .lines()
        .nth(2)
        .unwrap()
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    assert!(nums[0] >= 2 && nums[1] >= 2 && nums[2] >= 2, "{t}");
}

#[test]
fn every_file_type_answers_as_nginx() {
    differential::compare("file types", file_type_cases);
}

#[test]
fn directories_index_and_error_pages_answer_as_nginx() {
    differential::compare("directories, index and error pages", directory_cases);
}

#[test]
fn methods_answer_as_nginx() {
    differential::compare("methods", method_cases);
}

fn file_type_cases(_root: &Path, c: &mut Cases) {
    // --- Every file type, GET and HEAD.
    let files = [
        "/",
        "/index.html",
        "/txt/a.txt",
        "/one.txt",
        "/empty.txt",
        "/bin/data.bin",
        "/files/style.css",
        "/files/app.js",
        "/files/data.json",
        "/files/img.png",
        "/files/photo.jpg",
        "/files/anim.gif",
        "/files/notes.txt",
        "/files/page.html",
        "/files/feed.xml",
        "/files/logo.svg",
        "/files/doc.pdf",
        "/files/thing.unknownext",
        "/files/UPPERCASE.TXT",
        "/files/noext",
        "/space%20name.txt",
        "/nested/a/b/c/deep.txt",
    ];
    for f in files {
        c.same(&format!("GET {f}"), vec![req("GET", f, "")]);
        c.same(&format!("HEAD {f}"), vec![req("HEAD", f, "")]);
    }
}

fn directory_cases(_root: &Path, c: &mut Cases) {
    // --- Directories, index, missing files, error pages.
    for t in [
        "/sub",
        "/sub/",
        "/sub/page.html",
        "/sub?x=1",
        "/noindex",
        "/noindex/",
        "/noindex/file.txt",
        "/nested/a",
        "/nested/a/",
        "/nested/a/b/",
        "/nothere/",
        "/missing.txt",
        "/static/missing.css",
        "/txt/a.txt/",
        "/TXT/A.TXT",
    ] {
        c.same(&format!("GET {t}"), vec![req("GET", t, "")]);
    }
    c.same("HEAD /sub", vec![req("HEAD", "/sub", "")]);
    c.same(
        "HEAD /missing.txt (custom 404)",
        vec![req("HEAD", "/missing.txt", "")],
    );
    c.same(
        "HEAD /static/missing.css (built-in 404)",
        vec![req("HEAD", "/static/missing.css", "")],
    );
    c.same(
        "HEAD /noindex/ (built-in 403)",
        vec![req("HEAD", "/noindex/", "")],
    );
    // msie_padding: built-in error pages are padded for MSIE and Chrome.
    let chrome = "User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 \
                  (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36\r\n";
    let firefox = "User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 \
                   Firefox/120.0\r\n";
    let msie = "User-Agent: Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)\r\n";
    for (browser, ua) in [("Chrome", chrome), ("Firefox", firefox), ("MSIE", msie)] {
        c.same(
            &format!("built-in 404 for {browser}"),
            vec![req("GET", "/static/missing.css", ua)],
        );
        c.same(
            &format!("custom 404 for {browser}"),
            vec![req("GET", "/missing.txt", ua)],
        );
    }
    c.same(
        "built-in 403 for Chrome",
        vec![req("GET", "/noindex/", chrome)],
    );
    c.same(
        "301 for Chrome (not padded)",
        vec![req("GET", "/sub", chrome)],
    );
}

fn method_cases(_root: &Path, c: &mut Cases) {
    // --- Methods.
    c.same("POST existing", vec![req("POST", "/txt/a.txt", "")]);
    c.same(
        "POST existing with body",
        vec![req("POST", "/txt/a.txt", "Content-Length: 5\r\n\r\nhello")
            .strip_suffix(b"\r\n")
            .unwrap()
            .to_vec()],
    );
    c.same("POST missing", vec![req("POST", "/missing.txt", "")]);
    c.same(
        "POST missing (built-in 404)",
        vec![req("POST", "/static/missing.css", "")],
    );
    c.same("POST / (index)", vec![req("POST", "/", "")]);
    c.same("DELETE existing", vec![req("DELETE", "/txt/a.txt", "")]);
    c.same("DELETE missing", vec![req("DELETE", "/missing.txt", "")]);
    c.same("DELETE directory", vec![req("DELETE", "/sub", "")]);
    c.same(
        "PUT with body",
        vec![req("PUT", "/txt/new.txt", "Content-Length: 3\r\n\r\nabc")
            .strip_suffix(b"\r\n")
            .unwrap()
            .to_vec()],
    );
    c.same("OPTIONS file", vec![req("OPTIONS", "/txt/a.txt", "")]);
    c.same("OPTIONS *", vec![req("OPTIONS", "*", "")]);
    c.same("PATCH", vec![req("PATCH", "/txt/a.txt", "")]);
    c.same("unknown method FOO", vec![req("FOO", "/txt/a.txt", "")]);
}
