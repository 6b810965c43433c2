//! HTTP/1.1 wire pieces the server (`http/`) and the upstream client
//! (`upstream/`) share, below both (hyper's `proto/h1`, pingora's
//! `protocols/http/v1`): chunked coding, the field line, the body stream a
//! response is sent from and the peer a tunnel relays to. It imports
//! nothing else of porter's.
//!
//! | file | what |
//! |---|---|
//! | `chunked.rs` | chunked transfer coding: decoder, encoder, last chunk |
//! | `fields.rs` | `Fields`: a response's header lines, one text and spans, shared |
//! | `rate.rs` | `Pacer`: `limit_rate` arithmetic, for client writes and upstream reads |
//! | `stream.rs` | `BodyStream` (a body read piece by piece), `TunnelPeer` |

pub mod chunked;
pub mod fields;
pub mod rate;
pub mod stream;

/// Appends one `Name: value` field line (a response head, a trailer, an
/// upstream request head).
pub fn header(out: &mut Vec<u8>, name: &str, value: &str) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value.as_bytes());
    out.extend_from_slice(b"\r\n");
}
