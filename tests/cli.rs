//! The command line and configuration errors, as an NGINX user meets them:
//! `-t`, `-T`, `-g`, `-V`, `-h`, and errors that name file:line.

use crate::common::*;

fn test_conf(text: &str) -> (TempDir, std::process::Output) {
    let dir = TempDir::new("cli");
    std::fs::create_dir_all(dir.path().join("logs")).unwrap();
    dir.write("t.conf", text);
    let p = dir.path().to_str().unwrap().to_string();
    let out = run(&["-p", &p, "-c", "t.conf", "-t"]);
    (dir, out)
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn valid_config_test_succeeds() {
    let (dir, out) = test_conf(
        "events {}\nhttp { access_log off; server { listen 127.0.0.1:1; location / { root /tmp; } } }\nerror_log stderr;\n",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let path = dir.path().join("t.conf");
    let e = stderr(&out);
    assert!(
        e.contains(&format!(
            "porter: the configuration file {} syntax is ok",
            path.display()
        )),
        "{e}"
    );
    assert!(
        e.contains(&format!(
            "porter: configuration file {} test is successful",
            path.display()
        )),
        "{e}"
    );
}

/// Bad configurations: the text, the message porter must print, its line.
const BAD_CONFIGS: &[(&str, &str, u32)] = &[
    (
        "events {}\nhttp {\n  bogus on;\n}\n",
        "unknown directive \"bogus\" (not an NGINX directive either: a typo, or a third-party module's)",
        3,
    ),
    (
        "events {}\nhttp {\n  perl_set $x 'sub { 1 }';\n}\n",
        "unknown directive \"perl_set\" (NGINX has it, porter does not)",
        3,
    ),
    (
        "events {}\nhttp {\n server {\n  root /x;\n  listen 80;\n  }\n  sendfile maybe;\n}\n",
        "invalid value \"maybe\" in \"sendfile\" directive, it must be \"on\" or \"off\"",
        7,
    ),
    (
        "events {}\nroot /x;\n",
        "\"root\" directive is not allowed here",
        2,
    ),
    (
        "events {}\nhttp {\n sendfile_max_chunk 5q;\n}\n",
        "\"sendfile_max_chunk\" directive invalid value",
        3,
    ),
    ("events {}\nhttp {\n}\n}\n", "unexpected \"}\"", 4),
    (
        "events {}\n\nthread_pool a threads=0;\n",
        "invalid threads value \"threads=0\"",
        3,
    ),
    (
        "events {}\nthread_pool a threads=2;\nthread_pool a threads=3;\n",
        "duplicate thread pool \"a\"",
        3,
    ),
    (
        "events {}\nthread_pool a max_queue=3;\n",
        "\"thread_pool\" must have \"threads\" parameter",
        2,
    ),
    (
        "events {}\nthread_pool a threads=2 max_queue=x;\n",
        "invalid max_queue value \"max_queue=x\"",
        2,
    ),
    (
        "events {}\nhttp {\n server {\n  aio threads=nope;\n }\n}\n",
        "unknown thread pool \"nope\"",
        4,
    ),
    (
        "events {}\nhttp {\n aio on;\n}\naio_uring workers=0;\n",
        "invalid value \"workers=0\"",
        5,
    ),
    (
        "events {}\nhttp {\n aio bogus;\n}\n",
        "\"aio\" directive invalid value",
        3,
    ),
    (
        "events {}\nhttp {\n open_file_cache max=0;\n}\n",
        "invalid \"open_file_cache\" parameter \"max=0\"",
        3,
    ),
    (
        "events {}\nhttp {\n open_file_cache inactive=3s;\n}\n",
        "\"open_file_cache\" must have the \"max\" parameter",
        3,
    ),
    (
        "events {}\nhttp {\n server {\n",
        "unexpected end of file, expecting \"}\"",
        4,
    ),
    (
        "events {}\nhttp { server { listen 127.0.0.1:99999; } }\n",
        "invalid port in \"127.0.0.1:99999\" of the \"listen\" directive",
        2,
    ),
    (
        "events {}\nhttp {\n root /a b;\n}\n",
        "invalid number of arguments in \"root\" directive",
        3,
    ),
    (
        "events {}\nhttp {\n root /a;\n root /b;\n}\n",
        "\"root\" directive is duplicate",
        4,
    ),
    (
        "events {}\nhttp {\n return 200 $nosuch;\n}\n",
        "\"return\" directive is not allowed here",
        3,
    ),
    (
        "events {}\nhttp { server {\n return 200 $nosuch;\n} }\n",
        "unknown \"nosuch\" variable",
        3,
    ),
    (
        "events {}\nhttp {\n include missing.conf;\n}\n",
        "missing.conf\" failed (2: No such file or directory)",
        3,
    ),
    (
        "events {}\nhttp {\n access_log /tmp/x nosuchformat;\n}\n",
        "unknown log format \"nosuchformat\"",
        3,
    ),
    (
        "events {}\nhttp {\n server { location ~ \"(\" { } }\n}\n",
        "pcre2_compile() failed: ",
        3,
    ),
    (
        "events {}\nhttp {\n server { location /a { location @n { } } }\n}\n",
        "named location \"@n\" can be on the server level only",
        3,
    ),
];

#[test]
fn errors_name_file_and_line_and_exit_1() {
    for &(text, msg, line) in BAD_CONFIGS {
        let (dir, out) = test_conf(text);
        let e = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{text}\n{e}");
        let path = dir.path().join("t.conf");
        assert!(
            e.contains("porter: [emerg] ") && e.contains(msg),
            "want {msg:?}\ngot {e}"
        );
        if !msg.contains("failed (2") {
            assert!(
                e.contains(&format!(" in {}:{line}", path.display())),
                "want line {line}:\n{e}"
            );
        }
        assert!(e.contains("test failed"), "{e}");
    }
}

/// The configuration from NGINX's thread-pool blog post must load as is
/// (only `root` pointed at a real directory).
#[test]
fn nginx_blog_config_loads_unchanged() {
    let docroot = TempDir::new("blogroot");
    let text = format!(
        "worker_processes 16; events {{ accept_mutex off; }} http {{ include mime.types; default_type application/octet-stream; access_log off; sendfile on; sendfile_max_chunk 512k; server {{ listen 8000; location / {{ root {}; }} }} }}",
        docroot.path().display()
    );
    let (_dir, out) = test_conf(&text);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn the_blog_config_serves_with_16_workers() {
    let docroot = TempDir::new("blogroot");
    docroot.write("file.bin", vec![7u8; 100_000]);
    let conf = format!(
        "worker_processes 16; events {{ accept_mutex off; }} http {{ include mime.types; default_type application/octet-stream; access_log off; sendfile on; sendfile_max_chunk 512k; server {{ listen 127.0.0.1:{{PORT}}; location / {{ root {}; }} }} }}\ndaemon off; pid {{PREFIX}}/p.pid;",
        docroot.path().display()
    );
    let s = Server::start(&conf);
    let r = get(s.port, "/file.bin");
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), 100_000);
    assert_eq!(r.header("Content-Type"), Some("application/octet-stream"));
    // 16 worker threads, named so `top -H` shows them.
    let count = || {
        std::fs::read_dir(format!("/proc/{}/task", s.child.id()))
            .unwrap()
            .filter_map(|t| std::fs::read_to_string(t.unwrap().path().join("comm")).ok())
            .filter(|c| c.starts_with("porter-w"))
            .count()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while count() < 16 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(count(), 16);
}

#[test]
fn dump_prints_every_file() {
    let dir = TempDir::new("dump");
    dir.write("inc.conf", "default_type text/x-inc;\n");
    dir.write(
        "t.conf",
        "events {}\nhttp { include inc.conf; access_log off; }\nerror_log stderr;\n",
    );
    let p = dir.path().to_str().unwrap().to_string();
    let out = run(&["-p", &p, "-c", "t.conf", "-T"]);
    assert!(out.status.success());
    let o = String::from_utf8_lossy(&out.stdout);
    assert!(
        o.contains(&format!(
            "# configuration file {}:",
            dir.path().join("t.conf").display()
        )),
        "{o}"
    );
    assert!(
        o.contains(&format!(
            "# configuration file {}:",
            dir.path().join("inc.conf").display()
        )),
        "{o}"
    );
    assert!(o.contains("default_type text/x-inc;"));
}

#[test]
fn embedded_default_dumps_and_tests() {
    let out = run(&["-T", "-r", "/tmp"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let o = String::from_utf8_lossy(&out.stdout);
    assert!(o.contains("listen 127.0.0.1:8080;"), "{o}");
    assert!(o.contains("root \"/tmp\";"), "{o}");
}

#[test]
fn globals_apply_and_conflict_like_nginx() {
    let dir = TempDir::new("glob");
    dir.write("t.conf", "daemon off;\nevents {}\nerror_log stderr;\n");
    let p = dir.path().to_str().unwrap().to_string();
    let out = run(&["-p", &p, "-c", "t.conf", "-g", "worker_processes 3;", "-t"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run(&["-p", &p, "-c", "t.conf", "-g", "daemon on;", "-t"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("\"daemon\" directive is duplicate"),
        "{}",
        stderr(&out)
    );
    let out = run(&["-p", &p, "-c", "t.conf", "-g", "bogus 1;", "-t"]);
    assert!(
        stderr(&out).contains(
            "unknown directive \"bogus\" (not an NGINX directive either: a typo, or a third-party module's) in command line"
        ),
        "{}",
        stderr(&out)
    );
}

#[test]
fn version_and_help() {
    let out = run(&["-V"]);
    assert!(out.status.success());
    assert!(stderr(&out).contains(concat!(
        "porter version: porter/",
        env!("CARGO_PKG_VERSION")
    )));
    let out = run(&["-h"]);
    assert!(out.status.success());
    let o = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "-c filename",
        "-p prefix",
        "-e filename",
        "-t ",
        "-T ",
        "-g directives",
        "-s signal",
        "-r dir",
    ] {
        assert!(o.contains(flag), "help lacks {flag}: {o}");
    }
    let out = run(&["-x"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("invalid option: \"x\""));
}

#[test]
fn config_error_at_start_exits_before_any_pid_file() {
    let dir = TempDir::new("badstart");
    dir.write(
        "t.conf",
        "daemon off;\npid {PREFIX}/p.pid;\nevents {}\nhttp { nonsense; }\n"
            .replace("{PREFIX}", dir.path().to_str().unwrap()),
    );
    let p = dir.path().to_str().unwrap().to_string();
    let out = run(&["-p", &p, "-c", "t.conf"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("unknown directive \"nonsense\""));
    assert!(!dir.path().join("p.pid").exists());
}

#[test]
fn bind_failure_is_reported_without_pid_file() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let dir = TempDir::new("bindfail");
    let text = format!(
        "daemon off;\npid {0}/p.pid;\nerror_log {0}/e.log;\nevents {{}}\nhttp {{ access_log off; server {{ listen 127.0.0.1:{port}; }} }}\n",
        dir.path().display()
    );
    dir.write("t.conf", text);
    let p = dir.path().to_str().unwrap().to_string();
    let out = run(&["-p", &p, "-c", "t.conf"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(&format!(
            "bind() to 127.0.0.1:{port} failed (98: Address already in use)"
        )),
        "{}",
        stderr(&out)
    );
    assert!(!dir.path().join("p.pid").exists());
}
