//! The chain's last step, NGINX's copy filter: after every filter ran, a
//! small file body is read into memory so it goes out in one `writev` with
//! the head (a failed read can still become a 5xx); a larger one is sent
//! from the file by the connection. The path the body carries names the
//! file in the line a failed read logs (a cache hit's cache file, a static
//! file's `$request_filename`).

use std::rc::Rc;

use super::disk_io::failed;
use super::outcome::{Env, Outcome};
use crate::http::context::RequestCtx;
use crate::http::response::{Body, Response};
use crate::log::Level;

/// Bodies up to this size are read after the filters, before the head is
/// written, and go out in one `writev` with it; a failed read can still
/// become a 5xx. Larger bodies are sent from the file by the connection.
const SMALL_BODY: u64 = 32 * 1024;

/// Reads a small file body into memory (through the fast path or the
/// pool, as the location's `aio` says). `Err` carries what to answer
/// instead when the read fails.
pub async fn read_small_body(
    ctx: &RequestCtx,
    env: &Env<'_>,
    resp: &mut Response,
) -> Result<(), Outcome> {
    let Body::File {
        file,
        start,
        len,
        path,
    } = &resp.body
    else {
        return Ok(());
    };
    if *len > SMALL_BODY || ctx.is_head() {
        return Ok(());
    }
    let path = Rc::clone(path);
    let mut buf = vec![0u8; *len as usize];
    let e = match file.read_at(&mut buf, *start).await {
        Ok(n) if n as u64 == *len => {
            resp.body = Body::Bytes(buf);
            return Ok(());
        }
        Ok(n) => {
            ctx.log(env.log).line(
                Level::Crit,
                format_args!("pread() read only {n} of {len} from \"{path}\""),
            );
            return Err(Outcome::Status(500));
        }
        Err(e) => e,
    };
    Err(failed(ctx, env, &e, "pread", &path))
}
