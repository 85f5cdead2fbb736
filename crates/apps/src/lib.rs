//! Applications written once against the per-shard application API ([`api`]), run under the
//! deterministic simulator (`sim`, through an adapter) and on real threads (`runtime`).
//!
//! - [`api`]: the application API — [`App`], the per-shard context [`Ctx`], [`Conn`] handles
//!   that report their shard and NUMA node; `Option<A>` is an app (`None` idles);
//! - [`http`]: an HTTP/1.1 server over an in-memory file set (keep-alive, `Content-Length`,
//!   404, `Content-Type` by extension, `HEAD`), loadable from a directory;
//! - [`load`]: a closed-loop HTTP/1.1 load client over K keep-alive connections;
//! - [`echo`] and [`discard`]: RFC 862 and RFC 863 TCP servers;
//! - [`ttcp`]: NTttcp-style bulk sender and receiver with byte counts and timestamps;
//! - [`get`]: a one-shot HTTP/1.1 `GET` client (`Content-Length`, chunked, or until close).
#![deny(unsafe_code)]

pub mod api;
pub mod discard;
pub mod echo;
pub mod get;
pub mod http;
pub mod load;
mod serve;
pub mod ttcp;

pub use api::{App, Conn, Ctx, Listener, ShardInfo};
