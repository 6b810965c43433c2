//! `proxy_store`, as a mirror on demand: `try_files $uri @fetch` serves
//! what is already on disk and `@fetch` proxies the rest with
//! `proxy_store on`, so each file is fetched once and then served from
//! the mirror. Beside Debian's nginx on the same configuration: the
//! stored files are byte-identical to the origin's (directories made on
//! the way, the mode `proxy_store_access` gives, the `Last-Modified`
//! time), a body the origin cuts short and a client that leaves
//! mid-body leave no file (in place or in `proxy_temp_path`), and only a
//! 200 is stored.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::origin::{pattern, Framing, Origin, Reply};
use crate::common::*;

const BIG: usize = 300 * 1024;

/// The origin: `/deep/dir/file.bin` (BIG bytes with a `Last-Modified`),
/// `/cut.bin` (announced BIG, cut at half), `/slow.bin` (BIG paced over
/// seconds), `/gone.bin` (404); each request counted.
fn origin() -> Origin {
    Origin::start(|r| match r.target.as_str() {
        "/deep/dir/file.bin" => {
            Reply::ok(&pattern(BIG, 1)).header("Last-Modified", "Sat, 01 Jan 2022 00:00:00 GMT")
        }
        "/cut.bin" => Reply::ok(&pattern(BIG, 2)).framing(Framing::Truncate(BIG / 2)),
        "/slow.bin" => Reply::ok(&pattern(BIG, 3)).paced(16 * 1024, Duration::from_millis(100)),
        "/empty.bin" => Reply::ok(b""),
        _ => Reply::ok(b"gone").status(404),
    })
}

/// The mirror's server block, `mirror` its root.
fn site(origin: u16, mirror: &Path) -> String {
    format!(
        "server {{\n    listen 127.0.0.1:{{PORT}};\n    server_name localhost;\n    \
         root {};\n    \
         location / {{ try_files $uri @fetch; }}\n    \
         location @fetch {{\n      proxy_pass http://127.0.0.1:{origin};\n      \
         proxy_store on;\n      proxy_store_access user:rw group:rw all:r;\n    }}\n}}\n",
        mirror.display(),
    )
}

/// Files under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.file_type().unwrap().is_dir() {
            out.extend(files_under(&e.path()));
        } else {
            out.push(e.path().display().to_string());
        }
    }
    out
}

/// Waits until `dir` holds no file (a dropped temp file is unlinked on a
/// pool thread, not awaited).
fn settles_empty(dir: &Path) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = files_under(dir);
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Asks for `path`, reads `n` body bytes at most, then leaves.
fn get_and_leave(port: u16, path: &str, n: usize) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    let mut got = vec![0u8; n];
    let _ = s.read(&mut got);
}

/// One server's mirror: its root (writable by the workers' user) and
/// porter's temp directory (`proxy_temp` under its prefix).
struct Mirror {
    root: TempDir,
    temp: Option<std::path::PathBuf>,
    port: u16,
    _keep: Box<dyn std::any::Any>,
}

impl Mirror {
    fn file(&self, rel: &str) -> std::path::PathBuf {
        self.root.path().join(rel)
    }
}

fn mirror_root(tag: &str) -> TempDir {
    let d = TempDir::new(tag);
    set_mode(d.path(), 0o777);
    d
}

/// porter and nginx (when installed), each with its own mirror.
fn mirrors(o: &Origin) -> Vec<(&'static str, Mirror)> {
    let root = mirror_root("mirror-porter");
    let p = Server::start(&one_worker_conf(&site(o.port, root.path())));
    let temp = Some(p.prefix.path().join("proxy_temp"));
    let port = p.port;
    let mut out = vec![(
        "porter",
        Mirror {
            root,
            temp,
            port,
            _keep: Box::new(p),
        },
    )];
    let root = mirror_root("mirror-nginx");
    if let Some(n) = Nginx::start(&site(o.port, root.path())) {
        let port = n.port;
        out.push((
            "nginx",
            Mirror {
                root,
                temp: None,
                port,
                _keep: Box::new(n),
            },
        ));
    }
    out
}

/// No file left in porter's temp directory.
fn no_temp_files(who: &str, m: &Mirror) {
    if let Some(t) = &m.temp {
        assert_eq!(settles_empty(t), Vec::<String>::new(), "{who}");
    }
}

#[test]
fn mirror_on_demand_stores_files_whole_once_as_nginx() {
    let o = origin();
    let ms = mirrors(&o);
    for (who, m) in &ms {
        let before = o.count();
        let r = get(m.port, "/deep/dir/file.bin");
        assert_eq!(r.status, 200, "{who}");
        assert_eq!(r.body, pattern(BIG, 1), "{who}");
        let stored = m.file("deep/dir/file.bin");
        assert_eq!(std::fs::read(&stored).unwrap(), pattern(BIG, 1), "{who}");
        let meta = std::fs::metadata(&stored).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o664, "{who}");
        assert_eq!(meta.mtime(), 1_640_995_200, "{who}: Last-Modified");
        let dmode = std::fs::metadata(m.file("deep/dir"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(dmode & 0o700, 0o700, "{who}: directory made");
        // The second time the mirror answers from disk.
        let r = get(m.port, "/deep/dir/file.bin");
        assert_eq!(r.body, pattern(BIG, 1), "{who}");
        assert_eq!(o.count(), before + 1, "{who}: fetched once");
        // An empty 200 is an empty file; a 404 is not stored.
        assert_eq!(get(m.port, "/empty.bin").status, 200, "{who}");
        assert_eq!(std::fs::read(m.file("empty.bin")).unwrap(), b"");
        assert_eq!(get(m.port, "/gone.bin").status, 404, "{who}");
        assert!(!m.file("gone.bin").exists(), "{who}");
        no_temp_files(who, m);
    }
}

/// Waits until `f` exists (the store of a body a client left is
/// finished by a task of its own).
fn appears(f: &Path) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f.exists() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

#[test]
fn cut_upstream_leaves_no_file_and_a_client_abort_a_whole_one() {
    let o = origin();
    let ms = mirrors(&o);
    for (who, m) in &ms {
        let r = try_raw(
            m.port,
            b"GET /cut.bin HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        );
        assert!(r.is_none_or(|r| r.body.len() < BIG), "{who}");
        // NGINX goes on reading a stored response when its client left:
        // the file appears whole, never in part.
        get_and_leave(m.port, "/slow.bin", 1000);
        assert!(!m.file("slow.bin").exists(), "{who}: stored before its end");
        assert!(appears(&m.file("slow.bin")), "{who}: not stored");
        assert_eq!(std::fs::read(m.file("slow.bin")).unwrap(), pattern(BIG, 3));
        assert!(!m.file("cut.bin").exists(), "{who}: cut body stored");
        no_temp_files(who, m);
    }
}

#[test]
fn store_directives_are_checked_as_nginx() {
    for (line, want) in [
        ("proxy_store_access user:rwx;", "invalid value \"user:rwx\""),
        ("proxy_store_access other:r;", "invalid value \"other:r\""),
        (
            "proxy_store on; proxy_store off;",
            "\"proxy_store\" directive is duplicate",
        ),
        ("fastcgi_store_access all:w;", "invalid value \"all:w\""),
    ] {
        let conf = one_server_conf("", &format!("location / {{ {line} }}"));
        let err = config_error(&conf.replace("{PORT}", "1"));
        assert!(err.contains(want), "{line}: {err}");
    }
}
