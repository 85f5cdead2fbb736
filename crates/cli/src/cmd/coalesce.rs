//! `--coalesce`: the NIC model's interrupt moderation, set the way `ethtool -C` sets a real
//! NIC's (seed 000 "interrupt moderation", seed 004 "low-latency interrupts").
//!
//! `rx-usecs=N` (0..=100000): the minimum gap between two wake-ups of a queue (0: no
//! moderation), the adaptive range's lower end when adaptive; `rx-frames=N` (0..=65535):
//! pending packets that wake the queue before the gap has passed (0: off); `adaptive-rx=on|off`:
//! the gap follows the packet rate (ixgbe's adaptive ITR, up to 125 µs); `lli=on|off`: a TCP
//! segment with PSH wakes the queue at once (low-latency interrupts by flag);
//! `lli-ports=P[+P…]` (up to 8 ports): a TCP or UDP packet to or from one of these ports
//! wakes the queue at once (the 82599's LLI filters). Unnamed settings keep the default
//! (adaptive, 10–125 µs).

use nic::{AdaptiveModeration, LLI_PORTS_MAX, LliPorts, ModerationConfig};

/// Largest `rx-usecs`, µs.
const RX_USECS_MAX: u64 = 100_000;

fn on_off(key: &str, v: &str) -> Result<bool, String> {
    match v {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("{key} takes on or off, not {v:?}")),
    }
}

/// Parses `KEY=VALUE[,KEY=VALUE…]` into a moderation setting.
pub fn parse_coalesce(s: &str) -> Result<ModerationConfig, String> {
    let mut m = ModerationConfig::default();
    let mut usecs: Option<u64> = None;
    let mut adaptive: Option<bool> = None;
    for part in s.split(',').filter(|p| !p.is_empty()) {
        let Some((key, value)) = part.split_once('=') else {
            return Err(format!(
                "{part:?} is not KEY=VALUE (rx-usecs, rx-frames, adaptive-rx, lli, lli-ports)"
            ));
        };
        match key {
            "rx-usecs" => {
                let n = value
                    .parse::<u64>()
                    .ok()
                    .filter(|n| *n <= RX_USECS_MAX)
                    .ok_or_else(|| format!("rx-usecs must be 0..={RX_USECS_MAX}, not {value:?}"))?;
                usecs = Some(n);
            }
            "rx-frames" => {
                m.packets_threshold = value
                    .parse::<u16>()
                    .map(u32::from)
                    .map_err(|_| format!("rx-frames must be 0..=65535, not {value:?}"))?;
            }
            "adaptive-rx" => adaptive = Some(on_off(key, value)?),
            "lli" => m.lli_on_push = on_off(key, value)?,
            "lli-ports" => {
                let ports = value
                    .split('+')
                    .map(|p| {
                        p.parse::<u16>().ok().filter(|p| *p != 0).ok_or_else(|| {
                            format!("lli-ports takes ports 1..=65535 joined by '+', not {p:?}")
                        })
                    })
                    .collect::<Result<Vec<u16>, String>>()?;
                m.lli_ports = LliPorts::new(&ports)
                    .map_err(|_| format!("lli-ports takes at most {LLI_PORTS_MAX} ports"))?;
            }
            _ => {
                return Err(format!(
                    "unknown setting {key:?} (rx-usecs, rx-frames, adaptive-rx, lli, lli-ports)"
                ));
            }
        }
    }
    let adaptive = adaptive.unwrap_or(usecs.is_none());
    let interval_ns = usecs.map_or(m.interval_ns, |u| u * 1_000);
    m.interval_ns = interval_ns;
    m.adaptive = if adaptive {
        let d = AdaptiveModeration::default();
        Some(AdaptiveModeration {
            interval_ns_min: interval_ns,
            interval_ns_max: d.interval_ns_max.max(interval_ns),
            ..d
        })
    } else {
        None
    };
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_interval_threshold_and_lli_are_set_as_named() {
        let m = parse_coalesce("rx-usecs=50,rx-frames=32,adaptive-rx=off,lli=on").expect("valid");
        assert_eq!(m.interval_ns, 50_000);
        assert_eq!(m.packets_threshold, 32);
        assert!(m.lli_on_push);
        assert_eq!(m.adaptive, None);
        assert!(m.lli_ports.is_empty());
        let m = parse_coalesce("rx-usecs=100,lli-ports=80+443").expect("valid");
        assert_eq!(m.lli_ports.as_slice(), [80, 443]);
        assert!(!m.lli_on_push);
    }

    #[test]
    fn rx_usecs_zero_turns_moderation_off_and_adaptive_keeps_its_range() {
        let m = parse_coalesce("rx-usecs=0").expect("valid");
        assert_eq!((m.interval_ns, m.adaptive), (0, None));
        let m = parse_coalesce("adaptive-rx=on,rx-usecs=20").expect("valid");
        let a = m.adaptive.expect("adaptive");
        assert_eq!((a.interval_ns_min, a.interval_ns_max), (20_000, 125_000));
        assert_eq!(
            parse_coalesce("").expect("valid"),
            ModerationConfig::default()
        );
    }

    #[test]
    fn bad_settings_are_sentences_naming_the_limit() {
        for (s, want) in [
            ("rx-usecs=100001", "rx-usecs must be 0..=100000"),
            ("rx-frames=70000", "rx-frames must be 0..=65535"),
            ("adaptive-rx=yes", "adaptive-rx takes on or off"),
            ("tx-usecs=3", "unknown setting"),
            ("rx-usecs", "is not KEY=VALUE"),
            ("lli-ports=80+x", "lli-ports takes ports 1..=65535"),
            ("lli-ports=0", "lli-ports takes ports 1..=65535"),
            ("lli-ports=", "lli-ports takes ports 1..=65535"),
            ("lli-ports=1+2+3+4+5+6+7+8+9", "at most 8 ports"),
        ] {
            let e = parse_coalesce(s).expect_err(s);
            assert!(e.contains(want), "{s}: {e}");
        }
    }
}
