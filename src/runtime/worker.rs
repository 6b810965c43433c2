//! A worker: one thread running a single-threaded tokio event loop, with
//! its own `SO_REUSEPORT` listeners. A connection lives on the worker that
//! accepted it, start to end.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::net::{TcpListener, TcpStream, UnixListener};
use tokio::sync::Notify;

use super::loop_watch;
use super::privileges::{self, Credentials};
use crate::config::Config;
use crate::disk::pool::PoolSet;
use crate::disk::uring::{self, Ring};
use crate::disk::Disk;
use crate::handlers::Handlers;
use crate::http::connection::{self, WorkerEnv};
use crate::http::context::ConnInfo;
use crate::http::reuse;
use crate::log::{ErrorLog, Level};
use crate::metrics::{self, Gauge};
use crate::util::shutdown::{Mode, ShutdownSignal};

/// How long accepting pauses after running out of file descriptors
/// (NGINX: 500 ms).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(500);

/// Everything a worker thread starts with.
pub struct WorkerStart {
    /// Worker index within the generation.
    pub index: usize,
    /// The configuration it serves.
    pub config: Arc<Config>,
    /// Its error log.
    pub log: ErrorLog,
    /// Its listeners: (index into `config.listens`, socket).
    pub listeners: Vec<(usize, std::net::TcpListener)>,
    /// Its `listen unix:` sockets: (index into `config.listens`, socket),
    /// the one socket of the address shared by every worker.
    pub unix: Vec<(usize, std::os::unix::net::UnixListener)>,
    /// Its UDP sockets of `listen ... quic` addresses (one QUIC endpoint
    /// each) and of stream `listen ... udp` ones (`stream::udp`): (index
    /// into `config.listens`, socket).
    pub quic: Vec<(usize, std::net::UdpSocket)>,
    /// Whom to run as.
    pub credentials: Option<Credentials>,
    /// Shutdown signal of its generation.
    pub shutdown: ShutdownSignal,
    /// The thread pools of its generation.
    pub pools: Arc<PoolSet>,
    /// The proxy cache zones of its generation.
    pub caches: Arc<crate::cache::CacheSet>,
}

/// Starts a worker thread.
pub fn spawn(start: WorkerStart) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(format!("porter-w{}", start.index))
        .spawn(move || run(start))
}

fn run(start: WorkerStart) {
    // Kept-open cache entries get a share of the descriptor limit.
    if let Some(l) = rustix::process::getrlimit(rustix::process::Resource::Nofile).current {
        crate::cache::open_entries::set_budget(l, start.config.main.worker_processes);
    }
    // Before the privilege drop: only root may lower a nice value.
    if let Some(n) = start.config.main.worker_priority {
        set_priority(&start.log, n);
    }
    if let Some(a) = &start.config.main.worker_cpu_affinity {
        set_affinity(&start.log, a, start.index);
    }
    if let Some(c) = &start.credentials {
        if let Err(e) = privileges::drop_thread(c) {
            start.log.log(
                Level::Emerg,
                format_args!("setuid({}) failed {}", c.name, crate::util::errno_text(&e)),
            );
            return;
        }
    }
    // "Event loop blocked" time: from the moment the loop wakes with work
    // to the moment it waits for events again.
    // The hooks run on this worker's own thread: a thread-local holds the
    // wake-up time.
    thread_local! {
        static WOKE: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
    }
    let figures = metrics::worker(start.index);
    // Every task this worker spawns has its polls timed.
    crate::metrics::timed::set_worker(figures.clone());
    // Whether the loop sleeps in the kernel while busy is sampled from
    // outside (`loop_watch`); the loop only says when it is busy.
    let watch = loop_watch::watch(figures.clone());
    let watch2 = watch.clone();
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .on_thread_unpark(move || {
            let now = Instant::now();
            WOKE.with(|w| w.set(Some(now)));
            crate::metrics::timed::woke(now);
            if let Some(s) = &watch {
                s.set_busy(true);
            }
        })
        .on_thread_park(move || {
            crate::metrics::timed::parked();
            if let Some(s) = &watch2 {
                s.set_busy(false);
            }
            if let Some(t) = WOKE.with(|w| w.take()) {
                figures.loop_busy.observe(t.elapsed());
            }
        })
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            start
                .log
                .log(Level::Emerg, format_args!("cannot start event loop: {e}"));
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, worker_main(start));
}

/// `worker_priority`: this worker thread's nice value (Linux's is per
/// thread), as NGINX sets its worker processes'; a failure is NGINX's
/// alert and the worker runs on.
fn set_priority(log: &ErrorLog, n: i32) {
    let me = rustix::thread::gettid();
    if let Err(e) = rustix::process::setpriority_process(Some(me), n) {
        log.log(
            Level::Alert,
            format_args!(
                "setpriority({n}) failed {}",
                crate::util::errno_text(&e.into())
            ),
        );
    }
}

/// `worker_cpu_affinity`: pins this worker thread to its CPUs, as NGINX
/// pins its worker processes (with NGINX's notice); a failure is an alert
/// and the worker runs unpinned.
fn set_affinity(log: &ErrorLog, a: &crate::config::model::CpuAffinity, index: usize) {
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mask = a.mask_of(index, ncpu);
    let mut set = rustix::thread::CpuSet::new();
    let mut cpus = Vec::new();
    for cpu in (0..64).filter(|c| mask & (1u64 << c) != 0) {
        set.set(cpu);
        cpus.push(format!("#{cpu}"));
    }
    match rustix::thread::sched_setaffinity(None, &set) {
        Ok(()) => log.log(
            Level::Notice,
            format_args!("sched_setaffinity(): using cpu {}", cpus.join(" ")),
        ),
        Err(e) => log.log(
            Level::Alert,
            format_args!(
                "sched_setaffinity() failed {}",
                crate::util::errno_text(&e.into())
            ),
        ),
    }
}

/// This worker's io_uring when the configuration has `aio on` and the
/// start-up probe found io_uring; a ring this thread may not create (after
/// its privilege drop) is logged once and `aio on` uses the pool here.
fn worker_ring(start: &WorkerStart) -> Option<Rc<Ring>> {
    let at = start.config.main.aio_on_at.as_deref()?;
    if !uring::available() {
        return None;
    }
    match Ring::new(start.config.main.aio_uring) {
        Ok(r) => Some(r),
        Err(e) => {
            start.log.log(
                Level::Notice,
                format_args!(
                    "\"aio on\" in {at} falls back to \"aio threads\" in worker {}: \
                     io_uring_setup() failed {}",
                    start.index,
                    crate::util::errno_text(&e)
                ),
            );
            None
        }
    }
}

struct Live {
    count: Cell<usize>,
    idle: Notify,
}

async fn worker_main(start: WorkerStart) {
    // One disk layer per worker, shared by the handlers (which open files)
    // and the connections (which send them).
    let disk = Rc::new(Disk::new(start.pools.clone()).with_ring(worker_ring(&start)));
    let env = Rc::new(WorkerEnv {
        config: start.config.clone(),
        log: start.log.clone(),
        disk: Rc::clone(&disk),
        figures: metrics::worker(start.index),
        shutdown: start.shutdown.clone(),
        handlers: Handlers {
            disk,
            log: start.log.clone(),
            caches: start.caches.clone(),
        },
    });
    let live = Rc::new(Live {
        count: Cell::new(0),
        idle: Notify::new(),
    });
    let limit = start.config.main.worker_connections;
    let mut accepting = Vec::new();
    for (group, listener) in register(start.listeners, start.unix, &env.config, &env.log) {
        accepting.push(crate::metrics::timed::spawn(accept_loop(
            listener,
            group,
            env.clone(),
            live.clone(),
            limit,
        )));
    }
    // QUIC: one endpoint per address, ending after its connections once
    // a graceful stop begins.
    let mut quic = tokio::task::JoinSet::new();
    let udp_count = Rc::new(UdpCount {
        live: live.clone(),
        limit,
        log: env.log.clone(),
        notes: RefCell::new([None; 2]),
    });
    for (group, socket) in start.quic {
        // A stream `udp` address: its listener ends by itself when a
        // graceful stop begins; its sessions count in `live`.
        if let Some(srv) = env.config.listens[group].stream.clone() {
            let (log, sd) = (env.log.clone(), start.shutdown.clone());
            let count = udp_count.clone();
            crate::metrics::timed::spawn(crate::stream::udp::serve(socket, srv, log, count, sd));
            continue;
        }
        let serve = crate::http::http3::serve_endpoint(socket, group, start.index, env.clone());
        quic.spawn_local(serve);
    }
    let lag = crate::metrics::timed::spawn(super::loop_lag::probe(env.figures.clone()));
    let mut sd = start.shutdown.clone();
    sd.wait_for(Mode::Graceful).await;
    // Idle keep-alive connections close now (NGINX's
    // `ngx_close_idle_connections`); requests in flight finish.
    reuse::close_idle();
    lag.abort();
    for a in &accepting {
        a.abort();
    }
    // No more turns: a new connection waiting for one reads now.
    reuse::set_scarce(false);
    reuse::accept_turn();
    // Wait for connections in flight. On Fast this returns at once, and
    // the connections still running are dropped with the task set.
    while live.count.get() > 0 {
        tokio::select! {
            _ = live.idle.notified() => {}
            _ = sd.wait_for(Mode::Fast) => break,
        }
    }
    while !quic.is_empty() {
        tokio::select! {
            _ = quic.join_next() => {}
            _ = sd.wait_for(Mode::Fast) => break,
        }
    }
}

/// The worker's connection count as UDP sessions see it
/// (`stream::udp::Connections`): a session takes a slot as an accepted
/// connection does (`admit`), and gives it back when it ends.
struct UdpCount {
    live: Rc<Live>,
    limit: usize,
    log: ErrorLog,
    notes: RefCell<[Option<Instant>; 2]>,
}

impl crate::stream::udp::Connections for UdpCount {
    fn open(&self) -> bool {
        metrics::inc(&metrics::ACCEPTS);
        let mut notes = self.notes.borrow_mut();
        if !admit(&self.log, self.live.count.get(), self.limit, &mut notes) {
            return false;
        }
        metrics::inc(&metrics::HANDLED);
        metrics::inc(&metrics::ACTIVE);
        self.live.count.set(self.live.count.get() + 1);
        true
    }

    fn close(&self) {
        metrics::dec(&metrics::ACTIVE);
        self.live.count.set(self.live.count.get() - 1);
        self.live.idle.notify_one();
    }
}

type TcpSockets = Vec<(usize, std::net::TcpListener)>;
type UnixSockets = Vec<(usize, std::os::unix::net::UnixListener)>;

/// The worker's listening sockets registered with its event loop, with
/// their index in `config.listens` (one that cannot be is logged and left
/// out).
fn register(
    tcp: TcpSockets,
    unix: UnixSockets,
    config: &Config,
    log: &ErrorLog,
) -> Vec<(usize, Listener)> {
    let tcp = tcp
        .into_iter()
        .map(|(g, l)| (g, TcpListener::from_std(l).map(Listener::Tcp)));
    let unix = unix.into_iter().map(|(g, l)| {
        let path = (config.listens[g].unix.clone()).unwrap_or_else(|| Arc::from(Path::new("")));
        (
            g,
            UnixListener::from_std(l).map(|l| Listener::Unix(l, path)),
        )
    });
    let mut out = Vec::new();
    for (group, listener) in tcp.chain(unix) {
        match listener {
            Ok(l) => out.push((group, l)),
            Err(e) => log.log(Level::Emerg, format_args!("cannot register listener: {e}")),
        }
    }
    out
}

/// Makes room for a connection just accepted, as NGINX's
/// `ngx_get_connection`: once no more than a sixteenth of
/// `worker_connections` is free, the oldest reusable connections (idle
/// keep-alive, or no byte sent yet) are asked to close, a batch at a time
/// (`reuse::drain`); false when the worker is full even so and the new
/// connection is to be refused. Connections asked to close count as free
/// at once (they close on their next turn). Each kind of line is logged
/// at most once a second, NGINX's wording, so a flood cannot fill the
/// error log.
fn admit(log: &ErrorLog, live: usize, limit: usize, notes: &mut [Option<Instant>; 2]) -> bool {
    if scarce(live, limit) && reuse::drain() > 0 {
        note(&mut notes[0], || {
            log.log(
                Level::Warn,
                format_args!("{limit} worker_connections are not enough, reusing connections"),
            )
        });
    }
    if live.saturating_sub(reuse::closing()) < limit {
        return true;
    }
    note(&mut notes[1], || {
        log.log(
            Level::Alert,
            format_args!("{limit} worker_connections are not enough"),
        )
    });
    false
}

/// Whether no more than a sixteenth of `limit` is free with `live`
/// connections (those asked to close counted as free): NGINX's point
/// for draining reusable connections.
fn scarce(live: usize, limit: usize) -> bool {
    limit - live.saturating_sub(reuse::closing()).min(limit) <= limit / 16
}

/// Runs `f` unless it ran less than a second ago.
fn note(last: &mut Option<Instant>, f: impl FnOnce()) {
    let now = Instant::now();
    if last.is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1)) {
        *last = Some(now);
        f();
    }
}

/// A socket a worker accepts on: TCP, or UNIX-domain (`listen unix:`).
/// A UNIX-domain connection is served as a TCP one: the connection code
/// reads, writes, `sendfile`s and shuts down through `TcpStream`, calls
/// that work the same on any stream socket (TCP's own options fail
/// harmlessly: every caller ignores their errors), so no second copy of
/// the connection code exists for it. Its addresses are placeholders
/// (`0.0.0.0:0`); `ConnInfo::unix` says what `$remote_addr` and
/// `$server_addr` are, as NGINX's `unix:` and `unix:PATH`.
enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener, Arc<Path>),
}

impl Listener {
    /// The next connection, its peer and local addresses, and the path
    /// of a UNIX-domain one's socket.
    #[allow(clippy::type_complexity)]
    fn poll_accept(
        &self,
        cx: &mut Context<'_>,
    ) -> Poll<
        std::io::Result<(
            TcpStream,
            std::net::SocketAddr,
            std::net::SocketAddr,
            Option<Arc<Path>>,
        )>,
    > {
        match self {
            Listener::Tcp(l) => l.poll_accept(cx).map_ok(|(s, peer)| {
                let local = s.local_addr().unwrap_or(peer);
                let _ = s.set_nodelay(true);
                (s, peer, local, None)
            }),
            Listener::Unix(l, path) => l.poll_accept(cx).map(|r| {
                let (s, _) = r?;
                let fd = std::os::fd::OwnedFd::from(s.into_std()?);
                let s = TcpStream::from_std(std::net::TcpStream::from(fd))?;
                let none = std::net::SocketAddr::from(([0, 0, 0, 0], 0));
                Ok((s, none, none, Some(path.clone())))
            }),
        }
    }
}

async fn accept_loop(
    listener: Listener,
    group: usize,
    env: Rc<WorkerEnv<Handlers>>,
    live: Rc<Live>,
    limit: usize,
) {
    let mut notes = [None; 2];
    loop {
        // Found none waiting: a turn (`reuse::accept_turn`).
        let accepted = std::future::poll_fn(|cx| {
            let r = listener.poll_accept(cx);
            if r.is_pending() {
                reuse::accept_turn();
            }
            r
        });
        let (stream, peer, local, unix) = match accepted.await {
            Ok(x) => x,
            Err(e) => {
                reuse::accept_turn();
                env.log.log(
                    Level::Alert,
                    format_args!("accept() failed {}", crate::util::errno_text(&e)),
                );
                if matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE)) {
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
                continue;
            }
        };
        metrics::inc(&metrics::ACCEPTS);
        let admitted = admit(&env.log, live.count.get(), limit, &mut notes);
        // Drained for this one (or refused it): the connections accepted
        // before may read now.
        reuse::accept_turn();
        if !admitted {
            drop(stream);
            continue;
        }
        metrics::inc(&metrics::HANDLED);
        let mut conn = ConnInfo::accepted(crate::http::context::next_conn_id(), peer, local);
        conn.unix = unix;
        live.count.set(live.count.get() + 1);
        // A fast shutdown ends `worker_main`, and the connections still
        // running are dropped with the worker's task set: the task waits
        // on nothing else (a shutdown wait here cost a lock at each of the
        // connection's polls).
        let session: Pin<Box<dyn Future<Output = ()>>> = match env.config.listens[group].stream {
            Some(_) => Box::pin(stream_session(stream, conn, group, env.clone())),
            None => Box::pin(connection::serve(stream, conn, group, env.clone())),
        };
        crate::metrics::timed::spawn(counted(session, live.clone()));
        // Near the limit, the new connection runs to its first wait before
        // the next accept, so a silent one is on the reusable list when
        // the next drains — as NGINX sets a connection up before it
        // accepts another. Accepted in a burst instead, a reconnecting
        // flood's silent connections escaped the drain and the worker
        // filled with their heads (docs/reliability.md). Told the worker
        // is scarce, the new connection then waits for this loop's next
        // turn before its first read, so the next accept may drain it
        // even when its bytes are already there.
        let tight = scarce(live.count.get(), limit);
        reuse::set_scarce(tight);
        if tight {
            tokio::task::yield_now().await;
        }
    }
}

/// An accepted connection's task: its HTTP connection or `stream`
/// session, boxed, counted in `live` while it runs. Boxed apart so the
/// task holds a pointer, not the arguments the session was made from
/// beside its future (an async fn keeps its arguments' slots for its
/// whole life: 240 bytes an idle connection), nor the larger of the two
/// kinds of future for every connection (a stream session's: 0.6 KiB).
async fn counted(session: Pin<Box<dyn Future<Output = ()>>>, live: Rc<Live>) {
    let _active = Gauge::new(&metrics::ACTIVE);
    session.await;
    live.count.set(live.count.get() - 1);
    live.idle.notify_one();
}

/// A `stream { }` server's session on the connection.
async fn stream_session(
    stream: TcpStream,
    conn: ConnInfo,
    group: usize,
    env: Rc<WorkerEnv<Handlers>>,
) {
    let listen = &env.config.listens[group];
    if let Some(srv) = listen.stream.clone() {
        crate::stream::serve(stream, conn, listen, srv, &env.log).await;
    }
}

#[cfg(test)]
mod size_tests {
    use super::*;

    /// What an idle connection's task holds is its `serve` future (and
    /// tokio's task header): every byte of it is paid per open
    /// connection, plain and TLS, idle or tunnelled
    /// (`tests/idle_memory.rs` measures the whole). A change that grows it
    /// — a request's state held across the idle wait, a large value kept
    /// in a local across an `.await` — shows here at its commit; box the
    /// state that lives only while a request is in flight instead.
    /// The size of the future an async fn of two arguments returns.
    fn future_size<A, B, F: Future>(_: fn(A, B) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    #[test]
    fn an_idle_connection_s_task_stays_small() {
        let sizes = connection::size_probe::sizes::<Handlers>();
        for (what, n) in &sizes {
            eprintln!("{what}: {n} bytes");
        }
        let size = |name: &str| sizes.iter().find(|(w, _)| *w == name).unwrap().1;
        // Measured 2026-11-28: 1688 (2032 while `serve` was one `async
        // fn` awaiting `run`: its arguments kept their slots, see
        // `http::connection::life`; 2488 before the tunnel's request moved
        // into its boxed future). The accept phase must stay no larger
        // than the run phase.
        assert!(size("serve future") <= 1750, "{sizes:?}");
        assert!(
            size("serve future") <= size("Connection::run future") + 16,
            "{sizes:?}"
        );
        // The spawned task holds the boxed session and little else (a
        // stream session's future inline made it 0.6 KiB larger, the
        // session's arguments beside it 240 bytes).
        let task = future_size(counted);
        assert!(task <= 64, "task {task}: {sizes:?}");
        // An upstream connection without TLS does not carry rustls's
        // 1.2 KiB state (pooled or tunnelled for hours).
        let up = std::mem::size_of::<crate::upstream::UpStream>();
        assert!(up <= 64, "UpStream is {up} bytes");
    }
}
