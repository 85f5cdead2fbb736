//! packetdrill-compatible conformance runner.
#![deny(unsafe_code)]
