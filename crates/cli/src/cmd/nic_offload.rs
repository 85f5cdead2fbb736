//! `--nic-offload`: the live port's offloads, switched the way `ethtool -K` switches a real
//! NIC's: `tso=on|off,csum=on|off,gro=on|off`, or `all` / `none`. Unnamed settings stay on
//! (the default is every offload the port supports); what each does per port is in
//! [`runtime::NicOffload`]'s docs. (`--offload` is the connection-handoff policy.)

use runtime::NicOffload;

/// The sentence every refusal ends with.
const ALLOWED: &str = "use all, none, or tso=on|off,csum=on|off,gro=on|off";

/// Parses `all`, `none` or `KEY=on|off[,KEY=on|off…]` (keys `tso`, `csum`, `gro`, each at
/// most once).
pub fn parse_nic_offload(s: &str) -> Result<NicOffload, String> {
    match s {
        "all" => return Ok(NicOffload::ALL),
        "none" => return Ok(NicOffload::NONE),
        "" => return Err(format!("an empty setting: {ALLOWED}")),
        _ => {}
    }
    let mut o = NicOffload::ALL;
    let mut seen = [false; 3];
    for part in s.split(',') {
        let Some((key, value)) = part.split_once('=') else {
            return Err(format!("{part:?} is not KEY=on|off: {ALLOWED}"));
        };
        let on = match value {
            "on" => true,
            "off" => false,
            _ => return Err(format!("{key} takes on or off, not {value:?}: {ALLOWED}")),
        };
        let (i, slot) = match key {
            "tso" => (0, &mut o.tso),
            "csum" => (1, &mut o.csum),
            "gro" => (2, &mut o.gro),
            _ => return Err(format!("unknown offload {key:?}: {ALLOWED}")),
        };
        if std::mem::replace(&mut seen[i], true) {
            return Err(format!("{key} is given twice: {ALLOWED}"));
        }
        *slot = on;
    }
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_settings_switch_and_unnamed_ones_stay_on() {
        assert_eq!(parse_nic_offload("all"), Ok(NicOffload::ALL));
        assert_eq!(parse_nic_offload("none"), Ok(NicOffload::NONE));
        assert_eq!(
            parse_nic_offload("tso=off"),
            Ok(NicOffload {
                tso: false,
                csum: true,
                gro: true
            })
        );
        assert_eq!(
            parse_nic_offload("gro=off,csum=off,tso=on"),
            Ok(NicOffload {
                tso: true,
                csum: false,
                gro: false
            })
        );
    }

    #[test]
    fn bad_settings_are_refused_with_what_is_allowed() {
        for bad in [
            "",
            "tso",
            "tso=yes",
            "lro=on",
            "tso=on,tso=off",
            "tso=on,",
            "ALL",
            "tso=on;gro=off",
        ] {
            let e = parse_nic_offload(bad).expect_err(bad);
            assert!(e.ends_with(ALLOWED), "{bad:?}: {e}");
        }
    }
}
