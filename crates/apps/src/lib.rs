//! Applications written once against the per-shard application API ([`api`]), run under the
//! deterministic simulator (`sim`, through an adapter) and on real threads (`runtime`).
//!
//! - [`api`]: the application API — [`App`], the per-shard context [`Ctx`], [`Conn`] handles
//!   that report their shard and NUMA node;
//! - [`http`]: an HTTP/1.1 server over an in-memory file set (keep-alive, `Content-Length`,
//!   404, `Content-Type` by extension);
//! - [`load`]: a closed-loop HTTP/1.1 load client over K keep-alive connections.
#![deny(unsafe_code)]

pub mod api;
pub mod http;
pub mod load;

pub use api::{App, Conn, Ctx, Listener, ShardInfo};
