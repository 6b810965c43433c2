//! `stub_status`: NGINX's basic status page, same text layout, so existing
//! scrapers parse it.

use super::outcome::Outcome;
use crate::http::context::{Method, RequestCtx};
use crate::http::response::Response;
use crate::metrics::{self, get};

/// Renders the status page.
pub fn serve(ctx: &mut RequestCtx) -> Outcome {
    if !matches!(ctx.method, Method::Get | Method::Head) {
        return Outcome::Status(405);
    }
    ctx.test_expect();
    let active = get(&metrics::ACTIVE);
    let reading = get(&metrics::READING);
    let writing = get(&metrics::WRITING);
    let waiting = active.saturating_sub(reading + writing);
    let body = format!(
        "Active connections: {active} \nserver accepts handled requests\n {} {} {} \nReading: {reading} Writing: {writing} Waiting: {waiting} \n",
        get(&metrics::ACCEPTS),
        get(&metrics::HANDLED),
        get(&metrics::REQUESTS),
    );
    Outcome::Send(Response::bytes(200, "text/plain", body.into_bytes()))
}
