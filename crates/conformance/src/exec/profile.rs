//! Stack configurations a script run starts from: the stack's own defaults, the Linux
//! settings the Google corpus assumes, and FreeBSD's for scripts written against FreeBSD.

use super::fastopen;

/// A stack configuration a script run starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    pub name: &'static str,
    pub tcp: tcp::Config,
    /// Check the PSH bit of outbound segments. Linux places PSH by its own policy
    /// (`tcp_mark_push`: at the end of each write and whenever half a window was sent without
    /// one), which a TSO super-segment hides; the stack sets PSH when a segment empties the
    /// send buffer. Both are valid (RFC 9293 §3.9.1.2 leaves PSH to the sender).
    pub check_psh: bool,
    /// TCP Fast Open switches (Linux `net.ipv4.tcp_fastopen`; the stack keeps them outside
    /// `tcp::Config`, see `stack::StackConfig::tcp_fastopen`).
    pub tcp_fastopen: tcp::fastopen::FastOpenConfig,
    /// The server's Fast Open key (`net.ipv4.tcp_fastopen_key`); `None`: the stack's own.
    pub tcp_fastopen_key: Option<tcp::fastopen::FastOpenKey>,
    /// Where the stack puts TCP options in what it sends (`StackConfig::tcp_option_layout`):
    /// scripts compare the layout byte for byte ([`crate::matcher::check_option_layout`]).
    pub tcp_option_layout: wire::TcpOptionLayout,
    /// Linux's handling of ICMP errors about connections still opening, two stack settings
    /// beside `tcp::Config`: `StackConfig::tcp_icmp_errors_abort_opening` (any unreachable
    /// ends a SYN-SENT connection or an unaccepted Fast Open child; net/host unreachable
    /// drops a plain child in SYN-RECEIVED) and `StackConfig::tcp_syn_mss_follows_path_mtu`
    /// (a SYN after "fragmentation needed" announces the path's MSS).
    pub linux_icmp_rules: bool,
}

impl Profile {
    /// The stack's own defaults.
    pub fn stack_default() -> Profile {
        Profile {
            name: "default",
            tcp: tcp::Config::default(),
            check_psh: true,
            tcp_fastopen: tcp::fastopen::FastOpenConfig::default(),
            tcp_fastopen_key: None,
            tcp_option_layout: wire::TcpOptionLayout::Linux,
            linux_icmp_rules: false,
        }
    }

    /// The Linux settings the Google corpus assumes (`common/defaults.sh` plus kernel
    /// defaults): timestamps and SACK on, CUBIC, initial window 10, MSS 1460, RTO 1 s initial /
    /// 200 ms min, delayed ACK 40 ms, `tcp_syn_retries=5`, send buffer 256 KiB
    /// (`tcp_wmem[1]`), and a receive buffer of 15 MiB (`tcp_rmem[2]`), from which Linux and
    /// this stack both derive window scale 8. Options go out in Linux's layout: `wire` emits
    /// Linux's layout.
    pub fn linux_compat() -> Profile {
        Profile {
            name: "linux-compat",
            tcp: tcp::Config {
                mss_bytes: 1460,
                initial_window_segments: 10,
                rto_min_ns: 200 * tcp::config::NS_PER_MS,
                // Linux floors the variance term, not the RTO: RTO = SRTT + max(4·RTTVAR,
                // 200 ms) (`tcp_rtt_estimator`, `__tcp_set_rto`).
                rto_min_bounds_variance: true,
                rto_initial_ns: tcp::config::NS_PER_S,
                rto_max_ns: 120 * tcp::config::NS_PER_S,
                delayed_ack_ns: 40 * tcp::config::NS_PER_MS,
                // Linux `TCP_MAX_QUICKACKS`: the first segments of a connection are each
                // acknowledged at once (`tcp_incr_quickack`).
                quickack_segments: 16,
                send_buffer_bytes: 256 * 1024,
                recv_buffer_bytes: 15 * 1024 * 1024,
                window_scale: true,
                timestamps: true,
                sack: true,
                congestion_control: tcp::CongestionControl::Cubic,
                // Linux `tcp_slow_start`: every acknowledged segment counts; cwnd grows only
                // while it limits the sender (`tcp_is_cwnd_limited`).
                slow_start_increase_limit_segments: 0,
                cwnd_growth_requires_limited: true,
                // Linux grows cwnd by segments newly delivered; SACKed ones count once, when
                // SACKed (and then not at all: duplicate ACKs do not grow cwnd).
                ack_counts_previously_sacked_bytes: false,
                // `tcp_slow_start_after_idle=0` (common/defaults.sh).
                restart_after_idle: false,
                // Linux probes a zero window with a bare ACK below SND.UNA.
                zero_window_probe_carries_data: false,
                // Linux recovers with proportional rate reduction (`tcp_cwnd_reduction`).
                prr: true,
                // `tcp_recovery=1` (common/defaults.sh): RACK loss detection, RFC 8985 §6
                // (`tcp_rack_mark_lost`, the reordering timer `tcp_rack_reo_timeout`). On by
                // default too; set here so the profile does not depend on the default.
                rack: true,
                // Linux `tcp_rack_advance` runs on every segment an ACK delivers, SACKed ones
                // first, then the cumulatively acknowledged ones: RACK.rtt is the last one's.
                rack_rtt_from_last_in_sequence: true,
                // Linux `tcp_may_raise_cwnd`: with reordering seen, a SACK may grow cwnd.
                cwnd_grows_on_sack_when_reordering: true,
                // Linux CUBIC's HyStart (`hystart=1`, `hystart_detect=3`).
                hystart: true,
                syn_retries_max: 5,
                // Linux `tcp_early_retrans` = 3: tail loss probes (RFC 8985 §7), PTO =
                // 2·SRTT + 2 ms with no floor (`tcp_schedule_loss_probe`: `TCP_TIMEOUT_MIN`
                // when more than one packet is out).
                tail_loss_probe: true,
                tlp_pto_extra_ns: 2 * tcp::config::NS_PER_MS as u32,
                tlp_pto_floor_ns: 0,
                // Linux drops a segment acknowledging unsent data without a reply (`tcp_ack`:
                // `TCP_ACK_UNSENT_DATA`); `ts_recent/invalid_ack` expects that silence. The
                // stack's default answers with an ACK, as RFC 9293 §3.10.7.4 says.
                ack_unsent_data_replies: false,
                // Linux takes a segment without a timestamp on a connection that negotiated
                // them (PAWS is checked only when one is present); `inq/client` sends data so.
                accept_missing_timestamps: true,
                // Linux resets a connection closed by its application when new data arrives
                // (`tcp_rcv_state_process`, "abort on data"; `user_timeout/user_timeout`).
                reset_on_data_after_close: true,
                // Linux admits writes skb by skb and charges each skb's truesize against
                // `sk_sndbuf` (`tcp_sendmsg_locked`), which grows with cwnd
                // (`tcp_sndbuf_expand`): write returns, EPOLLOUT edges, `tcpi_sndbuf_limited`.
                send_buffer_skb_accounting: true,
                // Linux refuses a SYN-ACK echoing a TS val it never sent
                // (`tcp_rcv_synsent_state_process`; `fastopen/client/synack-data`).
                syn_ack_checks_ts_echo: true,
                // Linux's Nagle is Minshall's (`tcp_nagle_check`, `tcp_minshall_check`): a
                // write's short tail leaves with its full segments.
                nagle_minshall: true,
                ..tcp::Config::default()
            },
            check_psh: false,
            // `common/defaults.sh`: `tcp_fastopen=0x70403` (client and server, every listener a
            // Fast Open listener; the upper bits are not upstream Linux's and are ignored)
            // and its key.
            tcp_fastopen: tcp::fastopen::FastOpenConfig::default().with_sysctl_bits(0x70403),
            tcp_fastopen_key: Some(tcp::fastopen::FastOpenKey::from_words(
                fastopen::DEFAULTS_KEY_WORDS,
            )),
            tcp_option_layout: wire::TcpOptionLayout::Linux,
            // `tcp_v4_err`/`tcp_v6_err`/`tcp_req_err` and the route-based MSS of
            // `tcp_advertise_mss` (`fastopen/server/icmp-*`, `syn-data-icmp-unreach-*`).
            linux_icmp_rules: true,
        }
    }

    /// FreeBSD's defaults (14.x, the default `freebsd` TCP stack), for scripts written against
    /// FreeBSD (e.g. with the nplab packetdrill fork): options in `tcp_addoptions`'s layout
    /// (`<mss 1460,nop,wscale 6,sackOK,TS val .. ecr ..>`, `<mss 1460,sackOK,eol,eol>`),
    /// and the sysctl defaults —
    /// - `net.inet.tcp.rfc1323=1`, `net.inet.tcp.sack.enable=1`: window scaling, timestamps
    ///   and SACK offered;
    /// - `net.inet.tcp.initcwnd_segments=10`; `net.inet.tcp.cc.algorithm=cubic` (14.0 on);
    /// - `net.inet.tcp.rexmit_initial=1000` ms, `net.inet.tcp.rexmit_min=30` ms (`TCPTV_MIN`,
    ///   a floor on the whole RTO), `TCPTV_REXMTMAX` 64 s;
    /// - `net.inet.tcp.delayed_ack=1`, `net.inet.tcp.delacktime=100` ms, an ACK for every
    ///   second full-sized segment and no quick-ACK mode;
    /// - `net.inet.tcp.sendspace=32768`; the window scale FreeBSD requests fits `kern.ipc.maxsockbuf`
    ///   (2 MiB, shift 6), so the receive buffer is 2 MiB here (the stack derives the shift
    ///   from it);
    /// - the default stack has no RACK and no tail loss probe (those are `tcp_rack`'s);
    ///   `net.inet.tcp.do_prr=1`: proportional rate reduction in SACK recovery; slow start
    ///   restarts after an idle RTO; a zero-window probe carries a byte of data; an ACK of
    ///   unsent data is answered with an ACK (`tcp_input`'s `dropafterack`);
    ///   `net.inet.tcp.abc_l_var=2` (RFC 3465's L).
    ///
    /// Not modelled: FreeBSD's `tcp_rexmit_slop` (200 ms added to every computed RTO before the
    /// 30 ms floor), its SYN backoff table (`tcp_syn_backoff`, until `net.inet.tcp.keepinit`,
    /// 75 s; here the stack's doubling and 6 retries), receive-buffer autotuning (FreeBSD starts
    /// at 64 KiB and grows, so its data segments advertise less than the 2 MiB here), and the
    /// `tcp_rack`/`bbr` stacks.
    pub fn freebsd_compat() -> Profile {
        Profile {
            name: "freebsd-compat",
            tcp: tcp::Config {
                mss_bytes: 1460,
                default_peer_mss_bytes: 536,
                initial_window_segments: 10,
                rto_min_ns: 30 * tcp::config::NS_PER_MS,
                rto_min_bounds_variance: false,
                rto_initial_ns: tcp::config::NS_PER_S,
                rto_max_ns: 64 * tcp::config::NS_PER_S,
                delayed_ack_ns: 100 * tcp::config::NS_PER_MS,
                quickack_segments: 0,
                send_buffer_bytes: 32 * 1024,
                recv_buffer_bytes: 2 * 1024 * 1024,
                window_scale: true,
                timestamps: true,
                sack: true,
                congestion_control: tcp::CongestionControl::Cubic,
                slow_start_increase_limit_segments: 2,
                restart_after_idle: true,
                zero_window_probe_carries_data: true,
                prr: true,
                rack: false,
                tail_loss_probe: false,
                ack_unsent_data_replies: true,
                // `tcp_input`: data for a socket its process closed is answered with a RST
                // (`dropwithreset` after `SS_NOFDREF`).
                reset_on_data_after_close: true,
                ..tcp::Config::default()
            },
            check_psh: false,
            tcp_fastopen: tcp::fastopen::FastOpenConfig::default(),
            tcp_fastopen_key: None,
            tcp_option_layout: wire::TcpOptionLayout::FreeBsd,
            linux_icmp_rules: false,
        }
    }

    /// A profile by its command-line name.
    pub fn by_name(name: &str) -> Option<Profile> {
        match name {
            "linux-compat" => Some(Profile::linux_compat()),
            "freebsd-compat" => Some(Profile::freebsd_compat()),
            "default" => Some(Profile::stack_default()),
            _ => None,
        }
    }
}

/// Applies a FreeBSD sysctl that a script sets (`sysctl -w net.inet.tcp.delacktime=40`) to the
/// stack's TCP configuration. `name` is relative to `net.inet.`; values are FreeBSD's units
/// (milliseconds for times). `Err` says why the setting cannot be honoured (the script is then
/// skipped, never run with the setting ignored).
pub(super) fn freebsd_sysctl(cfg: &mut tcp::Config, name: &str, value: &str) -> Result<(), String> {
    let ms = || -> Result<u64, String> {
        value
            .parse::<u64>()
            .map(|v| v.saturating_mul(tcp::config::NS_PER_MS))
            .map_err(|_| format!("FreeBSD sysctl net.inet.{name}={value}: not a number of ms"))
    };
    let flag = || -> Result<bool, String> {
        match value {
            "0" => Ok(false),
            "1" => Ok(true),
            _ => Err(format!(
                "FreeBSD sysctl net.inet.{name}={value}: not 0 or 1"
            )),
        }
    };
    match name {
        // 0: every segment is acknowledged at once.
        "tcp.delayed_ack" => {
            if !flag()? {
                cfg.delayed_ack_ns = 0;
            }
        }
        "tcp.delacktime" => cfg.delayed_ack_ns = ms()?,
        "tcp.rexmit_min" => cfg.rto_min_ns = ms()?,
        "tcp.rexmit_initial" => cfg.rto_initial_ns = ms()?,
        "tcp.initcwnd_segments" => {
            cfg.initial_window_segments = value
                .parse()
                .map_err(|_| format!("FreeBSD sysctl net.inet.{name}={value}: not a count"))?;
        }
        // 0 neither, 1 both, 2 window scaling only, 3 timestamps only (`tcp_do_rfc1323`).
        "tcp.rfc1323" => {
            let (ws, ts) = match value {
                "0" => (false, false),
                "1" => (true, true),
                "2" => (true, false),
                "3" => (false, true),
                _ => {
                    return Err(format!(
                        "FreeBSD sysctl net.inet.{name}={value}: not 0 to 3"
                    ));
                }
            };
            cfg.window_scale = ws;
            cfg.timestamps = ts;
        }
        "tcp.sack.enable" => cfg.sack = flag()?,
        "tcp.do_prr" => cfg.prr = flag()?,
        "tcp.cc.algorithm" => {
            cfg.congestion_control = match value {
                "cubic" => tcp::CongestionControl::Cubic,
                "newreno" => tcp::CongestionControl::NewReno,
                other => {
                    return Err(format!(
                        "FreeBSD sysctl net.inet.{name}={other}: the stack has no such \
                         congestion control"
                    ));
                }
            }
        }
        "tcp.mssdflt" => {
            cfg.default_peer_mss_bytes = value
                .parse()
                .map_err(|_| format!("FreeBSD sysctl net.inet.{name}={value}: not an MSS"))?;
        }
        // The stack's own TCP is FreeBSD's default stack here; `rack` and `bbr` are others.
        "tcp.functions_default" if value == "freebsd" => {}
        // ECN off is what the profile runs anyway.
        "tcp.ecn.enable" if value == "0" => {}
        _ => {
            return Err(format!(
                "FreeBSD sysctl net.inet.{name}={value} has no stack setting"
            ));
        }
    }
    *cfg = cfg.validated();
    Ok(())
}
