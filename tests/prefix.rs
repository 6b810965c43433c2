//! Paths a config leaves out resolve under the prefix (`-p`), whatever the
//! working directory: systemd starts servers from `/`. The default `root
//! html`, and the default logs — which, as NGINX's start-up log, are an
//! `alert` rather than a failure when `logs/` is missing.

use std::process::Command;

use crate::common::{get, Server, TempDir, BIN};

#[test]
fn a_server_without_root_serves_html_under_the_prefix_when_started_from_slash() {
    let prefix = TempDir::new("prefix-root");
    prefix.write("html/index.html", b"<p>prefix html</p>\n");
    let conf = "daemon off;\nworker_processes 1;\npid {PREFIX}/porter.pid;\n\
                events { worker_connections 64; }\n\
                http {\n  server { listen 127.0.0.1:{PORT}; }\n}\n";
    let srv = Server::start_with(prefix, conf, &[], |cmd| {
        cmd.current_dir("/");
    });
    let r = get(srv.port, "/");
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "<p>prefix html</p>\n");
    // The default access log is the prefix's too.
    let log = srv.wait_log(
        "logs/access.log",
        "\"GET / HTTP/1.1\" 200",
        std::time::Duration::from_secs(5),
    );
    assert!(log.contains("\"GET / HTTP/1.1\" 200"), "{log}");
}

#[test]
fn config_test_without_error_log_or_logs_directory_passes_with_an_alert() {
    let prefix = TempDir::new("prefix-nologs");
    let conf = prefix.write(
        "conf/site.conf",
        "events {}\nhttp { server { listen 127.0.0.1:1; } }\n",
    );
    let out = Command::new(BIN)
        .current_dir("/")
        .arg("-t")
        .arg("-p")
        .arg(prefix.path())
        .arg("-c")
        .arg(&conf)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("test is successful"), "{err}");
    assert!(
        err.contains("[alert] could not open error log file: open() \"")
            && err.contains("logs/error.log\" failed (2: No such file or directory)"),
        "{err}"
    );
}
