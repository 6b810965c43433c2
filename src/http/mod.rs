//! HTTP/1.1: request parsing and URI normalisation, ranges, conditional
//! requests, chunked bodies, responses and the connection loop.

pub mod body;
mod buffers;
pub mod chunked;
pub mod conditional;
pub mod connection;
pub mod context;
pub mod range;
pub mod request;
pub mod response;
pub mod status;
pub mod upstream_vars;
pub mod uri;
mod writer;
