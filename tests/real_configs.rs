//! Real-world NGINX configurations load unchanged: a config of the shape
//! distributions and tutorials ship, carrying the tuning directives of
//! issue 13 item 1 in every context NGINX allows them, passes `porter -t`
//! and Debian's `nginx -t` alike; a bad value in each fails in both, and
//! porter names the file and line.

use std::process::Command;

use crate::common::*;

/// A site config of the usual shape: Debian's `nginx.conf` defaults, a
/// static site and a proxied application, with the tuning directives.
const REAL: &str = r#"
user nobody nogroup;
worker_processes auto;
pid {PREFIX}/run.pid;
error_log {PREFIX}/logs/error.log warn;
events { worker_connections 768; }
http {
    sendfile on;
    tcp_nopush on;
    types_hash_max_size 2048;
    types_hash_bucket_size 64;
    server_names_hash_max_size 1024;
    server_names_hash_bucket_size 64;
    variables_hash_max_size 2048;
    variables_hash_bucket_size 128;
    server_tokens build;
    default_type application/octet-stream;
    client_body_temp_path {PREFIX}/client_temp 1 2;
    proxy_temp_path {PREFIX}/proxy_temp 1 2;
    fastcgi_temp_path {PREFIX}/fastcgi_temp 1 2;
    uwsgi_temp_path {PREFIX}/uwsgi_temp;
    scgi_temp_path {PREFIX}/scgi_temp;
    client_body_buffer_size 128k;
    client_body_in_file_only off;
    merge_slashes on;
    ignore_invalid_headers on;
    underscores_in_headers off;
    keepalive_time 1h;
    keepalive_timeout 65;
    proxy_buffers 8 16k;
    proxy_busy_buffers_size 32k;
    proxy_request_buffering on;
    log_format main '$remote_addr - $remote_user [$time_local] "$request" '
                    '$status $body_bytes_sent "$http_referer" "$http_user_agent"';
    access_log {PREFIX}/logs/access.log main if=$status;
    error_log {PREFIX}/logs/http_error.log;
    server {
        listen 127.0.0.1:{PORT} default_server;
        server_name example.com www.example.com;
        root {PREFIX}/html;
        merge_slashes off;
        underscores_in_headers on;
        ignore_invalid_headers off;
        client_body_in_file_only clean;
        error_log {PREFIX}/logs/site_error.log info;
        location / {
            index index.html;
            keepalive_time 10m;
            client_body_temp_path {PREFIX}/client_temp2;
            client_body_buffer_size 16k;
            error_log {PREFIX}/logs/loc_error.log notice;
            server_tokens off;
            types_hash_max_size 1024;
        }
        location /app/ {
            proxy_pass http://127.0.0.1:9;
            proxy_buffers 4 32k;
            proxy_busy_buffers_size 64k;
            proxy_request_buffering off;
            fastcgi_temp_path {PREFIX}/fcgi2;
            access_log off;
        }
    }
}
"#;

fn write_conf(dir: &TempDir, text: &str) -> String {
    std::fs::create_dir_all(dir.path().join("logs")).unwrap();
    let text = config_text(text, free_port(), dir.path());
    dir.write("test.conf", &text).display().to_string()
}

/// (porter -t succeeded, its stderr).
fn porter_t(dir: &TempDir, conf: &str) -> (bool, String) {
    let out = run(&["-t", "-p", dir.path().to_str().unwrap(), "-c", conf]);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// nginx -t's verdict, None when nginx is not installed.
fn nginx_t(dir: &TempDir, conf: &str) -> Option<(bool, String)> {
    if !std::path::Path::new(NGINX).exists() {
        return None;
    }
    let out = Command::new(NGINX)
        .args(["-t", "-p", dir.path().to_str().unwrap(), "-c", conf])
        .output()
        .unwrap();
    Some((
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

#[test]
fn real_config_with_tuning_directives_loads_in_both() {
    let dir = TempDir::new("real");
    let conf = write_conf(&dir, REAL);
    let (ok, err) = porter_t(&dir, &conf);
    assert!(ok, "porter -t: {err}");
    if let Some((ok, err)) = nginx_t(&dir, &conf) {
        assert!(ok, "nginx -t: {err}");
    }
}

#[test]
fn bad_tuning_values_fail_in_both_with_file_and_line() {
    let cases = [
        (
            "client_body_buffer_size 128k;",
            "client_body_buffer_size 12x;",
        ),
        (
            "client_body_in_file_only off;",
            "client_body_in_file_only yes;",
        ),
        ("proxy_buffers 8 16k;", "proxy_buffers 0 16k;"),
        (
            "proxy_busy_buffers_size 32k;",
            "proxy_busy_buffers_size big;",
        ),
        ("proxy_request_buffering on;", "proxy_request_buffering 1;"),
        ("merge_slashes on;", "merge_slashes yes;"),
        ("keepalive_time 1h;", "keepalive_time forever;"),
        ("server_tokens build;", "server_tokens maybe;"),
        (
            "uwsgi_temp_path {PREFIX}/uwsgi_temp;",
            "uwsgi_temp_path {PREFIX}/u 0;",
        ),
        (
            "variables_hash_max_size 2048;",
            "variables_hash_max_size many;",
        ),
        // Twice in one block, as NGINX says "is duplicate".
        (
            "proxy_buffers 8 16k;",
            "proxy_buffers 8 16k; proxy_buffers 8 16k;",
        ),
        // Where NGINX does not allow it.
        (
            "            keepalive_time 10m;",
            "            merge_slashes on;",
        ),
        (
            "            keepalive_time 10m;",
            "            variables_hash_max_size 1;",
        ),
    ];
    for (from, to) in cases {
        assert!(REAL.contains(from), "{from}");
        let dir = TempDir::new("bad");
        let conf = write_conf(&dir, &REAL.replacen(from, to, 1));
        let (ok, err) = porter_t(&dir, &conf);
        assert!(!ok, "porter -t accepted {to:?}");
        assert!(
            err.contains("[emerg]") && err.contains("test.conf:"),
            "{to:?}: {err}"
        );
        if let Some((ok, err)) = nginx_t(&dir, &conf) {
            assert!(!ok, "nginx -t accepted {to:?}: {err}");
        }
    }
}

#[test]
fn max_headers_is_porter_and_nginx_1_29() {
    // Not in Debian's 1.22: checked in porter only.
    let dir = TempDir::new("maxh");
    let conf = write_conf(
        &dir,
        &REAL.replace(
            "merge_slashes on;",
            "merge_slashes on;\n    max_headers 100;",
        ),
    );
    let (ok, err) = porter_t(&dir, &conf);
    assert!(ok, "{err}");
    let conf = write_conf(&dir, &REAL.replace("merge_slashes on;", "max_headers x;"));
    assert!(!porter_t(&dir, &conf).0);
}
