//! Fuzz the Ethernet/802.1Q parser; re-emit every accepted frame and check it parses back equal.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::{EthernetFrame, EthernetRepr};

fuzz_target!(|data: &[u8]| {
    let Ok(frame) = EthernetFrame::new_checked(data) else {
        return;
    };
    let Ok(repr) = EthernetRepr::parse(&frame) else {
        return;
    };
    let payload = frame.payload();
    let mut out = vec![0u8; repr.header_len() + payload.len()];
    let mut f = EthernetFrame::new_unchecked(&mut out[..]);
    repr.emit(&mut f)
        .expect("emit into a buffer of header_len() bytes");
    f.payload_mut().copy_from_slice(payload);
    let again = EthernetFrame::new_checked(&out[..]).expect("emitted frame is well-formed");
    assert_eq!(EthernetRepr::parse(&again), Ok(repr));
    assert_eq!(again.payload(), payload);
});
