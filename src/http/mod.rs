//! HTTP/1.1: request parsing and URI normalisation, ranges, conditional
//! requests, chunked coding, responses and the connection loop that reads
//! requests and writes responses. The layer below the handlers: the
//! connection asks them for responses through [`connection::Respond`] and
//! imports nothing from them, the runtime or the upstreams.

pub mod body;
mod buffers;
pub use crate::h1::chunked;
mod closing;
pub mod conditional;
mod conn_vars;
pub mod connection;
pub mod context;
mod defined_vars;
mod derived;
mod head;
pub mod http2;
pub mod http3;
pub mod proxy_protocol;
pub mod range;
mod request_vars;
pub use crate::h1::rate;
pub mod request;
pub mod response;
pub mod reuse;
pub mod status;
pub mod stream;
mod stream_request;
mod tls_accept;
pub mod tls_vars;
pub mod trailers;
pub mod tunnel;
pub mod upstream_vars;
pub mod uri;
pub mod user_agent;
pub mod userid;
mod writer;
