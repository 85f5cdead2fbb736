//! Named drop and event counters (FreeBSD `netstat -s` style).
//!
//! Every drop path in the stack increments exactly one counter named after the reason before
//! it drops. [`crate::Stack::counters`] returns a [`Counters`] snapshot by value; the names are
//! also available as a list for printing ([`Counters::named`]).

macro_rules! counters {
    ($( $(#[$doc:meta])* $name:ident ),* $(,)?) => {
        /// A snapshot of the stack's counters. All values only ever increase.
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        pub struct Counters {
            $( $(#[$doc])* pub $name: u64, )*
        }

        impl Counters {
            /// Adds every counter of `other` to this one (the stack's parts keep their own
            /// counters; the public snapshot is their sum).
            pub(crate) fn merge(&mut self, other: &Counters) {
                $( self.$name += other.$name; )*
            }

            /// Every counter as `(name, value)`, in declaration order.
            pub fn named(&self) -> Vec<(&'static str, u64)> {
                vec![$( (stringify!($name), self.$name), )*]
            }
        }
    };
}

counters! {
    // ---- link layer
    /// Frames received (every call to `receive`).
    rx_frames,
    /// Ethernet header truncated, an 802.3 length field, or stacked VLAN tags.
    rx_drop_malformed_eth,
    /// Frame whose source MAC is ours (looped back) or a group address.
    rx_drop_bad_src_mac,
    /// Unicast frame for another MAC address.
    rx_drop_other_mac,
    /// 802.1Q-tagged frame (the interface has no VLAN configuration).
    rx_drop_vlan_tagged,
    /// EtherType the stack does not speak.
    rx_drop_unknown_ethertype,
    // ---- receive checksum offload (the NIC's verdicts in `wire::RxMeta`)
    /// IPv4 headers whose checksum the NIC verified good, so the stack did not verify it.
    rx_ipv4_csum_trusted,
    /// TCP/UDP segments whose checksum the NIC verified good, so the stack did not verify it.
    rx_csum_trusted,
    // ---- ARP (RFC 826)
    /// ARP packet truncated or not Ethernet/IPv4.
    rx_drop_malformed_arp,
    /// ARP requests answered.
    arp_requests_answered,
    /// ARP requests sent (first tries and retries).
    arp_requests_sent,
    /// ARP packets for another target that taught us nothing.
    arp_rx_other_target,
    /// ARP packet claiming one of our own addresses from another MAC (address conflict).
    arp_rx_conflict,
    /// Packets dropped because the per-neighbour queue awaiting ARP resolution was full.
    arp_pending_queue_full,
    /// Packets dropped because ARP resolution gave up after the retry limit.
    arp_resolution_failed,
    // ---- IPv6 neighbour discovery (RFC 4861)
    /// NS/NA with a hop limit other than 255 (RFC 4861 §7.1.1, §7.1.2).
    nd_drop_bad_hop_limit,
    /// NS for an address that is not ours.
    nd_rx_not_for_us,
    /// Neighbour advertisements answered to solicitations.
    nd_solicits_answered,
    /// Neighbour solicitations sent (first tries and retries).
    nd_solicits_sent,
    /// NA for a neighbour we have no entry for (RFC 4861 §7.2.5: silently discarded).
    nd_rx_unsolicited_advert,
    /// Packets dropped because the per-neighbour queue awaiting ND resolution was full.
    nd_pending_queue_full,
    /// Packets dropped because ND resolution gave up after the retry limit.
    nd_resolution_failed,
    /// A new neighbour entry was needed but every slot holds an unresolved neighbour.
    neighbor_cache_full,
    /// Resolved entries evicted to make room for a new neighbour.
    neighbor_evictions,
    /// Resolved entries that expired.
    neighbor_expired,
    /// Broadcast requests re-validating a resolved entry on negative advice from TCP (RFC 1122
    /// §2.3.2.1 "higher-layer advice": a connection to or through that neighbour retransmitted
    /// by timeout R1 times, see `tcp::Connection::path_in_doubt`).
    neighbor_revalidations,
    // ---- IPv4 (RFC 791, RFC 1122)
    /// IPv4 header truncated, bad version, bad IHL/total length, bad options.
    rx_drop_ipv4_malformed,
    /// IPv4 header checksum did not verify.
    rx_drop_ipv4_bad_checksum,
    /// Source address is broadcast or multicast (RFC 1122 §3.2.1.3, RFC 4291 §2.7).
    rx_drop_bad_source,
    /// IP packet for an address that is not ours (hosts do not forward).
    rx_drop_not_for_us,
    /// IPv4 or IPv6 upper-layer protocol the stack does not speak.
    rx_drop_unknown_protocol,
    // ---- IPv6 (RFC 8200)
    /// IPv6 header truncated, bad version, bad payload length, bad extension header chain.
    rx_drop_ipv6_malformed,
    /// IPv6 packets whose chain ends in "no next header" (RFC 8200 §4.7): consumed.
    rx_ipv6_no_next_header,
    /// IPv6 routing header with segments left (hosts do not forward, RFC 8200 §4.4).
    rx_drop_ipv6_routing_header,
    // ---- fragment reassembly (RFC 791, RFC 815, RFC 8200 §4.5, RFC 5722)
    /// Fragments received (IPv4 and IPv6).
    rx_fragments,
    /// Datagrams reassembled and delivered.
    rx_reassembled,
    /// Datagrams dropped because a fragment overlapped another one (RFC 5722).
    rx_drop_reasm_overlap,
    /// Fragments of a datagram already dropped (overlap, bad length, too big): the datagram
    /// stays condemned until its timer runs out, so a resent tail cannot revive it.
    rx_drop_reasm_condemned,
    /// Datagrams dropped because their reassembly timer expired.
    rx_drop_reasm_timeout,
    /// Fragments dropped because the reassembly table was full and nothing could be evicted
    /// (only with a zero-sized table: otherwise the oldest datagram is evicted).
    rx_drop_reasm_table_full,
    /// Datagrams evicted (oldest first) because the table held `reasm_datagrams_max`.
    rx_reasm_evicted_table,
    /// Datagrams evicted (oldest first) because all reassembly held `reasm_mem_max` bytes.
    rx_reasm_evicted_memory,
    /// Datagrams evicted (the source's oldest first) because one source held
    /// `reasm_source_mem_max` bytes.
    rx_reasm_evicted_source,
    /// Datagrams dropped because they would exceed the per-datagram byte limit (or 65535),
    /// or alone the per-source or global reassembly memory bound.
    rx_drop_reasm_too_big,
    /// Fragments with a bad length (a non-final fragment not a multiple of 8, or an end that
    /// disagrees with the known total length): the whole datagram is dropped.
    rx_drop_reasm_malformed,
    /// Exact duplicate fragments (same offset and length) dropped; the datagram survives.
    rx_reasm_duplicate,
    // ---- ICMP (RFC 792, RFC 4443)
    /// ICMPv4/ICMPv6 message truncated, bad checksum or bad code.
    rx_drop_icmp_malformed,
    /// ICMPv4/ICMPv6 type this host does not handle (router discovery, MLD, redirect, …).
    rx_drop_icmp_unsupported,
    /// Echo requests answered (v4 and v6).
    icmp_echo_replies_sent,
    /// Echo replies received (v4 and v6).
    icmp_echo_replies_received,
    /// Echo requests to a broadcast or multicast address, ignored (RFC 1122 §3.2.2.6).
    icmp_echo_broadcast_ignored,
    /// Echo replies dropped because the application did not collect earlier ones.
    icmp_echo_reply_queue_full,
    /// ICMP error messages received (v4 and v6): counted, not acted on.
    icmp_errors_received,
    /// ICMP errors handed to the socket that sent the quoted packet.
    icmp_errors_to_sockets,
    /// ICMP errors whose quoted packet matches no socket of ours: ignored (one that names a
    /// TCP connection but fails the RFC 5927 sequence check is `tcp_icmp_out_of_window`).
    icmp_errors_unmatched,
    /// ICMP error messages sent (port/protocol unreachable).
    icmp_errors_sent,
    /// ICMP errors not sent because the rate limit was exhausted (RFC 1812 §4.3.2.8,
    /// RFC 4443 §2.4(f)).
    icmp_errors_rate_limited,
    /// ICMP errors not sent because the invoking packet must not trigger one
    /// (RFC 1122 §3.2.2, RFC 4443 §2.4(e)).
    icmp_errors_suppressed,
    // ---- UDP (RFC 768)
    /// UDP header truncated, bad length or bad checksum.
    rx_drop_udp_malformed,
    /// UDP datagram for a port with no socket (an ICMP port unreachable may follow).
    udp_rx_no_socket,
    /// UDP datagram dropped because the socket's receive queue was full.
    udp_rx_socket_full,
    /// UDP datagrams delivered to sockets.
    udp_rx_delivered,
    /// UDP datagrams sent.
    udp_tx_datagrams,
    // ---- TCP (RFC 9293)
    /// TCP header truncated, bad data offset, bad options or bad checksum.
    rx_drop_tcp_malformed,
    /// Segment for a closed port answered with RST (RFC 9293 §3.10.7.1).
    tcp_rx_no_listener_rst_sent,
    /// Segment for a closed port not answered because it carried RST itself.
    tcp_rx_no_listener_rst_ignored,
    /// SYN dropped because the listener's accept backlog was full.
    tcp_listen_backlog_full,
    /// SYN-ACKs sent with a SYN cookie because the SYN backlog was full (RFC 4987 §3.6).
    tcp_syn_cookies_sent,
    /// Error-queue notifications (zero-copy completions, transmit timestamps) dropped: the
    /// socket's queue held `tcp_notify::ERRQUEUE_NOTIFICATIONS_MAX` already.
    tcp_errqueue_dropped,
    /// Sends left without transmit timestamps: `TIMESTAMPED_SENDS_OUTSTANDING_MAX` were
    /// outstanding.
    tcp_tx_timestamps_dropped,
    /// Fast Open (RFC 7413): SYN-ACKs that carried a cookie for the client.
    tcp_fastopen_cookies_sent,
    /// Fast Open children: connections that accepted data in their SYN (or were allowed to).
    tcp_fastopen_children,
    /// SYN data dropped (no valid cookie, listener not Fast Open or its queue full): the
    /// SYN-ACK acknowledges only the SYN and the client sends the data again.
    tcp_fastopen_syn_data_dropped,
    /// Fast Open SYNs a Fast Open listener treated as ordinary because its queue was full.
    tcp_fastopen_queue_full,
    /// Fast Open client: active opens whose SYN carried data (a cookie, or none needed).
    tcp_fastopen_client_syn_data,
    /// Fast Open client: active opens that asked for a cookie (none cached).
    tcp_fastopen_client_cookie_requests,
    /// Fast Open client: opens sent as ordinary SYNs because SYNs with data to the server
    /// were lost again and again (RFC 7413 §4.1.3.1).
    tcp_fastopen_client_disabled_after_loss,
    /// Fast Open client: SYN-ACKs that acknowledged all the data the SYN carried.
    tcp_fastopen_client_syn_data_acked,
    /// Fast Open client: SYN-ACKs that acknowledged only part of it, or none (sent again).
    tcp_fastopen_client_syn_data_unacked,
    /// Fast Open client: cookies cached from SYN-ACKs.
    tcp_fastopen_client_cookies_cached,
    /// Fast Open client: cache entries evicted for a new server or a lower bound.
    tcp_fastopen_cache_evictions,
    /// Connections opened from a valid SYN cookie.
    tcp_syn_cookies_accepted,
    /// SYN dropped because the connection table was full.
    tcp_conn_table_full,
    /// SYN (or SYN-cookie ACK) dropped under table pressure because its source address
    /// already held its share of the table (`Limits::tcp_source_share_pct`).
    tcp_source_limit,
    /// Reclaim scans run under table pressure (`Limits::tcp_reclaim_high_water_pct`).
    tcp_reclaim_scans,
    /// TIME-WAIT connections an application still held, released early under table pressure.
    tcp_reclaimed_time_wait,
    /// Connections the application closed that entered TIME-WAIT and became compact
    /// records (their TCB, rings and socket slot freed; `stack::time_wait`).
    tcp_time_wait_records,
    /// TIME-WAIT records whose 2·MSL ran out.
    tcp_time_wait_expired,
    /// TIME-WAIT records evicted, oldest first, because the table held
    /// `Limits::tcp_time_wait_max`.
    tcp_time_wait_evicted,
    /// Idle connections whose empty rings gave their storage back (`stack::tcp_idle`).
    tcp_idle_buffers_released,
    /// Ring storage those releases gave back, bytes.
    tcp_idle_buffer_bytes_released,
    /// TIME-WAIT records ended by a new SYN for their 4-tuple that a listener took (RFC 6191).
    tcp_time_wait_reopened,
    /// Connections reset under table pressure that had exchanged no payload, from a source
    /// holding more than its share of the table, idle past
    /// `overload::RECLAIM_OVER_SHARE_UNUSED_NS`.
    tcp_reclaimed_over_share,
    /// Connections reset under table pressure that were in the handshake or had exchanged no
    /// payload, idle past `Limits::tcp_reclaim_unused_ns`.
    tcp_reclaimed_unused,
    /// Connections reset under table pressure, idle past `Limits::tcp_reclaim_idle_ns`.
    tcp_reclaimed_idle,
    /// Connections reset in the high memory state because they sat at a zero send window
    /// with data queued and no progress for `overload::RECLAIM_STALLED_NS`, oldest stall
    /// first, so that the budget's refusal of new connections does not last.
    tcp_reclaimed_stalled,
    /// Connections aborted after sitting at a zero send window with data queued and no
    /// progress for `Limits::tcp_zero_window_max_ns`.
    tcp_zero_window_aborts,
    /// The TCP buffer memory went back to the normal state (`tcp_mem`).
    tcp_mem_normal_entered,
    /// The TCP buffer memory reached `Limits::tcp_mem_pressure_bytes` (`tcp_mem`).
    tcp_mem_pressure_entered,
    /// The TCP buffer memory reached `Limits::tcp_mem_high_bytes` (`tcp_mem`).
    tcp_mem_high_entered,
    /// Send buffers shrunk to what they held on entering memory pressure.
    tcp_mem_send_buffers_shrunk,
    /// Passive opens dropped and active opens refused in the high memory state.
    tcp_mem_refused_conn,
    /// Writes refused (would-block) in the high memory state.
    tcp_mem_refused_write,
    /// Segment to a listener that was not a bare SYN (ACK → RST; others dropped).
    tcp_listen_bad_segment,
    /// Connections established (both directions).
    tcp_connections_established,
    /// Connections removed from the table after reaching CLOSED.
    tcp_connections_closed,
    /// Connections handed over to another owner (`tcp_export`).
    tcp_connections_exported,
    /// Connections taken over from another owner (`tcp_import`).
    tcp_connections_imported,
    /// Segments for a moved-away connection (`tcp_export`'s marker) dropped before any
    /// processing, left to the peer's retransmission (no forward destination was set).
    tcp_drop_moved,
    /// Frames for a moved-away connection queued for the new owner (`poll_forward`).
    tcp_moved_forwarded,
    /// Frames for a moved-away connection dropped because the forward outbox was full.
    tcp_moved_forward_full,
    /// Moved markers that expired (neither imported back nor released in time).
    tcp_moved_expired,
    /// Connections no application handle names (waiting in a backlog, or closed by the
    /// application and finishing) handed to another owner (`tcp_export_unowned`).
    tcp_unowned_exported,
    /// Such connections taken over from another owner (`tcp_import_unowned`).
    tcp_unowned_imported,
    /// Forward markers set for connections another owner keeps (`tcp_forward_unowned`).
    tcp_forward_markers_set,
    /// ICMP "fragmentation needed" / "packet too big" errors about a segment in flight that
    /// lowered the connection's send MSS (path MTU discovery, RFC 1191 / RFC 8201).
    tcp_path_mtu_reductions,
    /// Such errors about a segment in flight that changed nothing (the MSS already fits, or the
    /// MTU named is below the floor the MSS already is at).
    tcp_path_mtu_ignored,
    /// ICMP errors naming a connection of ours whose quoted sequence number is outside
    /// SND.UNA..SND.NXT (RFC 5927 §4.1): dropped (Linux `OutOfWindowIcmps`).
    tcp_icmp_out_of_window,
    /// Path MTU reductions in SYN-SENT that also capped the MSS the connection's SYNs announce
    /// (`StackConfig::tcp_syn_mss_follows_path_mtu`).
    tcp_path_mtu_syn_mss_capped,
    /// Soft ICMP errors (net/host unreachable, time exceeded, RFC 1122 §4.2.3.9) recorded on
    /// a connection: reported instead of a time-out if the connection then times out.
    tcp_icmp_soft_errors,
    /// Connections still opening that an ICMP error ended (a hard error in SYN-SENT; with
    /// `StackConfig::tcp_icmp_errors_abort_opening`, any error in SYN-SENT or on a Fast Open
    /// child not yet accepted).
    tcp_icmp_opens_aborted,
    /// Children still in SYN-RECEIVED dropped by an ICMP error quoting their SYN-ACK
    /// (`StackConfig::tcp_icmp_errors_abort_opening`; Linux `tcp_req_err`).
    tcp_icmp_requests_dropped,
    /// Black holes packetization-layer PMTUD declared (`tcp::plpmtud`: repeated timeouts of
    /// full-size segments, no ICMP): each lowered a connection's send MSS.
    tcp_plpmtud_black_holes,
    /// Segment sizes PLPMTUD tried upward that passed, and that failed (a timeout first).
    tcp_plpmtud_tries_passed,
    tcp_plpmtud_tries_failed,
    /// Connections handed to an offload engine (`tcp_offload`), and brought back
    /// (`tcp_restore`).
    tcp_offloaded,
    tcp_restored,
    /// Frames for offloaded connections queued for the engine (`BypassOp::Forward`).
    tcp_bypass_forwarded,
    /// Frames for offloaded connections dropped because too many waited to be forwarded.
    tcp_bypass_forward_full,
    /// Offloaded connections lost with a failed engine (ended with a reset).
    tcp_bypass_lost,
    /// Restores refused because the snapshot did not fit what the host kept.
    tcp_bypass_restore_mismatch,
    // ---- transmit
    /// Frames handed out by `poll_transmit`.
    tx_frames,
    /// Recycled frame buffers freed by the pool's trim (more were kept than the last
    /// period's transmit path took).
    tx_pool_trimmed_frames,
    /// Frames dropped because the transmit queue was full.
    tx_drop_queue_full,
    /// Packets dropped because no route (no on-link prefix and no gateway) matched.
    tx_drop_no_route,
    /// Packets to one of our own addresses (there is no loopback interface).
    tx_drop_loopback,
    /// Packets dropped because they exceeded the MTU with DF set (or an IPv6 packet could not
    /// be fragmented).
    tx_drop_too_big,
    /// IPv4/IPv6 fragments sent by source fragmentation.
    tx_fragments,
    /// TCP frames handed out for the device to segment (TSO, `TxMeta::gso_size_bytes` set).
    tx_tso_frames,
    /// Wire segments those frames carry (what the device sends for them).
    tx_tso_segments,
    /// TCP frames handed out with a partial checksum for the device to complete.
    tx_csum_partial_frames,
    /// TCP segments sent in trains (`tcp_train.rs`): runs of full segments of new data whose
    /// connection was asked and advanced once per run (the frames are the per-segment path's).
    tx_train_segments,
}

impl Counters {
    /// Counts what one packetization-layer PMTUD call changed.
    pub(crate) fn count_plpmtud(&mut self, e: Option<tcp::plpmtud::PlpmtudEvent>) {
        use tcp::plpmtud::PlpmtudEvent;
        match e {
            Some(PlpmtudEvent::BlackHole) => self.tcp_plpmtud_black_holes += 1,
            Some(PlpmtudEvent::Passed) => self.tcp_plpmtud_tries_passed += 1,
            Some(PlpmtudEvent::Failed) => self.tcp_plpmtud_tries_failed += 1,
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_lists_every_counter_with_its_value() {
        let c = Counters {
            rx_drop_reasm_overlap: 7,
            ..Counters::default()
        };
        let named = c.named();
        assert!(named.contains(&("rx_drop_reasm_overlap", 7)));
        assert!(named.contains(&("udp_rx_no_socket", 0)));
        let mut names: Vec<_> = named.iter().map(|(n, _)| *n).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), named.len());
    }
}
