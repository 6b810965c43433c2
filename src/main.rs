//! The `porter` command: NGINX's command-line interface (`-c -p -e -t -T
//! -g -s -V -h`), plus `-r DIR` to serve a directory with the embedded
//! default configuration.

use std::path::PathBuf;
use std::process::ExitCode;

use porter::config::{self, LoadOptions};
use porter::runtime::master;

const PROG: &str = "porter";

/// The NGINX release whose behaviour porter follows (Debian's build).
const NGINX_VERSION: &str = "1.22.1";

fn usage() -> String {
    format!(
        "porter version: porter/{v}
Usage: porter [-?hvVtTq] [-s signal] [-p prefix] [-e filename] [-c filename] [-g directives] [-r dir] [-l address]

Options:
  -?,-h         : this help
  -v            : show version and exit
  -V            : show version and features, and exit
  -t            : test configuration and exit
  -T            : test configuration, dump it and exit
  -q            : suppress non-error messages during configuration testing
  -s signal     : send signal to the running server: stop, quit, reopen, reload
  -p prefix     : set prefix path (default: the current directory)
  -e filename   : set error log file (default: logs/error.log; \"stderr\" allowed)
  -c filename   : set configuration file (default: the embedded configuration)
  -g directives : set global directives out of configuration file
  -r dir        : directory served by the embedded configuration (default: .)
  -l address    : where the embedded configuration listens: [addr:]port
                  (default: 127.0.0.1:8080)
",
        v = env!("CARGO_PKG_VERSION")
    )
}

struct Cli {
    opts: LoadOptions,
    test: bool,
    dump: bool,
    quiet: bool,
    signal: Option<String>,
}

fn parse_args() -> Result<Option<Cli>, String> {
    let mut args = std::env::args().skip(1);
    let mut cli = Cli {
        opts: LoadOptions::default(),
        test: false,
        dump: false,
        quiet: false,
        signal: None,
    };
    let mut prefix: Option<PathBuf> = None;
    while let Some(a) = args.next() {
        let Some(flags) = a.strip_prefix('-') else {
            return Err(format!("invalid option: \"{a}\""));
        };
        let mut chars = flags.chars();
        while let Some(c) = chars.next() {
            let rest: String = chars.clone().collect();
            let mut value = |name: &str| -> Result<String, String> {
                if !rest.is_empty() {
                    Ok(rest.clone())
                } else {
                    args.next()
                        .ok_or_else(|| format!("option \"-{name}\" requires {}", arg_name(name)))
                }
            };
            match c {
                '?' | 'h' => {
                    print!("{}", usage());
                    return Ok(None);
                }
                'v' => {
                    eprintln!("porter version: porter/{}", env!("CARGO_PKG_VERSION"));
                    return Ok(None);
                }
                'V' => {
                    print_version_features();
                    return Ok(None);
                }
                't' => cli.test = true,
                'T' => {
                    cli.test = true;
                    cli.dump = true;
                }
                'q' => cli.quiet = true,
                's' | 'p' | 'e' | 'c' | 'g' | 'r' | 'l' => {
                    let v = value(&c.to_string())?;
                    match c {
                        's' => {
                            if !matches!(v.as_str(), "stop" | "quit" | "reopen" | "reload") {
                                return Err(format!("invalid option: \"-s {v}\""));
                            }
                            cli.signal = Some(v)
                        }
                        'p' => prefix = Some(PathBuf::from(v)),
                        'e' => cli.opts.error_log = Some(v),
                        'c' => cli.opts.conf_file = Some(PathBuf::from(v)),
                        'g' => cli.opts.globals = Some(v),
                        'l' => cli.opts.listen = Some(parse_listen(&v)?),
                        _ => cli.opts.root = Some(PathBuf::from(v)),
                    }
                    break;
                }
                _ => return Err(format!("invalid option: \"{c}\"")),
            }
        }
    }
    let cwd = std::env::current_dir().map_err(|e| format!("getcwd() failed: {e}"))?;
    let prefix = prefix.map(|p| cwd.join(p)).unwrap_or(cwd.clone());
    cli.opts.conf_file = cli.opts.conf_file.map(|c| prefix.join(c));
    cli.opts.root = cli.opts.root.map(|r| cwd.join(r));
    cli.opts.prefix = prefix;
    Ok(Some(cli))
}

/// `-V`: the version, the NGINX release porter answers as, NGINX's
/// `configure arguments:` line and porter's own features.
fn print_version_features() {
    eprintln!("porter version: porter/{}", env!("CARGO_PKG_VERSION"));
    // The NGINX release porter answers as, in NGINX's words,
    // and its configure arguments: what tools that read
    // `nginx -V` (NGINX's test suite) go by.
    eprintln!("nginx version: nginx/{NGINX_VERSION} (the NGINX release porter answers as)");
    if config::modules::has_tls() {
        eprintln!("TLS SNI support enabled");
    }
    eprintln!(
        "configure arguments: {}",
        config::modules::configure_arguments()
    );
    eprintln!(
        "features: worker threads with SO_REUSEPORT listeners, sendfile, \
             openat2 (disable_symlinks), NGINX config syntax"
    );
    eprintln!("disk I/O: aio off (inline)");
}

/// `-l`: `PORT` (on 127.0.0.1) or `ADDR:PORT` (`[::1]:PORT` for IPv6).
fn parse_listen(v: &str) -> Result<std::net::SocketAddr, String> {
    let bad = || format!("invalid address \"{v}\" of \"-l\"");
    match v.parse::<u16>() {
        Ok(port) => Ok((std::net::Ipv4Addr::LOCALHOST, port).into()),
        Err(_) => v.parse().map_err(|_| bad()),
    }
}

fn arg_name(flag: &str) -> &'static str {
    match flag {
        "s" => "signal name",
        "p" => "prefix path",
        "e" => "file name",
        "c" => "file name",
        "g" => "directives",
        "l" => "address",
        _ => "directory",
    }
}

fn send_signal(opts: &LoadOptions, name: &str) -> Result<(), String> {
    let loaded = config::load(opts).map_err(|e| e.to_string())?;
    let pid_path = loaded
        .config
        .main
        .pid
        .ok_or_else(|| "no pid file configured".to_string())?;
    let text = std::fs::read_to_string(&pid_path).map_err(|e| {
        format!(
            "open() \"{}\" failed {}",
            pid_path.display(),
            porter::util::errno_text(&e)
        )
    })?;
    let pid: i32 = text.trim().parse().map_err(|_| {
        format!(
            "invalid PID number \"{}\" in \"{}\"",
            text.trim(),
            pid_path.display()
        )
    })?;
    let sig = match name {
        "stop" => rustix::process::Signal::TERM,
        "quit" => rustix::process::Signal::QUIT,
        "reopen" => rustix::process::Signal::USR1,
        _ => rustix::process::Signal::HUP,
    };
    let p = rustix::process::Pid::from_raw(pid)
        .ok_or_else(|| format!("invalid PID number \"{pid}\" in \"{}\"", pid_path.display()))?;
    rustix::process::kill_process(p, sig).map_err(|e| {
        format!(
            "kill({pid}, {}) failed {}",
            sig.as_raw(),
            porter::util::errno_text(&e.into())
        )
    })
}

fn main() -> ExitCode {
    let cli = match parse_args() {
        Ok(Some(c)) => c,
        Ok(None) => return ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{PROG}: {e}");
            eprint!("{}", usage());
            return ExitCode::from(1);
        }
    };
    porter::util::time::load_zone();
    let name = config::conf_name(&cli.opts);
    if let Some(sig) = &cli.signal {
        return match send_signal(&cli.opts, sig) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("{PROG}: [error] {e}");
                ExitCode::from(1)
            }
        };
    }
    if cli.test {
        return match config::load(&cli.opts) {
            Ok(loaded) => {
                let aio_on = loaded.config.main.aio_on_at.as_deref();
                if let Some(m) = aio_on.and_then(porter::disk::uring::fallback_notice) {
                    eprintln!("{PROG}: [notice] {m}");
                }
                if !cli.quiet {
                    eprintln!("{PROG}: the configuration file {name} syntax is ok");
                    eprintln!("{PROG}: configuration file {name} test is successful");
                }
                if cli.dump {
                    for (file, text) in &loaded.sources {
                        println!("# configuration file {file}:");
                        print!("{text}");
                        if !text.ends_with('\n') {
                            println!();
                        }
                        println!();
                    }
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{PROG}: [emerg] {e}");
                eprintln!("{PROG}: configuration file {name} test failed");
                ExitCode::from(1)
            }
        };
    }
    match master::run(cli.opts, PROG) {
        0 => ExitCode::SUCCESS,
        n => ExitCode::from(n as u8),
    }
}
