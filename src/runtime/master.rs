//! The master: the process's main thread. It binds listeners, daemonises,
//! writes the pid file, starts a generation of workers and then waits for
//! signals: SIGHUP reloads (a new generation on the new config, the old one
//! finishing gracefully; a bad config is logged and the old one keeps
//! serving), SIGQUIT shuts down gracefully, SIGTERM/SIGINT quickly,
//! SIGUSR1 reopens the logs; SIGUSR2 and SIGWINCH are the binary upgrade
//! (`upgrade.rs`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use signal_hook::consts::{SIGCHLD, SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGWINCH};
use signal_hook::iterator::Signals;

use super::listen::Listeners;
use super::privileges::{self, Credentials};
use super::upgrade;
use super::worker::{self, WorkerStart};
use crate::cache::CacheSet;
use crate::config::{self, Config, LoadOptions};
use crate::disk::pool::PoolSet;
use crate::disk::{fastpath, uring};
use crate::log::{self, ErrorLog, Level};
use crate::util::errno_text;
use crate::util::shutdown::{self, Mode, ShutdownTrigger};

/// A running set of workers on one config.
struct Generation {
    config: Arc<Config>,
    pools: Arc<PoolSet>,
    caches: Arc<CacheSet>,
    trigger: ShutdownTrigger,
    threads: Vec<JoinHandle<()>>,
}

/// `client_body_temp_path` directories, made as NGINX's master makes its
/// temp paths and given to the workers' user (whose pool threads write the
/// bodies). A failure is logged and the bodies' own open fails later.
fn make_body_temp_paths(config: &Config, creds: &Option<Credentials>, log: &ErrorLog) {
    let owner = privileges::thread_user(creds).map(|u| u.ids);
    for p in &config.body_temp_paths {
        if let Err(e) = crate::disk::make_dir_owned(p, owner) {
            log.log(
                Level::Alert,
                format_args!("mkdir() \"{}\" failed {}", p.display(), errno_text(&e)),
            );
        }
    }
}

impl Generation {
    /// Starts the workers of `config`, with its thread pools (reusing the
    /// unchanged pools of `previous`).
    fn start(
        config: Arc<Config>,
        listeners: &Listeners,
        creds: &Option<Credentials>,
        log: &ErrorLog,
        previous: Option<(&PoolSet, &CacheSet)>,
    ) -> Result<Generation, String> {
        let pools = PoolSet::build(
            &config.main.thread_pools,
            previous.map(|p| p.0),
            privileges::thread_user(creds),
            log,
        )
        .map(Arc::new)
        .map_err(|e| format!("cannot start thread pool: {e}"))?;
        let caches = CacheSet::build(
            &config.cache_zones,
            previous.map(|p| p.1),
            privileges::thread_user(creds),
            log,
        )
        .map(Arc::new)?;
        make_body_temp_paths(&config, creds, log);
        let (trigger, signal) = shutdown::channel();
        let mut threads = Vec::new();
        for i in 0..config.main.worker_processes {
            let socks = listeners
                .for_worker(&config, i)
                .map_err(|e| format!("dup() of listening socket failed {}", errno_text(&e)))?;
            let unix = listeners
                .unix_for_worker(&config)
                .map_err(|e| format!("dup() of listening socket failed {}", errno_text(&e)))?;
            let quic = listeners
                .udp_for_worker(&config, i)
                .map_err(|e| format!("dup() of QUIC socket failed {}", errno_text(&e)))?;
            let t = worker::spawn(WorkerStart {
                index: i,
                config: config.clone(),
                log: log.clone(),
                listeners: socks,
                unix,
                quic,
                credentials: creds.clone(),
                shutdown: signal.clone(),
                pools: pools.clone(),
                caches: caches.clone(),
            });
            match t {
                Ok(t) => threads.push(t),
                Err(e) => {
                    trigger.set(Mode::Fast);
                    return Err(format!("cannot start worker thread: {e}"));
                }
            }
        }
        drop(signal);
        Ok(Generation {
            config,
            pools,
            caches,
            trigger,
            threads,
        })
    }

    /// Graceful stop in the background, escalated to fast after
    /// `worker_shutdown_timeout`.
    fn retire(self) {
        self.trigger.set(Mode::Graceful);
        let timeout = self.config.main.worker_shutdown_timeout;
        let Generation {
            threads, trigger, ..
        } = self;
        std::thread::Builder::new()
            .name("porter-retire".into())
            .spawn(move || {
                let poll = Duration::from_millis(20);
                join_workers(threads, &trigger, timeout, poll, &mut || false)
            })
            .ok();
    }

    /// Graceful stop, waiting for the workers (escalating to fast after
    /// `worker_shutdown_timeout`, or on a SIGTERM or SIGINT meanwhile, as
    /// NGINX's master obeys one while it waits for its workers to quit).
    fn stop_and_wait(self, mode: Mode, signals: &mut Signals) {
        self.trigger.set(mode);
        let timeout = self.config.main.worker_shutdown_timeout;
        let mut term = || signals.pending().any(|s| s == SIGTERM || s == SIGINT);
        let poll = Duration::from_millis(10);
        join_workers(self.threads, &self.trigger, timeout, poll, &mut term);
    }
}

/// Waits for a generation's worker `threads`, looking every `poll`; once
/// `timeout` (`worker_shutdown_timeout`) has passed since the call, or
/// `fast_now` says so, the stop turns fast.
fn join_workers(
    threads: Vec<JoinHandle<()>>,
    trigger: &ShutdownTrigger,
    timeout: Option<Duration>,
    poll: Duration,
    fast_now: &mut dyn FnMut() -> bool,
) {
    let deadline = timeout.map(|t| Instant::now() + t);
    for t in threads {
        while !t.is_finished() {
            if deadline.is_some_and(|d| Instant::now() >= d) || fast_now() {
                trigger.set(Mode::Fast);
            }
            std::thread::sleep(poll);
        }
        let _ = t.join();
    }
}

/// Who workers run as: the `user` directive, or NGINX's `nobody` default
/// when started as root with a config file. The embedded default config
/// serves as the invoking user.
fn credentials(
    cfg: &Config,
    embedded: bool,
    log: &ErrorLog,
) -> Result<Option<Credentials>, String> {
    let root = rustix::process::geteuid().is_root();
    let user = match (&cfg.main.user, embedded) {
        (Some(u), _) => Some(u.clone()),
        (None, false) => Some(("nobody".to_string(), None)),
        (None, true) => None,
    };
    match user {
        Some((u, g)) if root => privileges::resolve(&u, g.as_deref()).map(Some),
        Some(_) if cfg.main.user.is_some() => {
            log.log(
                Level::Warn,
                format_args!("the \"user\" directive makes sense only if the master process runs with super-user privileges, ignored"),
            );
            Ok(None)
        }
        _ => Ok(None),
    }
}

fn write_pid(path: &Path) -> Result<(), String> {
    std::fs::write(path, format!("{}\n", std::process::id()))
        .map_err(|e| format!("open() \"{}\" failed {}", path.display(), errno_text(&e)))
}

fn set_rlimit(n: u64) -> Result<(), String> {
    let lim = rustix::process::Rlimit {
        current: Some(n),
        maximum: Some(n),
    };
    rustix::process::setrlimit(rustix::process::Resource::Nofile, lim).map_err(|e| {
        format!(
            "setrlimit(RLIMIT_NOFILE, {n}) failed ({}: {})",
            e.raw_os_error(),
            errno_text(&e.into())
        )
    })
}

/// Forks into the background (NGINX's `daemon on`): the parent exits, the
/// child starts a new session with stdin/stdout on /dev/null.
fn daemonize(keep_stderr: bool) -> Result<(), String> {
    use nix::unistd::{fork, setsid, ForkResult};
    // SAFETY: called before any thread is started, so the child is a full
    // copy of a single-threaded process.
    match unsafe { fork() } {
        Ok(ForkResult::Parent { .. }) => std::process::exit(0),
        Ok(ForkResult::Child) => {}
        Err(e) => return Err(format!("fork() failed ({}: {})", e as i32, e.desc())),
    }
    setsid().map_err(|e| format!("setsid() failed ({}: {})", e as i32, e.desc()))?;
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .map_err(|e| format!("open(\"/dev/null\") failed {}", errno_text(&e)))?;
    use std::os::fd::AsRawFd;
    let mut fds = vec![0, 1];
    if !keep_stderr {
        fds.push(2);
    }
    for fd in fds {
        // SAFETY: dup2 onto the standard descriptors of this process.
        unsafe { libc::dup2(null.as_raw_fd(), fd) };
    }
    Ok(())
}

/// Runs the server until it is told to stop; returns the exit code.
pub fn run(opts: LoadOptions, prog: &str) -> i32 {
    let loaded = match config::load(&opts) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("{prog}: [emerg] {e}");
            return 1;
        }
    };
    let embedded = opts.conf_file.is_none();
    let cfg = Arc::new(loaded.config);
    let log = ErrorLog::new(cfg.main.error_log.clone());
    let logs_to_stderr = cfg.main.error_log.iter().any(|t| t.file.is_stderr());
    let fail = |log: &ErrorLog, msg: String| {
        log.log(Level::Emerg, format_args!("{msg}"));
        if !logs_to_stderr {
            eprintln!("{prog}: [emerg] {msg}");
        }
        log::flush();
        1
    };

    let (prepared, mut signals) = match prepare(&cfg, embedded, &log, logs_to_stderr) {
        Ok(p) => p,
        Err(e) => return fail(&log, e),
    };
    let Prepared {
        listeners,
        creds,
        pid_path,
        daemonized,
        inherited_from,
    } = prepared;
    let current = match Generation::start(cfg.clone(), &listeners, &creds, &log, None) {
        Ok(g) => g,
        Err(e) => {
            remove_pid(&pid_path);
            return fail(&log, e);
        }
    };
    log.log(
        Level::Notice,
        format_args!(
            "porter/{} started, {} workers{}",
            env!("CARGO_PKG_VERSION"),
            cfg.main.worker_processes,
            if embedded {
                open_at(&cfg, &opts)
            } else {
                String::new()
            }
        ),
    );
    crate::acme::manager::apply(cfg.acme.clone(), &log);

    let mut master = Master {
        opts: &opts,
        embedded,
        listeners,
        cfg,
        log,
        creds,
        current: Some(current),
        pid_path,
        daemonized,
        inherited_from,
        new_binary: None,
    };
    let exit_mode = master.wait_for_stop(&mut signals);
    master.exit(exit_mode, &mut signals);
    0
}

/// What [`prepare`] sets up for the master.
struct Prepared {
    listeners: Listeners,
    creds: Option<Credentials>,
    pid_path: Option<PathBuf>,
    /// In the background (`daemon on`, or started by a binary upgrade, as
    /// NGINX counts it): SIGWINCH is obeyed only then, being the terminal's
    /// resize signal otherwise.
    daemonized: bool,
    /// Started by a binary upgrade from this (old binary's) pid.
    inherited_from: Option<i32>,
}

/// Everything before the first generation starts: listening sockets,
/// the workers' user, `worker_rlimit_nofile`, `daemon`, signal handlers,
/// the log writer, the pid file and the fast-path probe.
fn prepare(
    cfg: &Arc<Config>,
    embedded: bool,
    log: &ErrorLog,
    logs_to_stderr: bool,
) -> Result<(Prepared, Signals), String> {
    let mut inherited = upgrade::take_inherited(log);
    let mut listeners = match inherited.as_mut() {
        Some(i) => Listeners::inherit(std::mem::take(&mut i.sockets), std::mem::take(&mut i.udp))
            .map_err(|e| {
            format!(
                "getsockname() of an inherited socket failed {}",
                errno_text(&e)
            )
        })?,
        None => Listeners::default(),
    };
    listeners.update(cfg)?;
    let creds = credentials(cfg, embedded, log)?;
    if let Some(n) = cfg.main.worker_rlimit_nofile {
        if let Err(e) = set_rlimit(n) {
            log.log(Level::Alert, format_args!("{e}"));
        }
    }
    // Disk threads go under SCHED_IDLE only if the watch thread, started
    // below with the master's credentials, can lift them out of it.
    if !crate::disk::priority::probe_boost() {
        log.log(
            Level::Notice,
            format_args!(
                "disk threads run 5 nice steps below the workers: no CAP_SYS_NICE for \
                 SCHED_IDLE; fix: start porter as root or give it CAP_SYS_NICE (systemd: \
                 AmbientCapabilities=CAP_SYS_NICE)"
            ),
        );
    }
    // A connection, an upstream connection and a socket lent to a pool
    // thread per `worker_connections`, plus open files (`fd_table`).
    let workers = cfg.main.worker_processes.max(1) as u64;
    let want = workers * cfg.main.worker_connections as u64 * 3 + 1024;
    if let Err(e) = super::fd_table::grow(want) {
        log.log(
            Level::Info,
            format_args!("growing the descriptor table failed {}", errno_text(&e)),
        );
    }
    // A new binary stays the old one's child (NGINX's `ngx_inherited`).
    if cfg.main.daemon && inherited.is_none() {
        daemonize(logs_to_stderr)?;
    }
    // After the fork of `daemon on`, which keeps only this thread.
    super::loop_watch::start();
    let signals = Signals::new([
        SIGHUP, SIGQUIT, SIGTERM, SIGINT, SIGUSR1, SIGUSR2, SIGWINCH, SIGCHLD,
    ])
    .map_err(|e| format!("cannot install signal handlers: {e}"))?;
    log::start_writer();
    // Access logs whose path has variables open their files as the
    // workers' user.
    log::by_path::start(privileges::thread_user(&creds));
    let pid_path: Option<PathBuf> = cfg.main.pid.clone();
    if let Some(p) = &pid_path {
        write_pid(p)?;
    }
    startup_notices(cfg, &creds, log);
    let prepared = Prepared {
        listeners,
        creds,
        pid_path,
        daemonized: cfg.main.daemon || inherited.is_some(),
        inherited_from: inherited.map(|i| i.parent),
    };
    Ok((prepared, signals))
}

/// The start-up lines about the disk and TLS routes, once, and the code
/// lock.
fn startup_notices(cfg: &Config, creds: &Option<Credentials>, log: &ErrorLog) {
    for m in fastpath::probe() {
        log.log(Level::Notice, format_args!("aio_fast_path: {m}"));
    }
    uring_notice(cfg, log);
    super::notices::disk_routes(cfg, log);
    super::notices::files_not_owned(cfg, creds, log);
    if cfg.listens.iter().any(|l| l.ssl) {
        ktls_notice(cfg, log);
    }
    if let Err(e) = super::code_lock::lock_code() {
        log.log(
            Level::Notice,
            format_args!(
                "mlock() of porter's code failed {}: under memory pressure its pages may be \
                 read back from the disk",
                errno_text(&e)
            ),
        );
    }
}

/// The one start-up line about kernel TLS (probed once, `tls::ktls`):
/// whether HTTP/1.x TLS connections move to the kernel after their
/// handshake (and `sendfile` works on them), or stay in user space
/// (rustls) and why.
fn ktls_notice(cfg: &Config, log: &ErrorLog) {
    let wanted = cfg
        .listens
        .iter()
        .flat_map(|l| l.servers.iter())
        .any(|s| s.tls.as_ref().is_some_and(|t| t.ktls));
    let support = crate::tls::ktls::probe();
    let why = match &support.why_not {
        _ if !wanted => "\"ssl_ktls off\"".to_string(),
        Some(why) => format!("{why} (kTLS)"),
        None => {
            let ciphers: Vec<&str> = support.ciphers.iter().map(|c| c.name()).collect();
            log.log(
                Level::Notice,
                format_args!(
                    "kTLS: the kernel encrypts TLS records ({}) of HTTP/1.x connections after \
                     the handshake; files are sent with sendfile on them",
                    ciphers.join(", ")
                ),
            );
            return;
        }
    };
    log.log(
        Level::Notice,
        format_args!("TLS is encrypted in user space: {why}; TLS connections send files by read and write, not sendfile"),
    );
}

/// The master while it runs: the live generation and what a reload
/// replaces.
pub(super) struct Master<'a> {
    opts: &'a LoadOptions,
    embedded: bool,
    pub(super) listeners: Listeners,
    cfg: Arc<Config>,
    pub(super) log: ErrorLog,
    creds: Option<Credentials>,
    /// `None` after SIGWINCH stopped the workers (binary upgrade).
    current: Option<Generation>,
    pub(super) pid_path: Option<PathBuf>,
    pub(super) daemonized: bool,
    pub(super) inherited_from: Option<i32>,
    /// The new binary of an upgrade in progress.
    pub(super) new_binary: Option<upgrade::NewBinary>,
}

impl Master<'_> {
    /// Handles signals until one says stop (SIGQUIT: graceful; SIGTERM,
    /// SIGINT: fast); SIGHUP reloads.
    fn wait_for_stop(&mut self, signals: &mut Signals) -> Mode {
        loop {
            // NGINX looks at `ngx_terminate` before `ngx_quit`: a SIGTERM
            // that came with a SIGQUIT makes the stop fast.
            let batch: Vec<i32> = signals.wait().collect();
            let fast = batch.iter().any(|&s| s == SIGTERM || s == SIGINT);
            for sig in batch.into_iter().filter(|&s| !(fast && s == SIGQUIT)) {
                match sig {
                    SIGHUP => self.reload(sig),
                    SIGQUIT => {
                        self.log.log(
                            Level::Notice,
                            format_args!(
                                "signal {sig} (SIGQUIT) received, shutting down gracefully"
                            ),
                        );
                        return Mode::Graceful;
                    }
                    SIGTERM | SIGINT => {
                        self.log.log(
                            Level::Notice,
                            format_args!("signal {sig} received, exiting"),
                        );
                        return Mode::Fast;
                    }
                    SIGUSR1 => self.reopen_logs(sig),
                    SIGUSR2 => self.change_binary(sig),
                    SIGWINCH => self.stop_accepting(sig),
                    SIGCHLD => self.reap_new_binary(),
                    _ => {}
                }
            }
        }
    }

    /// SIGUSR1: every access and error log is opened again under its
    /// name (after a rotation), owned by the workers' user as NGINX does.
    fn reopen_logs(&self, sig: i32) {
        self.log.log(
            Level::Notice,
            format_args!("signal {sig} (SIGUSR1) received, reopening logs"),
        );
        let owner = self.creds.as_ref().map(|c| c.ids().0);
        for e in log::reopen(owner) {
            self.log.log(Level::Emerg, format_args!("{e}"));
        }
    }

    /// SIGHUP: the configuration is loaded again and a new generation
    /// replaces the old one; on any error the old one keeps serving.
    fn reload(&mut self, sig: i32) {
        if self.current.is_none() {
            return self.start_workers_again(sig);
        }
        let log = &self.log;
        log.log(
            Level::Notice,
            format_args!("signal {sig} (SIGHUP) received, reconfiguring"),
        );
        let (new_cfg, new_log, new_creds) =
            match reload(self.opts, &mut self.listeners, self.embedded, log) {
                Ok(r) => {
                    uring_notice(&r.0, &r.1);
                    r
                }
                Err(e) => {
                    log.log(Level::Emerg, format_args!("{e}"));
                    log.log(
                        Level::Notice,
                        format_args!("reload failed, the old configuration keeps serving"),
                    );
                    return;
                }
            };
        let previous = self.current.as_ref().map(|g| (&*g.pools, &*g.caches));
        match Generation::start(
            new_cfg.clone(),
            &self.listeners,
            &new_creds,
            &new_log,
            previous,
        ) {
            Ok(next) => {
                if let Some(old) = self.current.replace(next) {
                    old.retire();
                }
                self.cfg = new_cfg;
                self.log = new_log;
                crate::acme::manager::apply(self.cfg.acme.clone(), &self.log);
                self.creds = new_creds;
                self.log.log(
                    Level::Notice,
                    format_args!("reconfigured, {} workers", self.cfg.main.worker_processes),
                );
            }
            Err(e) => self.log.log(Level::Emerg, format_args!("{e}")),
        }
    }
}

impl Master<'_> {
    /// The end: listeners closed first (new connections are refused while
    /// the workers finish what they have), the workers stopped, the pid
    /// file removed (`.oldbin` while a new binary runs: that one's pid
    /// file is the other's).
    fn exit(mut self, mode: Mode, signals: &mut Signals) {
        if self.new_binary.is_none() {
            self.listeners.remove_unix_files();
        }
        drop(self.listeners);
        match self.current {
            Some(g) if mode == Mode::Graceful => g.stop_and_wait(Mode::Graceful, signals),
            Some(g) => g.trigger.set(Mode::Fast),
            None => {}
        }
        self.log.log(Level::Notice, format_args!("exit"));
        let mut pid_path = self.pid_path;
        if self.new_binary.is_some() {
            pid_path = pid_path.as_deref().map(upgrade::oldbin_path);
        }
        remove_pid(&pid_path);
        log::shutdown();
    }

    /// SIGWINCH (upgrade): the workers stop gracefully, the master stays.
    pub(super) fn stop_workers(&mut self) {
        if let Some(g) = self.current.take() {
            g.retire();
        }
    }

    /// SIGHUP after SIGWINCH (rollback), or the new binary gone: the
    /// workers start again on the configuration they had.
    pub(super) fn start_workers_again(&mut self, sig: i32) {
        if self.current.is_some() {
            return;
        }
        if sig != 0 {
            self.log.log(
                Level::Notice,
                format_args!("signal {sig} (SIGHUP) received, starting worker processes"),
            );
        }
        let g = Generation::start(
            self.cfg.clone(),
            &self.listeners,
            &self.creds,
            &self.log,
            None,
        );
        match g {
            Ok(g) => self.current = Some(g),
            Err(e) => self.log.log(Level::Emerg, format_args!("{e}")),
        }
    }
}

/// With `aio on` in `cfg` and no io_uring: the fallback's one notice.
fn uring_notice(cfg: &Config, log: &ErrorLog) {
    if let Some(m) = cfg
        .main
        .aio_on_at
        .as_deref()
        .and_then(uring::fallback_notice)
    {
        log.log(Level::Notice, format_args!("{m}"));
    }
}

/// The embedded configuration's start-up line ends with what it serves and
/// the URL to open (a wildcard address is opened as loopback).
fn open_at(cfg: &Config, opts: &LoadOptions) -> String {
    let Some(addr) = cfg.listens.first().map(|l| l.addr) else {
        return String::new();
    };
    let host = match addr.ip() {
        ip if ip.is_unspecified() && ip.is_ipv4() => "127.0.0.1".to_string(),
        ip if ip.is_unspecified() => "[::1]".to_string(),
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        ip => ip.to_string(),
    };
    format!(
        ", serving {} at http://{host}:{}/",
        config::embedded_root(opts).display(),
        addr.port()
    )
}

fn remove_pid(p: &Option<PathBuf>) {
    if let Some(p) = p {
        let _ = std::fs::remove_file(p);
    }
}

type Reloaded = (Arc<Config>, ErrorLog, Option<Credentials>);

fn reload(
    opts: &LoadOptions,
    listeners: &mut Listeners,
    embedded: bool,
    log: &ErrorLog,
) -> Result<Reloaded, String> {
    let loaded = config::load(opts).map_err(|e| e.to_string())?;
    let cfg = Arc::new(loaded.config);
    let new_log = ErrorLog::new(cfg.main.error_log.clone());
    let creds = credentials(&cfg, embedded, log)?;
    listeners.update(&cfg)?;
    Ok((cfg, new_log, creds))
}
