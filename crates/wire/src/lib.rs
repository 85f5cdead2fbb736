//! Checked views over packet bytes and plain `Repr` structs for the protocols rsstack speaks.
//!
//! Each protocol module has two layers (the smoltcp habit):
//! - a *view* (`Packet<T: AsRef<[u8]>>`) whose `new_checked` validates lengths once, after which
//!   no accessor can panic;
//! - a *Repr*, a plain struct of the meaningful fields, with `parse(&view) -> Result<Repr, Error>`
//!   and `emit(&self, &mut view)`.
//!
//! Protocol logic works on Reprs; only this crate touches bytes. Malformed input always yields a
//! typed [`Error`], never a panic.
#![deny(unsafe_code)]

pub mod tcp;
