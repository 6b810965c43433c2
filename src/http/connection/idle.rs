//! The connection between requests: waiting idle for the next one (no
//! buffers held, reclaimable by the worker) and the connection-level
//! `info` lines NGINX writes for a head that timed out or a TLS record it
//! refused. A child module of `connection` (it reaches `Connection`'s
//! fields), kept apart to keep the request loop readable.

use super::*;

impl<H: Respond + 'static> Connection<H> {
    /// NGINX's info line for a head that did not arrive in time.
    pub(super) fn log_header_timeout(&self) {
        let phase = if self.buf.is_empty() {
            "waiting for request"
        } else if self.buf.contains(&b'\n') {
            "reading client request headers"
        } else {
            "reading client request line"
        };
        self.worker.log.log_conn(
            Level::Info,
            Some(self.info.id),
            format_args!("client timed out (110: Connection timed out) while {phase}"),
            &format!(", client: {}", self.info.peer.ip()),
        );
    }

    /// Waits on an idle connection for the next request, at most
    /// `keepalive_timeout`: true when there is something to read, false
    /// when the connection is to close (closed, failed, timed out, or a
    /// graceful shutdown began).
    pub(super) async fn wait_idle(&mut self) -> bool {
        // A pipelined or quick next request is read at once.
        match self.stream.read_now(&mut self.buf) {
            Ok(0) => return false,
            Ok(_) => return true,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => {
                self.tls_failed(&e, "while waiting for request");
                return false;
            }
        }
        // Going idle: hand both buffers back while the connection
        // waits, so an idle keep-alive connection holds no buffers.
        buffers::give(std::mem::take(&mut self.buf));
        buffers::give(std::mem::take(&mut self.out));
        // Listed as idle: the worker closes it to admit a new connection
        // or when a graceful shutdown begins (`reuse::close_idle`).
        let reusable = Reusable::enter_idle();
        let readable = tokio::time::timeout(self.keepalive_timeout, self.stream.readable());
        let mut readable = std::pin::pin!(readable);
        std::future::poll_fn(|cx| {
            if reusable.poll_reclaimed(cx).is_ready() {
                return Poll::Ready(false);
            }
            readable.as_mut().poll(cx).map(|r| matches!(r, Ok(Ok(()))))
        })
        .await
    }

    /// One `info` line when the TLS layer refused what the client sent
    /// (a bad record, an unexpected message), as NGINX logs `SSL_read()`.
    pub(super) fn tls_failed(&self, e: &io::Error, doing: &str) {
        if self.stream.is_tls() && e.kind() == io::ErrorKind::InvalidData {
            self.worker.log.log_conn(
                Level::Info,
                Some(self.info.id),
                format_args!("SSL_read() failed ({e}) {doing}"),
                &format!(
                    ", client: {}, server: {}",
                    self.info.peer.ip(),
                    self.info.local
                ),
            );
        }
    }
}
