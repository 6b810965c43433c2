//! The files porter ships for deployment (pkg/: the Debian package's
//! configuration, systemd unit and man page, the container's and the
//! Kubernetes ConfigMap's configurations) agree with the binary and with
//! each other. Installing and running the package is pkg/debian/check's job
//! (.ci/run runs it); these catch a shipped config that no longer loads, an
//! option the man page misses, or a unit whose pid file, reload or stop
//! does not match porter's.

use std::path::{Path, PathBuf};

use crate::common::*;

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// `porter -t` on `text` in a fresh prefix holding mime.types; panics with
/// porter's output when the test fails.
fn porter_t(name: &str, text: &str) -> TempDir {
    let dir = TempDir::new("pkg");
    dir.write("mime.types", read("conf/mime.types"));
    let conf = dir.write(&format!("{name}.conf"), text);
    let p = dir.path().to_str().unwrap().to_string();
    let out = run(&["-t", "-p", &p, "-c", conf.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

/// The value of `KEY=` in the unit (first occurrence).
fn unit_value<'a>(unit: &'a str, key: &str) -> &'a str {
    unit.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}= in porter.service"))
}

/// Seconds of a `worker_shutdown_timeout Ns;` line in `conf`.
fn shutdown_timeout(conf: &str) -> u64 {
    let v = conf
        .lines()
        .find_map(|l| l.trim().strip_prefix("worker_shutdown_timeout "))
        .expect("worker_shutdown_timeout");
    v.trim_end_matches(';')
        .trim_end_matches('s')
        .parse()
        .unwrap()
}

#[test]
fn debian_config_loads() {
    // Its log and pid paths are the installed system's: point them into
    // the test's prefix.
    let dir = TempDir::new("pkg-logs");
    let d = dir.path().display().to_string();
    let text = read("pkg/debian/porter.conf")
        .replace("/var/log/porter/", &format!("{d}/"))
        .replace("/run/porter.pid", &format!("{d}/porter.pid"));
    porter_t("debian", &text);
}

#[test]
fn container_config_loads() {
    porter_t("container", &read("pkg/container/porter.conf"));
}

/// The porter.conf inside the ConfigMap of pkg/kubernetes/porter-cache.yaml.
fn k8s_conf() -> String {
    let yaml = read("pkg/kubernetes/porter-cache.yaml");
    let mut lines = yaml.lines().skip_while(|l| l.trim() != "porter.conf: |");
    lines.next().expect("porter.conf in the ConfigMap");
    let body: Vec<&str> = lines
        .take_while(|l| l.is_empty() || l.starts_with("    "))
        .collect();
    body.iter()
        .map(|l| l.get(4..).unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn kubernetes_config_loads() {
    // porter resolves upstream names when it loads; the cluster's Service
    // name does not resolve here.
    let text = k8s_conf().replace("origin.default.svc.cluster.local:80", "127.0.0.1:9");
    assert!(text.contains("127.0.0.1:9"), "{text}");
    porter_t("k8s", &text);
}

#[test]
fn kubernetes_grace_period_outlasts_the_graceful_stop() {
    let yaml = read("pkg/kubernetes/porter-cache.yaml");
    let grace: u64 = yaml
        .lines()
        .find_map(|l| l.trim().strip_prefix("terminationGracePeriodSeconds: "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(shutdown_timeout(&k8s_conf()) < grace);
    assert!(yaml.contains("-s quit"), "preStop must quit gracefully");
}

#[test]
fn unit_matches_porter() {
    let unit = read("pkg/debian/porter.service");
    let conf = read("pkg/debian/porter.conf");
    assert_eq!(unit_value(&unit, "Type"), "forking");
    let pid = unit_value(&unit, "PIDFile");
    assert!(
        conf.lines().any(|l| l == format!("pid {pid};")),
        "porter.conf's pid is not the unit's PIDFile {pid}"
    );
    assert!(!conf.contains("daemon off"), "Type=forking needs daemon on");
    assert!(unit_value(&unit, "ExecStartPre").contains(" -t "));
    assert!(unit.contains("-s reload\n"), "ExecReload");
    assert!(unit_value(&unit, "ExecStop").ends_with("-s quit"));
    assert!(unit_value(&unit, "LimitNOFILE").parse::<u64>().unwrap() >= 4096);
    let stop: u64 = unit_value(&unit, "TimeoutStopSec")
        .trim_end_matches('s')
        .parse()
        .unwrap();
    assert!(shutdown_timeout(&conf) < stop);
}

#[test]
fn man_page_describes_every_help_option() {
    let out = run(&["-h"]);
    let help = String::from_utf8_lossy(&out.stdout).into_owned();
    let man = read("pkg/debian/porter.8");
    let mut seen = 0;
    for line in help.lines() {
        let Some(opts) = line.trim_start().split(' ').next() else {
            continue;
        };
        if !line.starts_with("  -") {
            continue;
        }
        for opt in opts.split(',') {
            let flag = opt.trim_start_matches('-');
            let roff = format!("\\-{flag}");
            assert!(
                man.lines()
                    .any(|l| l.starts_with(".B") && l.contains(&roff)),
                "the man page has no entry for -{flag}"
            );
            seen += 1;
        }
    }
    assert!(seen >= 13, "parsed {seen} options from -h:\n{help}");
}

#[test]
fn deb_assets_exist() {
    let toml = read("Cargo.toml");
    let assets = toml
        .split("assets = [")
        .nth(1)
        .expect("[package.metadata.deb] assets");
    let mut n = 0;
    for line in assets.lines().take_while(|l| l.trim() != "]") {
        let Some(src) = line.trim().strip_prefix("[\"") else {
            continue;
        };
        let src = src.split('"').next().unwrap();
        if src.starts_with("target/") {
            continue;
        }
        assert!(repo(src).is_file(), "deb asset {src} is missing");
        n += 1;
    }
    assert!(n >= 10, "parsed {n} assets");
}

#[test]
fn the_init_script_runs_porter_as_the_unit_does() {
    let unit = read("pkg/debian/porter.service");
    let init = read("pkg/debian/porter.init");
    let var = |name: &str| {
        init.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("no {name}= in porter.init"))
    };
    let start = format!("{} -p {} -c {}", var("DAEMON"), var("PREFIX"), var("CONF"));
    assert_eq!(unit_value(&unit, "ExecStart"), start);
    // Its pid file is porter.conf's (read from it), the unit's PIDFile by
    // default.
    assert!(init.contains(&format!("PID=${{PID:-{}}}", unit_value(&unit, "PIDFile"))));
    // The actions Debian's nginx script has, upgrade among them.
    assert!(init.contains(
        "Usage: $NAME {start|stop|restart|reload|force-reload|status|configtest|rotate|upgrade}"
    ));
    let out = std::process::Command::new("sh")
        .args(["-n", repo("pkg/debian/porter.init").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
