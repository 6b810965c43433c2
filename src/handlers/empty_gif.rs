//! `empty_gif`: NGINX's 43-byte transparent 1×1 GIF, answered as its
//! handler answers: GET and HEAD only (else 405), `image/gif`, and NGINX's
//! fixed `Last-Modified` (23349600, so `If-Modified-Since` gives 304s);
//! no ranges, since NGINX's in-memory response does not allow them.

use super::outcome::Outcome;
use crate::http::context::{Method, RequestCtx};
use crate::http::response::Response;

/// The GIF, byte for byte NGINX's `ngx_empty_gif`.
pub const EMPTY_GIF: [u8; 43] = [
    b'G', b'I', b'F', b'8', b'9', b'a', // header
    0x01, 0x00, 0x01, 0x00, // 1×1
    0x80, 0x01, 0x00, // global 1-bit colour table, background #1
    0x00, 0x00, 0x00, 0xff, 0xff, 0xff, // black, white
    0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x01, 0x00, // transparent #1
    0x2c, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, // image
    0x02, 0x02, 0x4c, 0x01, 0x00, // LZW data
    0x3b, // trailer
];

/// NGINX's `last_modified_time` for the GIF.
const LAST_MODIFIED: i64 = 23_349_600;

/// Answers with the GIF.
pub fn serve(ctx: &mut RequestCtx) -> Outcome {
    if !matches!(ctx.method, Method::Get | Method::Head) {
        return Outcome::Status(405);
    }
    ctx.test_expect();
    let mut r = Response::bytes(200, "image/gif", EMPTY_GIF.to_vec());
    r.last_modified = Some(LAST_MODIFIED);
    Outcome::Send(r)
}
