//! The status page's figures as JSON, rendered only when asked
//! (`porter_status` with `?format=json`): every figure is a counter or
//! gauge the server keeps anyway, read with relaxed loads; rates are left
//! to the reader, which polls and takes differences.
//!
//! Written by hand with [`Json`] (a dozen lines) rather than a
//! serialisation crate: the document is flat, its shape fixed, and the
//! only strings in it are names from the config.

use std::fmt::{Display, Write as _};
use std::sync::atomic::Ordering;

use crate::disk::fastpath::{self, Op};
use crate::handlers::outcome::Env;
use crate::metrics::{self, get, Histogram, WorkerMetrics};
use crate::tls::ktls;
use crate::upstream::balance::{PeerSet, PeerView};
use crate::upstream::UpstreamGroup;

/// A JSON object under construction: members are appended in order.
pub struct Json {
    out: String,
    first: bool,
}

impl Json {
    fn key(&mut self, k: &str) {
        if !self.first {
            self.out.push(',');
        }
        self.first = false;
        quote(&mut self.out, k);
        self.out.push(':');
    }

    /// A number (or `true`/`false`: anything whose text is JSON).
    pub fn num(&mut self, k: &str, v: impl Display) {
        self.key(k);
        let _ = write!(self.out, "{v}");
    }

    /// A string.
    pub fn str(&mut self, k: &str, v: &str) {
        self.key(k);
        quote(&mut self.out, v);
    }

    /// A list of numbers.
    pub fn nums<T: Display>(&mut self, k: &str, v: impl IntoIterator<Item = T>) {
        self.key(k);
        self.out.push('[');
        for (i, n) in v.into_iter().enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            let _ = write!(self.out, "{n}");
        }
        self.out.push(']');
    }

    /// A nested object that `f` fills.
    pub fn obj(&mut self, k: &str, f: impl FnOnce(&mut Json)) {
        self.key(k);
        self.open(f);
    }

    /// A list of objects, one per item, each filled by `f`.
    pub fn list<T>(
        &mut self,
        k: &str,
        items: impl IntoIterator<Item = T>,
        f: impl Fn(&mut Json, T),
    ) {
        self.key(k);
        self.out.push('[');
        for (i, item) in items.into_iter().enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            self.open(|j| f(j, item));
        }
        self.out.push(']');
    }

    fn open(&mut self, f: impl FnOnce(&mut Json)) {
        self.out.push('{');
        self.first = true;
        f(self);
        self.out.push('}');
        self.first = false;
    }
}

/// `s` as a JSON string literal.
fn quote(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Every figure of the status page, as one JSON object.
pub fn render(env: &Env<'_>, groups: &[std::sync::Arc<UpstreamGroup>]) -> String {
    let mut j = Json {
        out: String::with_capacity(4096),
        first: true,
    };
    j.open(|j| {
        j.str("porter", env!("CARGO_PKG_VERSION"));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        j.num("time_ms", now.as_millis());
        connections(j);
        j.nums("buckets", metrics::BUCKETS);
        j.list("workers", metrics::workers().iter().enumerate(), worker);
        pools(j, env);
        j.obj("fastpath", |j| {
            for op in Op::ALL {
                let (hit, miss) = fastpath::counts(op);
                j.obj(op.name(), |j| {
                    j.num("hit", hit);
                    j.num("miss", miss);
                });
            }
        });
        caches(j, env);
        j.list("upstreams", groups, |j, g| {
            j.str("name", &g.name);
            j.list("peers", peers(g), |j, (set, i, v)| {
                peer(j, set, i, v);
                j.num("backup", std::ptr::eq(set, &g.backup));
            });
        });
        tls(j);
    });
    j.out
}

/// The `stub_status` figures and the responses by status class.
fn connections(j: &mut Json) {
    let active = get(&metrics::ACTIVE);
    let reading = get(&metrics::READING);
    let writing = get(&metrics::WRITING);
    j.obj("connections", |j| {
        j.num("accepted", get(&metrics::ACCEPTS));
        j.num("handled", get(&metrics::HANDLED));
        j.num("active", active);
        j.num("reading", reading);
        j.num("writing", writing);
        j.num("waiting", active.saturating_sub(reading + writing));
    });
    j.obj("requests", |j| {
        j.num("total", get(&metrics::REQUESTS));
        for (i, c) in metrics::STATUS_CLASSES.iter().enumerate() {
            j.num(&format!("{}xx", i + 1), get(c));
        }
    });
}

/// A histogram: observations, their sum and largest (seconds), and the
/// cumulative count per bucket of `buckets` (the last: +Inf).
fn histogram(j: &mut Json, k: &str, h: &Histogram, with_buckets: bool) {
    let (cum, sum, max) = h.snapshot();
    j.obj(k, |j| {
        j.num("count", cum.last().copied().unwrap_or(0));
        j.num("sum", sum);
        j.num("max", max);
        if with_buckets {
            j.nums("buckets", cum);
        }
    });
}

fn worker(j: &mut Json, (i, w): (usize, &std::sync::Arc<WorkerMetrics>)) {
    j.num("worker", i);
    histogram(j, "lag", &w.loop_lag, true);
    histogram(j, "busy", &w.loop_busy, false);
    histogram(j, "poll", &w.loop_poll, false);
    let (max, total) = w.loop_blocked_figures();
    j.obj("blocked", |j| {
        j.num("max", max.as_secs_f64());
        j.num("total", total.as_secs_f64());
    });
}

fn pools(j: &mut Json, env: &Env<'_>) {
    j.list("pools", env.disk.pools().sorted(), |j, p| {
        let st = p.stats();
        j.str("name", p.name());
        j.num("threads", p.spec().threads);
        j.num("busy", st.busy.load(Ordering::Relaxed));
        j.num("queued", st.waiting.load(Ordering::Relaxed));
        j.num("max_queue", p.spec().max_queue);
        j.num("tasks", st.done.load(Ordering::Relaxed));
        j.num("overflows", st.overflows.load(Ordering::Relaxed));
    });
}

fn caches(j: &mut Json, env: &Env<'_>) {
    j.list("caches", env.caches.sorted(), |j, z| {
        j.str("zone", z.name());
        j.num("size", z.index().total_size());
        match z.spec().max_size {
            Some(m) => j.num("max_size", m),
            None => j.num("max_size", "null"),
        }
        j.num("entries", z.index().len());
        j.obj("responses", |j| {
            for (st, n) in z.counts() {
                j.num(st.as_str(), n);
            }
        });
    });
}

/// Each peer of a group, primary then backup, with its state now.
fn peers(g: &UpstreamGroup) -> Vec<(&PeerSet, usize, PeerView)> {
    [&g.primary, &g.backup]
        .into_iter()
        .flat_map(|set| {
            set.view()
                .into_iter()
                .enumerate()
                .map(move |(i, v)| (set, i, v))
        })
        .collect()
}

fn peer(j: &mut Json, set: &PeerSet, i: usize, v: PeerView) {
    let spec = &set.peers[i];
    j.str("server", &spec.server);
    j.str("addr", &spec.addr.to_string());
    j.num("weight", spec.weight);
    j.str("state", peer_state(&v));
    j.num("active", v.active);
    j.num("fails", v.fails);
    j.num("tries", v.tries);
    j.num("failures", v.failures);
}

/// `up`, `down` (in the config) or `unavailable` (`max_fails` reached).
pub fn peer_state(v: &PeerView) -> &'static str {
    if v.down {
        "down"
    } else if v.unavailable {
        "unavailable"
    } else {
        "up"
    }
}

fn tls(j: &mut Json) {
    let k = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    j.obj("tls", |j| {
        j.num("handshakes", get(&metrics::tls::HANDSHAKES));
        j.num("failed", get(&metrics::tls::FAILED));
        j.num("resumed", get(&metrics::tls::RESUMED));
        j.obj("ktls", |j| {
            j.num("kernel", k(&ktls::SWITCHED));
            j.num("user_space", k(&ktls::STAYED));
            j.num("failed", k(&ktls::FAILED));
        });
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_escaped_as_json_strings() {
        let mut out = String::new();
        quote(&mut out, "a\"b\\c\nd");
        assert_eq!(out, r#""a\"b\\c\u000ad""#);
    }

    #[test]
    fn nested_members_are_separated_once() {
        let mut j = Json {
            out: String::new(),
            first: true,
        };
        j.open(|j| {
            j.num("a", 1);
            j.obj("b", |j| j.nums("c", [1.5, 2.0]));
            j.list("d", [1, 2], |j, n| j.num("n", n));
            j.str("e", "x");
        });
        assert_eq!(
            j.out,
            r#"{"a":1,"b":{"c":[1.5,2]},"d":[{"n":1},{"n":2}],"e":"x"}"#
        );
    }
}
