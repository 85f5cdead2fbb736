//! Sans-IO TCP connection engine.
#![deny(unsafe_code)]
