//! `porter_metrics`: the server's figures as Prometheus text (exposition
//! format 0.0.4), for a scraper or `curl`.
//!
//! - `porter_loop_busy_seconds{worker}`: histogram of how long each
//!   event-loop iteration ran before waiting for events again — the
//!   "event loop blocked" figure; a disk call made inline on a cold disk
//!   shows up here as a long iteration, and so do preemption and
//!   back-to-back work under a saturating load.
//! - `porter_loop_poll_seconds{worker}`: wall time of each poll of each
//!   task (`metrics::timed`): one piece of work holding the loop.
//! - `porter_loop_lag_seconds{worker}`: how late a 10 ms timer ran
//!   (`runtime::loop_lag`): how long ready work waited for its loop.
//! - each of the three with a `_max_seconds` gauge.
//! - `porter_loop_blocked_max_seconds{worker}`,
//!   `porter_loop_blocked_seconds_total{worker}`: how long a busy loop
//!   slept in the kernel (a page read, a page lock, a contended mutex),
//!   sampled every 5 ms from outside (`runtime::loop_watch`) — what
//!   "never waits on a disk" promises, apart from preemption.
//! - `porter_ttfb_seconds{worker}`: request head read → response head ready.
//! - `porter_pool_{threads,busy,queued,bulk_allowed}{pool}` gauges and
//!   `porter_pool_{tasks,overflows}_total{pool}` counters.
//! - `porter_fastpath_total{op,result}`: calls served inline from the page
//!   cache (`hit`) or offloaded (`miss`).
//! - `porter_disk_send_bytes_total{route}`: file-body bytes by the route
//!   that delivered them (`disk::sent`): the loop's zero-copy `sendfile`,
//!   the loop's `copy`, the `pool`'s `sendfile`, the ring (`uring`), or
//!   `read` into a buffer and written through the stream (`sendfile off`,
//!   user-space TLS).
//! - `porter_uring_{submissions,completions,not_inline,queued}_total` and
//!   `porter_uring_in_flight` (`aio on`, all workers' rings): a completion
//!   is `not_inline` when it was not there as its submission returned —
//!   the read went to an io-wq thread or waited for a page; the kernel's
//!   completion does not say which, so io-wq punts alone are not counted.
//! - `porter_log_dropped_lines_total`: log lines dropped, never waited for.
//! - `porter_ktls_connections_total{result}`: TLS connections moved to
//!   kernel TLS (`kernel`), kept in user space although the kernel offers
//!   kTLS (`user_space`: a cipher it does not take, input buffered past
//!   the handshake), or lost when it refused the keys (`failed`).
//! - `porter_quic_connections_total{result}`: new QUIC clients served
//!   (`accepted`), sent a Retry first (`retried`, `quic_retry on`), or
//!   refused (`refused`, `http3 off`).
//! - The `stub_status` figures as `porter_connections_*` and
//!   `porter_requests_total`; `porter_responses_total{class}` by status
//!   class.
//! - `porter_cache_responses_total{zone,status}` (`$upstream_cache_status`
//!   per zone), `porter_cache_size_bytes`, `_max_size_bytes`, `_entries{zone}`.
//! - `porter_upstream_peer_{up,active,fails}{upstream,server,addr}` gauges,
//!   `porter_upstream_peer_{tries,failures}_total` counters.
//! - `porter_tls_handshakes_total{result}`, `porter_tls_resumed_total`.
//!
//! `porter_status` (`handlers::status_page`) shows the same figures live.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::outcome::{Env, Outcome};
use crate::disk::fastpath::{self, Op};
use crate::disk::sent::{self, Route};
use crate::disk::uring;
use crate::http::context::{Method, RequestCtx};
use crate::http::response::Response;
use crate::metrics::{self, get, Histogram, BUCKETS};
use crate::tls::ktls;
use crate::upstream::balance::PeerView;
use crate::upstream::{AllGroups, UpstreamGroup};

fn histogram(out: &mut String, name: &str, help: &str, series: &[(String, &Histogram)]) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
    for (labels, h) in series {
        let (cum, sum, _) = h.snapshot();
        for (i, c) in cum.iter().enumerate() {
            let le = BUCKETS
                .get(i)
                .map_or_else(|| "+Inf".to_string(), |b| b.to_string());
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {c}");
        }
        let _ = writeln!(out, "{name}_sum{{{labels}}} {sum}");
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", cum.last().unwrap_or(&0));
    }
}

fn family<T: std::fmt::Display>(
    out: &mut String,
    name: &str,
    kind: &str,
    help: &str,
    rows: &[(String, T)],
) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    for (labels, v) in rows {
        if labels.is_empty() {
            let _ = writeln!(out, "{name} {v}");
        } else {
            let _ = writeln!(out, "{name}{{{labels}}} {v}");
        }
    }
}

/// Renders every figure.
pub fn render(env: &Env<'_>, groups: &[Arc<UpstreamGroup>]) -> String {
    let mut out = String::with_capacity(8192);
    worker_figures(&mut out);
    pool_figures(&mut out, env);
    fastpath_and_log_figures(&mut out);
    uring_figures(&mut out);
    connection_figures(&mut out);
    cache_figures(&mut out, env);
    upstream_figures(&mut out, groups);
    tls_figures(&mut out);
    out
}

/// Per worker: event-loop busy time and its maximum, TTFB.
fn worker_figures(out: &mut String) {
    let workers = metrics::workers();
    // (name, help, histogram of a worker, help of the `_max_seconds` gauge)
    type Pick = fn(&metrics::WorkerMetrics) -> &Histogram;
    let loops: [(&str, &str, Pick, &str); 3] = [
        (
            "porter_loop_busy",
            "Busy time of each event-loop iteration (event loop blocked).",
            |w| &w.loop_busy,
            "Longest event-loop iteration since start.",
        ),
        (
            "porter_loop_poll",
            "Wall time of each poll of each task on an event loop: one piece of work holding the loop.",
            |w| &w.loop_poll,
            "Longest single task poll on an event loop since start.",
        ),
        (
            "porter_loop_lag",
            "How late a timer set for every 10 ms ran on each event loop: how long ready work waited for the loop.",
            |w| &w.loop_lag,
            "Longest event-loop lag since start.",
        ),
    ];
    for (name, help, pick, max_help) in loops {
        histogram(
            out,
            &format!("{name}_seconds"),
            help,
            &by_worker(&workers, pick),
        );
        family(
            out,
            &format!("{name}_max_seconds"),
            "gauge",
            max_help,
            &by_worker(&workers, |w| pick(w).snapshot().2),
        );
    }
    family(
        out,
        "porter_loop_blocked_max_seconds",
        "gauge",
        "Longest time an event loop, busy, slept in the kernel (sampled every 5 ms).",
        &by_worker(&workers, |w| w.loop_blocked_figures().0.as_secs_f64()),
    );
    family(
        out,
        "porter_loop_blocked_seconds_total",
        "counter",
        "Time event loops, busy, slept in the kernel.",
        &by_worker(&workers, |w| w.loop_blocked_figures().1.as_secs_f64()),
    );
    histogram(
        out,
        "porter_ttfb_seconds",
        "From a complete request head to the response head ready to send.",
        &by_worker(&workers, |w| &w.ttfb),
    );
}

/// A series per worker, labelled `worker="I"`, of what `f` takes from it.
fn by_worker<'a, T>(
    workers: &'a [std::sync::Arc<metrics::WorkerMetrics>],
    f: impl Fn(&'a metrics::WorkerMetrics) -> T,
) -> Vec<(String, T)> {
    workers
        .iter()
        .enumerate()
        .map(|(i, w)| (format!("worker=\"{i}\""), f(w)))
        .collect()
}

/// Per thread pool: shape, state and counters.
fn pool_figures(out: &mut String, env: &Env<'_>) {
    let pools = env.disk.pools().sorted();
    let rows = |f: &dyn Fn(&crate::disk::pool::ThreadPool) -> u64| -> Vec<(String, u64)> {
        pools
            .iter()
            .map(|p| (format!("pool=\"{}\"", p.name()), f(p)))
            .collect()
    };
    family(
        out,
        "porter_pool_threads",
        "gauge",
        "Threads of the pool.",
        &rows(&|p| p.spec().threads as u64),
    );
    family(
        out,
        "porter_pool_busy",
        "gauge",
        "Threads running a task.",
        &rows(&|p| p.stats().busy.load(Ordering::Relaxed) as u64),
    );
    family(
        out,
        "porter_pool_queued",
        "gauge",
        "Tasks waiting for a thread.",
        &rows(&|p| p.stats().waiting.load(Ordering::Relaxed) as u64),
    );
    family(
        out,
        "porter_pool_max_queue",
        "gauge",
        "The pool's max_queue.",
        &rows(&|p| p.spec().max_queue as u64),
    );
    family(
        out,
        "porter_pool_tasks_total",
        "counter",
        "Tasks completed.",
        &rows(&|p| p.stats().done.load(Ordering::Relaxed)),
    );
    family(
        out,
        "porter_pool_overflows_total",
        "counter",
        "Tasks rejected because the queue was full.",
        &rows(&|p| p.stats().overflows.load(Ordering::Relaxed)),
    );
    family(
        out,
        "porter_pool_short_tasks_total",
        "counter",
        "Tasks completed from the short lane (metadata, mostly-resident reads).",
        &rows(&|p| p.stats().short_done.load(Ordering::Relaxed)),
    );
    family(
        out,
        "porter_pool_bulk_allowed",
        "gauge",
        "Bulk tasks the pool's gate lets run at once (the disk's latency target).",
        &rows(&|p| p.stats().bulk_allowed.load(Ordering::Relaxed) as u64),
    );
}

/// Fast-path hits and misses per call; bytes per send route; kTLS
/// connections; log lines dropped.
fn fastpath_and_log_figures(out: &mut String) {
    let mut fp = Vec::new();
    for op in Op::ALL {
        let (hit, miss) = fastpath::counts(op);
        fp.push((format!("op=\"{}\",result=\"hit\"", op.name()), hit));
        fp.push((format!("op=\"{}\",result=\"miss\"", op.name()), miss));
    }
    family(
        out,
        "porter_fastpath_total",
        "counter",
        "Disk calls served inline from cache (hit) or offloaded (miss).",
        &fp,
    );

    let routes: Vec<_> = Route::ALL
        .iter()
        .map(|&r| (format!("route=\"{}\"", r.name()), sent::bytes(r)))
        .collect();
    family(
        out,
        "porter_disk_send_bytes_total",
        "counter",
        "File-body bytes sent, by route: the loop's sendfile, the loop's copy, the pool's sendfile, io_uring, or read and written through the stream.",
        &routes,
    );

    let k = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    family(
        out,
        "porter_ktls_connections_total",
        "counter",
        "TLS connections moved to kernel TLS, kept in user space, or lost on the kernel's refusal.",
        &[
            ("result=\"kernel\"".to_string(), k(&ktls::SWITCHED)),
            ("result=\"user_space\"".to_string(), k(&ktls::STAYED)),
            ("result=\"failed\"".to_string(), k(&ktls::FAILED)),
        ],
    );
    use crate::http::http3;
    family(
        out,
        "porter_quic_connections_total",
        "counter",
        "New QUIC clients: served, sent a Retry first (quic_retry on), or refused (http3 off).",
        &[
            ("result=\"accepted\"".to_string(), k(&http3::ACCEPTED)),
            ("result=\"retried\"".to_string(), k(&http3::RETRIED)),
            ("result=\"refused\"".to_string(), k(&http3::REFUSED)),
        ],
    );
    family(
        out,
        "porter_log_dropped_lines_total",
        "counter",
        "Log lines dropped because the log thread could not keep up.",
        &[(String::new(), crate::log::dropped_lines())],
    );
}

/// The io_uring figures of `aio on`.
fn uring_figures(out: &mut String) {
    let st = uring::stats();
    let get = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    let (sub, done) = (get(&st.submitted), get(&st.completed));
    for (name, kind, help, v) in [
        (
            "porter_uring_submissions_total",
            "counter",
            "Operations submitted to the workers' io_urings.",
            sub,
        ),
        (
            "porter_uring_completions_total",
            "counter",
            "Completions reaped from the workers' io_urings.",
            done,
        ),
        (
            "porter_uring_in_flight",
            "gauge",
            "Operations submitted and not yet completed.",
            sub.saturating_sub(done),
        ),
        (
            "porter_uring_not_inline_total",
            "counter",
            "Completions not ready when their submission returned (io-wq or a page wait).",
            get(&st.not_inline),
        ),
        (
            "porter_uring_queued_total",
            "counter",
            "Operations that waited for a free slot (max_in_flight reached).",
            get(&st.queued),
        ),
    ] {
        family(out, name, kind, help, &[(String::new(), v)]);
    }
}

/// The `stub_status` figures.
fn connection_figures(out: &mut String) {
    let active = get(&metrics::ACTIVE);
    let reading = get(&metrics::READING);
    let writing = get(&metrics::WRITING);
    family(
        out,
        "porter_connections_accepted_total",
        "counter",
        "Client connections accepted.",
        &[(String::new(), get(&metrics::ACCEPTS))],
    );
    family(
        out,
        "porter_connections_handled_total",
        "counter",
        "Client connections handled.",
        &[(String::new(), get(&metrics::HANDLED))],
    );
    family(
        out,
        "porter_requests_total",
        "counter",
        "Requests read.",
        &[(String::new(), get(&metrics::REQUESTS))],
    );
    let classes: Vec<_> = metrics::STATUS_CLASSES
        .iter()
        .enumerate()
        .map(|(i, c)| (format!("class=\"{}xx\"", i + 1), get(c)))
        .collect();
    family(
        out,
        "porter_responses_total",
        "counter",
        "Responses by status class.",
        &classes,
    );
    family(
        out,
        "porter_connections",
        "gauge",
        "Open client connections by state.",
        &[
            ("state=\"reading\"".into(), reading),
            ("state=\"writing\"".into(), writing),
            (
                "state=\"waiting\"".into(),
                active.saturating_sub(reading + writing),
            ),
        ],
    );
}

/// A label value with Prometheus's escapes (`\\`, `\"`, `\n`).
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Per cache zone: requests by `$upstream_cache_status`, size, entries.
fn cache_figures(out: &mut String, env: &Env<'_>) {
    let zones = env.caches.sorted();
    let zone = |z: &crate::cache::CacheZone| format!("zone=\"{}\"", label(z.name()));
    let mut answered = Vec::new();
    for z in &zones {
        for (st, n) in z.counts() {
            answered.push((format!("{},status=\"{}\"", zone(z), st.as_str()), n));
        }
    }
    family(
        out,
        "porter_cache_responses_total",
        "counter",
        "Requests a cache zone answered, by $upstream_cache_status.",
        &answered,
    );
    let rows = |f: &dyn Fn(&crate::cache::CacheZone) -> Option<u64>| -> Vec<(String, u64)> {
        zones
            .iter()
            .filter_map(|z| Some((zone(z), f(z)?)))
            .collect()
    };
    family(
        out,
        "porter_cache_size_bytes",
        "gauge",
        "Disk space of a zone's entries, in 4 KiB blocks as NGINX counts it.",
        &rows(&|z| Some(z.index().total_size())),
    );
    family(
        out,
        "porter_cache_max_size_bytes",
        "gauge",
        "A zone's max_size (zones without one have no sample).",
        &rows(&|z| z.spec().max_size),
    );
    family(
        out,
        "porter_cache_entries",
        "gauge",
        "Keys in a zone's index.",
        &rows(&|z| Some(z.index().len() as u64)),
    );
}

/// Per upstream peer: state, requests in flight, failures.
fn upstream_figures(out: &mut String, groups: &[Arc<UpstreamGroup>]) {
    let mut peers = Vec::new();
    for g in groups {
        for set in [&g.primary, &g.backup] {
            for (spec, v) in set.peers.iter().zip(set.view()) {
                let labels = format!(
                    "upstream=\"{}\",server=\"{}\",addr=\"{}\"",
                    label(&g.name),
                    label(&spec.server),
                    label(&spec.addr.to_string())
                );
                peers.push((labels, v));
            }
        }
    }
    let rows = |f: fn(&PeerView) -> u64| -> Vec<(String, u64)> {
        peers.iter().map(|(l, v)| (l.clone(), f(v))).collect()
    };
    for (name, kind, help, f) in [
        (
            "porter_upstream_peer_up",
            "gauge",
            "1 while the peer takes requests; 0 when down or max_fails reached.",
            (|v| u64::from(!v.down && !v.unavailable)) as fn(&PeerView) -> u64,
        ),
        (
            "porter_upstream_peer_active",
            "gauge",
            "Requests in flight to the peer.",
            |v| u64::from(v.active),
        ),
        (
            "porter_upstream_peer_fails",
            "gauge",
            "Failures counted towards max_fails now.",
            |v| u64::from(v.fails),
        ),
        (
            "porter_upstream_peer_tries_total",
            "counter",
            "Tries of the peer ended (since start or the last reload).",
            |v| v.tries,
        ),
        (
            "porter_upstream_peer_failures_total",
            "counter",
            "Tries of the peer that failed (error, timeout, invalid header).",
            |v| v.failures,
        ),
    ] {
        family(out, name, kind, help, &rows(f));
    }
}

/// TLS handshakes on `listen … ssl` addresses.
fn tls_figures(out: &mut String) {
    family(
        out,
        "porter_tls_handshakes_total",
        "counter",
        "TLS handshakes completed (ok) or failed.",
        &[
            ("result=\"ok\"".to_string(), get(&metrics::tls::HANDSHAKES)),
            ("result=\"failed\"".to_string(), get(&metrics::tls::FAILED)),
        ],
    );
    family(
        out,
        "porter_tls_resumed_total",
        "counter",
        "TLS handshakes that resumed a session.",
        &[(String::new(), get(&metrics::tls::RESUMED))],
    );
}

/// The content handler.
pub fn serve(ctx: &mut RequestCtx, env: &Env<'_>, groups: &AllGroups) -> Outcome {
    if !matches!(ctx.method, Method::Get | Method::Head) {
        return Outcome::Status(405);
    }
    Outcome::Send(Response::bytes(
        200,
        "text/plain; version=0.0.4",
        render(env, groups.get()).into_bytes(),
    ))
}
