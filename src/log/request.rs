//! The error log of one request (NGINX's `ngx_http_log_error`): where its
//! lines go — the location's `error_log`, else the main one — and the tail
//! that ties a line to the request, `, client: A, server: S, request: "R",
//! [subrequest: "S",] upstream: "U", host: "H"`.
//!
//! `RequestCtx::log` builds it from the request, the one place that does;
//! every handler, the proxy's tries, the cache store and the disk failure
//! path write through it, and work that outlives the handler's borrow (an
//! upstream body, a cache write) keeps a clone. It is built when a line is
//! written rather than once per request: realip may change the client
//! between two lines, and most requests write none.

use std::fmt;
use std::net::IpAddr;

use super::{ErrorLog, Level};

/// What the tail names of a request.
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    /// The client's address (after realip).
    pub client: IpAddr,
    /// The server's primary name.
    pub server: &'a str,
    /// The request line as received.
    pub request: &'a str,
    /// A subrequest's URI (`, subrequest: "/auth"`), else None.
    pub subrequest: Option<&'a str>,
    /// The `Host` header, when sent.
    pub host: Option<&'a str>,
}

/// Where one request's error lines go, and the tail they end with.
#[derive(Debug, Clone)]
pub struct RequestLog {
    log: ErrorLog,
    conn: Option<u64>,
    tail: String,
    /// Where `, host: …` starts in `tail`: an upstream goes before it.
    host_at: usize,
}

impl RequestLog {
    /// The lines of request `subject` on connection `conn`, written to `log`.
    pub fn new(log: &ErrorLog, conn: u64, subject: Subject<'_>) -> RequestLog {
        use fmt::Write as _;
        let mut tail = String::with_capacity(96);
        let _ = write!(
            tail,
            ", client: {}, server: {}, request: \"{}\"",
            subject.client, subject.server, subject.request
        );
        if let Some(u) = subject.subrequest {
            let _ = write!(tail, ", subrequest: \"{u}\"");
        }
        let host_at = tail.len();
        if let Some(h) = subject.host {
            let _ = write!(tail, ", host: \"{h}\"");
        }
        RequestLog {
            log: log.clone(),
            conn: Some(conn),
            tail,
            host_at,
        }
    }

    /// Lines without a request (background threads, tests).
    pub fn plain(log: &ErrorLog) -> RequestLog {
        RequestLog {
            log: log.clone(),
            conn: None,
            tail: String::new(),
            host_at: 0,
        }
    }

    /// The same, naming the upstream of one try (`upstream: "…"`).
    pub fn with_upstream(&self, upstream: &str) -> RequestLog {
        let mut tail = String::with_capacity(self.tail.len() + upstream.len() + 14);
        tail.push_str(&self.tail[..self.host_at]);
        tail.push_str(", upstream: \"");
        tail.push_str(upstream);
        tail.push('"');
        let host_at = tail.len();
        tail.push_str(&self.tail[self.host_at..]);
        RequestLog {
            log: self.log.clone(),
            conn: self.conn,
            tail,
            host_at,
        }
    }

    /// Writes `msg` at `level`.
    pub fn line(&self, level: Level, msg: fmt::Arguments<'_>) {
        self.log.log_conn(level, self.conn, msg, &self.tail);
    }

    /// Writes `msg` at `error`.
    pub fn error(&self, msg: fmt::Arguments<'_>) {
        self.line(Level::Error, msg);
    }

    /// True when a line at `level` would be written somewhere.
    pub fn enabled(&self, level: Level) -> bool {
        self.log.enabled(level)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subject(host: Option<&str>) -> Subject<'_> {
        Subject {
            client: "127.0.0.1".parse().unwrap(),
            server: "localhost",
            request: "GET / HTTP/1.1",
            subrequest: None,
            host,
        }
    }

    #[test]
    fn tail_reads_as_nginx_writes_it() {
        let l = RequestLog::new(&ErrorLog::new(Vec::new()), 3, subject(Some("a:8")));
        assert_eq!(
            l.tail,
            ", client: 127.0.0.1, server: localhost, request: \"GET / HTTP/1.1\", host: \"a:8\""
        );
    }

    #[test]
    fn upstream_goes_before_host() {
        let l = RequestLog::new(&ErrorLog::new(Vec::new()), 3, subject(Some("a")));
        let u = l.with_upstream("http://b/x");
        assert_eq!(
            u.tail,
            ", client: 127.0.0.1, server: localhost, request: \"GET / HTTP/1.1\", \
             upstream: \"http://b/x\", host: \"a\""
        );
        let none = RequestLog::new(&ErrorLog::new(Vec::new()), 3, subject(None));
        assert!(none.with_upstream("u").tail.ends_with(", upstream: \"u\""));
    }
}
