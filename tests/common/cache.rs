//! A caching proxy (`proxy_cache`) before an in-test origin, for the
//! `tests/proxy_cache*.rs` files: the configurations, a request with its
//! cache status (`$upstream_cache_status`, sent back as `X-Cache`), and
//! where NGINX's layout puts an entry file.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{raw, Resp};

/// A config with one zone `one` in `{PREFIX}/cache` (extra zone
/// parameters in `zone_extra`), `http_extra` at http level and a
/// `location /` proxying to the origin with `loc_extra`.
pub fn conf(origin: u16, zone_extra: &str, http_extra: &str, loc_extra: &str) -> String {
    conf_with(origin, zone_extra, http_extra, loc_extra, "")
}

/// [`conf`] with more locations in the server (`ORIGIN`: the origin's
/// port).
pub fn conf_with(
    origin: u16,
    zone_extra: &str,
    http_extra: &str,
    loc_extra: &str,
    server_extra: &str,
) -> String {
    let server_extra = server_extra.replace("ORIGIN", &origin.to_string());
    format!(
        "daemon off;\nworker_processes 2;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\n\
         events {{ worker_connections 512; }}\n\
         http {{\n  log_format cache '$request_uri $upstream_cache_status';\n  \
           access_log {{PREFIX}}/logs/access.log cache;\n  \
           proxy_cache_path {{PREFIX}}/cache levels=1:2 keys_zone=one:1m{zone_extra};\n{http_extra}\n  \
           server {{\n    listen 127.0.0.1:{{PORT}};\n    server_name localhost;\n    \
             location / {{\n      proxy_pass http://127.0.0.1:{origin};\n      proxy_cache one;\n      \
               add_header X-Cache $upstream_cache_status always;\n{loc_extra}\n    }}\n{server_extra}\n  }}\n}}\n"
    )
}

/// One worker, zone `one` keeping 200 and 404 for ten minutes, and a
/// `location = /two` answering porter's own 203.
pub fn cache_conf(origin: u16) -> String {
    format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n  proxy_cache_path {{PREFIX}}/cache levels=1:2 keys_zone=one:1m;\n  \
           server {{\n    listen 127.0.0.1:{{PORT}};\n    server_name localhost;\n    \
             location / {{\n      proxy_pass http://127.0.0.1:{origin};\n      proxy_cache one;\n      \
               proxy_cache_valid 200 404 10m;\n      \
               add_header X-Cache $upstream_cache_status always;\n    }}\n    \
             location = /two {{ return 203 two; }}\n  }}\n}}\n"
    )
}

/// `method path` with `headers` (each line ending in CRLF), the
/// connection closed after it.
pub fn req(port: u16, method: &str, path: &str, headers: &str) -> Resp {
    raw(
        port,
        format!(
            "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{headers}\r\n"
        )
        .as_bytes(),
    )
}

/// The answer's `X-Cache` (the configurations' `$upstream_cache_status`).
pub fn cache_status(r: &Resp) -> &str {
    r.header("X-Cache").unwrap_or("")
}

/// MD5 of the key, as NGINX names entries.
pub fn md5_hex(key: &str) -> String {
    let out = std::process::Command::new("md5sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin.take().unwrap().write_all(key.as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    String::from_utf8_lossy(&out.stdout)[..32].to_string()
}

/// `DIR/c/29/b7f5…` for `levels=1:2`.
pub fn entry_path(dir: &Path, key: &str) -> PathBuf {
    let h = md5_hex(key);
    dir.join(&h[31..]).join(&h[29..31]).join(&h)
}

/// Every regular file under `dir`.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Polls `f` every 20 ms until it holds; fails naming `what` after
/// `timeout`.
pub fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
