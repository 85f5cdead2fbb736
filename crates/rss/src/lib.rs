//! Receive-Side Scaling: Toeplitz hash, hash-field selection, RETA, steering filters.
#![deny(unsafe_code)]
