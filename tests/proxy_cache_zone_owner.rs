//! A cache zone belongs to the module whose `*_cache_path` declared it:
//! `proxy_cache` naming a `fastcgi_cache_path` zone (or the other way
//! round, whichever comes first in the file) is refused at load with
//! NGINX's `the shared memory zone "z" is already declared for a
//! different use`, at the later line, as Debian's nginx 1.22 run beside
//! porter says it.

use std::process::Command;

use crate::common::{TempDir, BIN, NGINX};

/// `porter -t` and `nginx -t` on `http` (with `{D}` the directory):
/// their stderr.
fn both_t(dir: &TempDir, name: &str, http: &str) -> (String, Option<String>) {
    let d = dir.path().display().to_string();
    let conf = dir.write(
        name,
        format!(
            "pid {d}/{name}.pid;\nerror_log {d}/e.log;\nevents {{}}\nhttp {{\n{}\n}}\n",
            http.replace("{D}", &d)
        ),
    );
    let porter = Command::new(BIN)
        .args(["-p", &d, "-c"])
        .arg(&conf)
        .arg("-t")
        .output()
        .unwrap();
    let nginx = std::path::Path::new(NGINX).exists().then(|| {
        let out = Command::new(NGINX)
            .args(["-p", &d, "-e", "/dev/null", "-c"])
            .arg(&conf)
            .arg("-t")
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stderr).into_owned()
    });
    (String::from_utf8_lossy(&porter.stderr).into_owned(), nginx)
}

#[test]
fn a_zone_of_another_module_is_refused_where_nginx_refuses_it() {
    let dir = TempDir::new("zoneowner");
    let cases = [
        // Declared by FastCGI, named by the proxy: refused at its line, 7.
        (
            "fastcgi_cache_path {D}/c keys_zone=z:1m;\n\
             server { listen 127.0.0.1:1;\n\
             location / { proxy_cache z; proxy_pass http://127.0.0.1:1; } }",
            Some(7),
        ),
        // Named by uwsgi first, declared by the proxy after: refused too;
        // nginx names the declaration's line (7), porter, which reads a
        // block's own directives before its nested blocks, the use's (6).
        (
            "server { listen 127.0.0.1:1;\n\
             location / { uwsgi_cache z; uwsgi_pass 127.0.0.1:1; } }\n\
             proxy_cache_path {D}/c keys_zone=z:1m;",
            Some(6),
        ),
        // The same module's zone, and a variable name: accepted.
        (
            "scgi_cache_path {D}/c keys_zone=z:1m;\n\
             server { listen 127.0.0.1:1;\n\
             location / { scgi_cache z; scgi_pass 127.0.0.1:1; }\n\
             location /v { proxy_cache $arg_z; proxy_pass http://127.0.0.1:1; } }",
            None,
        ),
    ];
    for (i, (http, line)) in cases.iter().enumerate() {
        let name = format!("c{i}.conf");
        let (porter, nginx) = both_t(&dir, &name, http);
        let conf = dir.path().join(&name);
        match line {
            Some(l) => {
                let want = format!(
                    "[emerg] the shared memory zone \"z\" is already declared for a different use in {}:{l}",
                    conf.display()
                );
                assert!(porter.contains(&want), "case {i}: porter said {porter}");
                if let Some(n) = nginx {
                    let want = match i {
                        1 => want.replace(":6", ":7"),
                        _ => want,
                    };
                    assert!(n.contains(&want), "case {i}: nginx said {n}");
                }
            }
            None => {
                assert!(porter.contains("test is successful"), "case {i}: {porter}");
                if let Some(n) = nginx {
                    assert!(n.contains("test is successful"), "case {i}: nginx said {n}");
                }
            }
        }
    }
}
