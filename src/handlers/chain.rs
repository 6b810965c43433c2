//! The response filter chain: NGINX's header and body filters as one
//! ordered table ([`CHAIN`]), run on every response after its content
//! handler produced it and before the connection writes it. A content
//! handler (static, proxy, autoindex, …) produces a [`Response`] and calls
//! no filter; a filter looks at the head, may change it and may wrap the
//! body in a stream that rewrites it while it is sent (gzip, charset,
//! sub_filter, ssi, trailers). Adding a filter is adding a row here, in
//! NGINX's order (its `ngx_modules` list, last installed runs first):
//!
//! | filter | module | subrequests |
//! |---|---|---|
//! | slice | `slice.rs` | no |
//! | not_modified | `filters.rs` | no |
//! | headers (`expires`, `add_header`) | `filters.rs` | no |
//! | userid (`Set-Cookie`) | `userid.rs` | no |
//! | gunzip | `gunzip.rs` | yes |
//! | sub_filter | `sub_filter.rs` | no |
//! | charset | `charset.rs` | no |
//! | ssi | `ssi/` | yes |
//! | addition (`add_before_body`, `add_after_body`) | `addition.rs` | no |
//! | gzip | `gzip.rs` | no |
//! | range | `filters.rs` | no |
//! | header writer's rules | `filters.rs` | no |
//! | trailers (`add_trailer`) | `trailers.rs` | no |
//!
//! After the table, the chain's last step is NGINX's copy filter
//! (`copy.rs`: a small file body read into memory, the path the body
//! carries naming the file when the read fails).
//!
//! A filter can turn the response into an error ([`Stop::Status`]: 412
//! from the not-modified filter, 416 from the range filter), which the
//! caller answers like any other error status, `error_page` included, or
//! close the connection ([`Stop::Close`]: a slice that cannot be put
//! together, after the head was committed). What a pass set stays with
//! the request through a 416 ([`Carried`]; NGINX keeps it in the request's
//! `headers_out`): the 416 page carries the 200's `add_header` lines plus
//! its own pass's `always` ones, so such a header appears twice, and an
//! error page served for the 416 also keeps the file's ETag and charset.

use super::outcome::{Env, Outcome};
use super::{
    addition, charset, copy, filters, gunzip, gzip, slice, ssi, sub_filter, trailers, userid,
};
use crate::http::context::RequestCtx;
use crate::http::response::Response;

/// Why a filter stopped the response.
pub enum Stop {
    /// Answer with this status instead (`error_page` applies).
    Status(u16),
    /// Close the connection without an answer.
    Close,
}

/// One pass of a response through the chain: what it keeps for the
/// response that may replace this one.
pub struct Pass<'p> {
    /// What stays with the request.
    carried: &'p mut Carried,
    /// The charset the charset filter labelled this response with.
    charset: Option<String>,
}

/// A header filter: looks at the response's head, may change it and wrap
/// its body.
type HeaderFilter = fn(&mut RequestCtx, &Env<'_>, &mut Response, &mut Pass<'_>) -> Result<(), Stop>;

/// Which requests a filter runs for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Runs {
    /// The main request only (NGINX's filters that check `r != r->main`).
    Main,
    /// Subrequests too: an included page's SSI commands run, as in NGINX.
    Every,
}

/// A row of the chain.
struct Filter {
    /// The requests it runs for.
    runs: Runs,
    /// Its header filter.
    header: HeaderFilter,
}

/// A filter for the main request only.
const fn main(header: HeaderFilter) -> Filter {
    Filter {
        runs: Runs::Main,
        header,
    }
}

/// A filter for subrequests too.
const fn every(header: HeaderFilter) -> Filter {
    Filter {
        runs: Runs::Every,
        header,
    }
}

/// The chain, in the order filters see a response (the module table's).
const CHAIN: &[Filter] = &[
    main(slice_filter),
    main(not_modified_filter),
    main(headers_filter),
    main(userid_filter),
    every(gunzip_filter),
    main(sub_filter_filter),
    main(charset_filter),
    every(ssi_filter),
    main(addition_filter),
    main(gzip_filter),
    main(range_filter),
    main(writer_filter),
    main(trailers_filter),
];

/// Runs `resp` through the chain (after [`Carried::apply`]), then the
/// copy step for the main request. `Err` is what to answer instead;
/// `carried` then holds what stays with the request.
pub async fn run(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    resp: &mut Response,
    carried: &mut Carried,
) -> Result<(), Outcome> {
    let runs = if ctx.subrequest {
        Runs::Every
    } else {
        Runs::Main
    };
    let mut pass = Pass {
        carried,
        charset: None,
    };
    for f in CHAIN {
        if runs == Runs::Every && f.runs == Runs::Main {
            continue;
        }
        if let Err(stop) = (f.header)(ctx, env, resp, &mut pass) {
            return Err(match stop {
                Stop::Status(code) => Outcome::Status(code),
                Stop::Close => Outcome::Close,
            });
        }
    }
    if runs == Runs::Every {
        return Ok(());
    }
    copy::read_small_body(ctx, env, resp).await
}

/// The slice filter, first of NGINX's header filters: its errors come
/// after the head was committed, so the connection closes.
fn slice_filter(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    resp: &mut Response,
    _: &mut Pass<'_>,
) -> Result<(), Stop> {
    slice::header_filter(ctx, env, resp).map_err(|_| Stop::Close)
}

/// The not-modified filter, on a 200 the handler did not exempt; nothing
/// stays with the request after a 412 (NGINX clears the response's
/// headers before sending that page).
fn not_modified_filter(
    ctx: &mut RequestCtx,
    _: &Env<'_>,
    resp: &mut Response,
    pass: &mut Pass<'_>,
) -> Result<(), Stop> {
    if resp.status == 200 && !resp.no_not_modified {
        if let Err(code) = filters::not_modified(ctx, resp) {
            *pass.carried = Carried::default();
            return Err(Stop::Status(code));
        }
    }
    Ok(())
}

/// `expires` and `add_header` (which may read `$status`).
fn headers_filter(
    ctx: &mut RequestCtx,
    _: &Env<'_>,
    resp: &mut Response,
    _: &mut Pass<'_>,
) -> Result<(), Stop> {
    ctx.status = resp.status;
    filters::headers(ctx, resp);
    Ok(())
}

fn userid_filter(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    resp: &mut Response,
    _: &mut Pass<'_>,
) -> Result<(), Stop> {
    userid::header_filter(ctx, env, resp);
    Ok(())
}

fn gunzip_filter(
    ctx: &mut RequestCtx,
    _: &Env<'_>,
    resp: &mut Response,
    _: &mut Pass<'_>,
) -> Result<(), Stop> {
    gunzip::header_filter(ctx, resp);
    Ok(())
}

fn sub_filter_filter(
    ctx: &mut RequestCtx,
    _: &Env<'_>,
    resp: &mut Response,
    _: &mut Pass<'_>,
) -> Result<(), Stop> {
    sub_filter::header_filter(ctx, resp);
    Ok(())
}

/// The charset filter, told the charset an earlier pass chose.
fn charset_filter(
    ctx: &mut RequestCtx,
    _: &Env<'_>,
    resp: &mut Response,
    pass: &mut Pass<'_>,
) -> Result<(), Stop> {
    pass.charset = charset::header_filter(ctx, resp, pass.carried.charset.take());
    Ok(())
}

fn ssi_filter(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    resp: &mut Response,
    _: &mut Pass<'_>,
) -> Result<(), Stop> {
    ssi::header_filter(ctx, env, resp);
    Ok(())
}

/// The addition filter: NGINX has it before `sub_filter`, but its
/// subrequests' bodies reach the client through the postpone filter,
/// after SSI and before gzip, which is where porter puts the whole row.
fn addition_filter(
    ctx: &mut RequestCtx,
    env: &Env<'_>,
    resp: &mut Response,
    _: &mut Pass<'_>,
) -> Result<(), Stop> {
    addition::header_filter(ctx, env, resp);
    Ok(())
}

fn gzip_filter(
    ctx: &mut RequestCtx,
    _: &Env<'_>,
    resp: &mut Response,
    _: &mut Pass<'_>,
) -> Result<(), Stop> {
    gzip::header_filter(ctx, resp);
    Ok(())
}

/// The range filter; a 416 keeps this response's header lines, ETag and
/// charset for the page that answers it.
fn range_filter(
    ctx: &mut RequestCtx,
    _: &Env<'_>,
    resp: &mut Response,
    pass: &mut Pass<'_>,
) -> Result<(), Stop> {
    let Err(code) = filters::ranges(ctx, resp) else {
        return Ok(());
    };
    // The error page is not a 200: a proxied Last-Modified line does not
    // stay with it (the header writer's rule).
    if resp.last_modified_inline {
        resp.headers
            .retain(|(n, _)| !n.eq_ignore_ascii_case("last-modified"));
    }
    let carried = &mut *pass.carried;
    carried.headers = resp
        .etag
        .take()
        .map(|e| ("ETag".to_string(), e))
        .into_iter()
        .collect();
    carried.headers.append(&mut resp.headers);
    carried.charset = pass.charset.take();
    Err(Stop::Status(code))
}

/// The header writer's rules; the status is final from here on.
fn writer_filter(
    ctx: &mut RequestCtx,
    _: &Env<'_>,
    resp: &mut Response,
    _: &mut Pass<'_>,
) -> Result<(), Stop> {
    filters::writer_rules(resp);
    ctx.status = resp.status;
    Ok(())
}

fn trailers_filter(
    ctx: &mut RequestCtx,
    _: &Env<'_>,
    resp: &mut Response,
    _: &mut Pass<'_>,
) -> Result<(), Stop> {
    trailers::header_filter(ctx, resp);
    Ok(())
}

/// Who built a response, for what of [`Carried`] it keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Built {
    /// A handler (a file, `return` text, a proxied answer).
    Handler,
    /// NGINX's special response builder (a redirect, an error page).
    Special,
}

/// What earlier passes through the chain left on the request for the
/// response that replaces theirs.
#[derive(Debug, Default)]
pub struct Carried {
    /// Header lines, the replaced response's ETag first.
    headers: Vec<(String, String)>,
    /// The charset chosen.
    charset: Option<String>,
}

impl Carried {
    /// A header line that stays on every response that answers the
    /// request from now on (`WWW-Authenticate` of a 401).
    pub fn add_header(&mut self, name: &str, value: String) {
        self.headers.push((name.to_string(), value));
    }

    /// Adds header lines that stay with the request (after the ones
    /// already carried).
    pub fn add(&mut self, mut headers: Vec<(String, String)>) {
        self.headers.append(&mut headers);
    }

    /// Puts the carried header lines before `resp`'s own. A response NGINX
    /// builds itself ([`Built::Special`]) drops the carried ETag, as NGINX clears
    /// the ETag of its special responses; another keeps it, and its own
    /// ETag follows the carried lines (NGINX sends both, in the order of
    /// its header list: a carried `WWW-Authenticate` comes first too).
    pub fn apply(&mut self, resp: &mut Response, built: Built) {
        let special = built == Built::Special;
        let mut own = std::mem::take(&mut resp.headers);
        resp.headers = std::mem::take(&mut self.headers);
        // A response with a Location of its own replaces a carried one
        // (NGINX's `ngx_http_clear_location` before a redirect).
        let own_location =
            resp.location.is_some() || own.iter().any(|(n, _)| n.eq_ignore_ascii_case("location"));
        if own_location {
            resp.headers
                .retain(|(n, _)| !n.eq_ignore_ascii_case("location"));
        }
        // An upstream's type carried over an `X-Accel-Redirect` types the
        // answer, as NGINX's handlers keep a type already set; NGINX's
        // own pages are text/html.
        // The last one stands, as NGINX's copies replace each other.
        let mut carried_type = None;
        resp.headers.retain(|(n, v)| {
            let typed = n == "Content-Type";
            if typed {
                carried_type = Some(v.clone());
            }
            !typed
        });
        if let (Some(ct), false, false) = (carried_type, special, resp.own_type) {
            resp.content_type = Some(ct.into());
        }
        if special {
            resp.headers.retain(|(n, _)| n != "ETag");
        } else if !resp.headers.is_empty() {
            if let Some(e) = resp.etag.take() {
                resp.headers.push(("ETag".into(), e));
            }
        }
        resp.headers.append(&mut own);
    }
}
