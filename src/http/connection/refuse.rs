//! Requests the connection answers and then closes: a head that could
//! not be parsed (NGINX's 400/414/494, through the server's `error_page`)
//! and plain HTTP sent to a TLS address (NGINX's 497). Kept beside the
//! connection loop (a child module, so it reaches `Connection`'s fields)
//! rather than in it, to keep that file readable.

use super::*;

impl<H: Respond + 'static> Connection<H> {
    /// Answers a request whose head could not be parsed, then closes.
    pub(super) async fn refuse(self, bad: BadHead) {
        metrics::inc(&metrics::REQUESTS);
        let line = request::raw_request_line(&self.buf);
        let server = self
            .group()
            .find_server(bad.host.as_deref().map(strip_port));
        let head = RequestHead::unparsed(&line, bad.host.as_deref());
        let ctx = Box::new(RequestCtx::new(&self.info, self.requests + 1, head, server));
        ctx.log_in(&self.worker.log).line(
            Level::Info,
            format_args!("{} while reading client request", bad.error),
        );
        let code = if matches!(bad.error, HeadError::HeaderTooLarge) {
            494
        } else {
            bad.error.status()
        };
        self.answer_and_close(ctx, code).await;
    }

    /// Answers plain HTTP sent to a TLS address (NGINX's 497, a 400
    /// page of its own; `error_page 497` applies), then closes.
    pub(super) async fn refuse_plain_http(mut self, head: RequestHead) {
        metrics::inc(&metrics::REQUESTS);
        self.buf.drain(..head.head_len);
        let (ctx, _) = self.start_request(head);
        ctx.log_in(&self.worker.log).line(
            Level::Info,
            format_args!(
                "client sent plain HTTP request to HTTPS port while reading client request headers"
            ),
        );
        self.answer_and_close(Box::new(ctx), 497).await;
    }

    /// Answers a refused request with `code` (through `error_page`), logs
    /// it, and closes with a lingering close.
    async fn answer_and_close(mut self, mut ctx: Box<RequestCtx>, code: u16) {
        let handlers = &self.worker.handlers;
        let Some(mut resp) = handlers.respond_status(&mut ctx, None, code).await else {
            ctx.status = 444;
            ctx.write_access_log();
            return;
        };
        resp.close = true;
        ctx.completed = self
            .write_response(&mut ctx, &resp, Persistence::Close)
            .await
            .is_ok();
        ctx.write_access_log();
        closing::lingering_close(self.stream, Linger::of(&ctx.loc.s)).await;
    }
}
