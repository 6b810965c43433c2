//! Directives that tune NGINX's internals load as stock configs write
//! them, each with one `notice` naming its file and line, and
//! `worker_cpu_affinity` pins the worker threads as NGINX pins its worker
//! processes; a dynamic module porter lacks loads with a warning naming
//! it (Debian's stock `modules-enabled/`), and its directives stay
//! unknown-directive errors; HTTP/2 server push lines load with NGINX
//! 1.25's "obsolete, ignored" warning.

use std::time::Duration;

use crate::common::{config_error, run, Server, TempDir};

const LINES: &[&str] = &[
    "map_hash_max_size 4096;",
    "map_hash_bucket_size 128;",
    "proxy_headers_hash_max_size 1024;",
    "proxy_headers_hash_bucket_size 128;",
    "types_hash_max_size 2048;",
    "server_names_hash_bucket_size 64;",
    "output_buffers 2 32k;",
    "read_ahead 512k;",
    "postpone_output 1460;",
    "http2_streams_index_size 32;",
    "http2_pool_size 4k;",
    "http2_recv_buffer_size 256k;",
];

#[test]
fn internals_load_with_one_notice_each_naming_file_and_line() {
    let dir = TempDir::new("internals");
    std::fs::create_dir_all(dir.path().join("logs")).unwrap();
    let http = LINES.join("\n  ");
    let text = format!(
        "pcre_jit on;\nenv TZ;\nenv PORTER_X=1;\nworker_cpu_affinity auto;\nlock_file logs/nginx.lock;\n\
         events {{\nworker_aio_requests 64;\n}}\n\
         http {{\n  {http}\n  server {{ listen 127.0.0.1:1; }}\n}}\n"
    );
    let conf = dir.write("conf/internals.conf", &text);
    let out = run(&[
        "-t",
        "-p",
        dir.path().to_str().unwrap(),
        "-c",
        conf.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    for (i, line) in text.lines().enumerate() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        if matches!(
            name,
            "events" | "http" | "server" | "}" | "worker_cpu_affinity"
        ) {
            continue;
        }
        let want = format!("[notice] \"{name}\" has no effect: ");
        let at = format!(" in {}:{}", conf.display(), i + 1);
        let n = err
            .lines()
            .filter(|l| l.contains(&want) && l.ends_with(&at))
            .count();
        assert_eq!(n, 1, "{name} at line {}:\n{err}", i + 1);
    }
}

/// `porter -t` on `text` (as `conf/nginx.conf` with `files` beside it):
/// whether it passed, and its stderr.
fn test_config(text: &str, files: &[(&str, &str)]) -> (bool, String) {
    let dir = TempDir::new("internals-t");
    std::fs::create_dir_all(dir.path().join("logs")).unwrap();
    for (name, body) in files {
        dir.write(&format!("conf/{name}"), body);
    }
    let conf = dir.write("conf/nginx.conf", text);
    let out = run(&[
        "-t",
        "-p",
        dir.path().to_str().unwrap(),
        "-c",
        conf.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (
        out.status.success(),
        err.replace(&format!("{}/", dir.path().display()), ""),
    )
}

#[test]
fn modules_porter_lacks_load_with_a_warning_and_their_directives_stay_errors() {
    // Debian's stock nginx.conf includes modules-enabled/*.conf, which the
    // packages of geoip, image_filter, xslt, mail and stream fill.
    let enabled = [
        (
            "modules-enabled/50-mod-http-geoip.conf",
            "load_module modules/ngx_http_geoip_module.so;\n",
        ),
        (
            "modules-enabled/50-mod-stream.conf",
            "load_module modules/ngx_stream_module.so;\n",
        ),
        (
            "modules-enabled/50-mod-http-realip.conf",
            "load_module modules/ngx_http_realip_module.so;\n",
        ),
    ];
    let main =
        "include modules-enabled/*.conf;\nevents {}\nhttp {\n  server { listen 127.0.0.1:1; }\n}\n";
    let (ok, err) = test_config(main, &enabled);
    assert!(ok, "{err}");
    for (file, module) in [
        ("50-mod-http-geoip.conf", "ngx_http_geoip_module"),
        ("50-mod-stream.conf", "ngx_stream_module"),
    ] {
        let want = format!("[warn] porter has no \"{module}\" module and loads none");
        let at = format!("conf/modules-enabled/{file}:1");
        assert!(
            err.lines().any(|l| l.contains(&want) && l.ends_with(&at)),
            "{module}:\n{err}"
        );
    }
    assert!(
        err.contains("[notice] \"load_module\" has no effect: the module is built into porter"),
        "{err}"
    );
    // Using the module is still an error at the line that does.
    let main = "include modules-enabled/*.conf;\nevents {}\nhttp {\n  geoip_country /usr/share/GeoIP/GeoIP.dat;\n}\n";
    let (ok, err) = test_config(main, &enabled);
    assert!(!ok, "{err}");
    assert!(
        err.contains("unknown directive \"geoip_country\" (NGINX has it, porter does not) in conf/nginx.conf:4"),
        "{err}"
    );
}

#[test]
fn http2_server_push_lines_load_with_the_obsolete_warning() {
    let main = "events {}\nhttp {\n  http2_max_concurrent_pushes 10;\n  server {\n    listen 127.0.0.1:1;\n    \
                http2_push_preload on;\n    location / { http2_push /style.css; }\n  }\n}\n";
    let (ok, err) = test_config(main, &[]);
    assert!(ok, "{err}");
    for (name, line) in [
        ("http2_max_concurrent_pushes", 3),
        ("http2_push_preload", 6),
        ("http2_push", 7),
    ] {
        let want = format!(
            "[warn] the \"{name}\" directive is obsolete, ignored in conf/nginx.conf:{line}"
        );
        assert!(err.lines().any(|l| l.ends_with(&want)), "{name}:\n{err}");
    }
    let main = "events {}\nhttp {\n  http2_streams_index_size 30;\n}\n";
    let (ok, err) = test_config(main, &[]);
    assert!(
        !ok && err.contains("must be a power of two in conf/nginx.conf:3"),
        "{err}"
    );
}

#[test]
fn bad_values_are_errors_naming_the_line() {
    let e = config_error("events {}\nhttp { open_log_file_cache inactive=1s; }\n");
    assert!(
        e.contains("\"open_log_file_cache\" must have \"max\" parameter"),
        "{e}"
    );
    let e = config_error("worker_cpu_affinity 0x3;\nevents {}\n");
    assert!(
        e.contains("worker_cpu_affinity") && e.contains("porter.conf:1"),
        "{e}"
    );
}

/// The CPUs a thread of `pid` named `name` may run on.
fn cpus_allowed(pid: u32, name: &str) -> Option<String> {
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
    {
        let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        let field = |k: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(k))
                .map(|v| v.trim().to_string())
        };
        if field("Name:").as_deref() == Some(name) {
            return field("Cpus_allowed_list:");
        }
    }
    None
}

#[test]
fn worker_cpu_affinity_pins_each_worker_thread() {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        eprintln!("skipping: one CPU");
        return;
    }
    let srv = Server::start(
        "daemon off;\nworker_processes 2;\nworker_cpu_affinity 10 01;\npid {PREFIX}/porter.pid;\n\
         error_log {PREFIX}/logs/error.log info;\nevents { worker_connections 64; }\n\
         http { access_log off; server { listen 127.0.0.1:{PORT}; } }\n",
    );
    // Each worker logs its line once pinned; the threads may start after
    // the listener answers, so read their masks only after both lines.
    srv.wait_log("logs/error.log", "using cpu #0", Duration::from_secs(10));
    srv.wait_log("logs/error.log", "using cpu #1", Duration::from_secs(10));
    let pid = srv.child.id();
    assert_eq!(cpus_allowed(pid, "porter-w0").as_deref(), Some("1"));
    assert_eq!(cpus_allowed(pid, "porter-w1").as_deref(), Some("0"));
}
