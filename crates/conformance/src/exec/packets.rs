//! The executor's packet side: draining what the stack sent (answering its ARP requests and
//! IPv6 neighbour solicitations as the remote host), matching outbound script lines against
//! the collected segments, and injecting inbound lines.

use super::*;

impl Exec {
    /// Collects the stack's output: answers ARP, queues TCP segments for matching.
    pub(super) fn drain(&mut self) -> Result<(), Stop> {
        while let Some(ev) = self.stack.poll_event() {
            // An edge on a socket makes its epoll registrations ready (Linux's wake-up callback
            // puts the item on the ready list).
            for ep in self.epolls.values_mut() {
                for item in &mut ep.items {
                    let handle = self.fds.get(&item.fd).and_then(|f| match f.kind {
                        FdKind::Listener(h) | FdKind::Conn(h) => Some(h),
                        FdKind::Fresh => None,
                    });
                    if handle == Some(ev.handle) {
                        item.ready = true;
                    }
                }
            }
        }
        while let Some(frame) = self.stack.poll_transmit(self.now_ns) {
            let Ok(eth) = EthernetFrame::new_checked(&frame[..]) else {
                continue;
            };
            let Ok(repr) = EthernetRepr::parse(&eth) else {
                continue;
            };
            match repr.ethertype {
                EtherType::ARP => self.answer_arp(eth.payload()),
                EtherType::IPV4 => {
                    let Ok(ip) = Ipv4Packet::new_checked(eth.payload()) else {
                        continue;
                    };
                    if ip.protocol() == IpProtocol::TCP
                        && IpAddr::V4(ip.dst_addr()) == self.addrs.remote()
                    {
                        let tos = (ip.dscp() << 2) | ip.ecn();
                        self.out
                            .push_back((self.now_ns, tos, ip.payload().to_vec()));
                    }
                }
                EtherType::IPV6 => {
                    let Ok(ip) = Ipv6Packet::new_checked(eth.payload()) else {
                        continue;
                    };
                    if ip.next_header() == IpProtocol::TCP
                        && IpAddr::V6(ip.dst_addr()) == self.addrs.remote()
                    {
                        let tos = ip.traffic_class();
                        self.out
                            .push_back((self.now_ns, tos, ip.payload().to_vec()));
                    } else if ip.next_header() == IpProtocol::ICMPV6 {
                        self.answer_neighbor_solicit(&ip);
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Answers a neighbour solicitation for any target with the remote side's MAC (the IPv6
    /// counterpart of [`Exec::answer_arp`]).
    pub(super) fn answer_neighbor_solicit(&mut self, ip: &Ipv6Packet<&[u8]>) {
        let Ok(icmp) = Icmpv6Packet::new_checked(ip.payload()) else {
            return;
        };
        let Ok(Icmpv6Repr::NeighborSolicit { target_addr, .. }) =
            Icmpv6Repr::parse(&icmp, ip.src_addr(), ip.dst_addr(), ChecksumCaps::ALL)
        else {
            return;
        };
        let na = Icmpv6Repr::NeighborAdvert {
            router: true,
            solicited: true,
            override_: true,
            target_addr,
            target_lladdr: Some(REMOTE_MAC),
        };
        let (src, dst) = (target_addr, ip.src_addr());
        let ip6 = Ipv6Repr {
            src_addr: src,
            dst_addr: dst,
            next_header: IpProtocol::ICMPV6,
            payload_len: na.buffer_len(),
            hop_limit: 255,
            traffic_class: 0,
            flow_label: 0,
            ext_headers: [None; wire::MAX_EXT_HEADERS],
        };
        let eth = EthernetRepr {
            src_addr: REMOTE_MAC,
            dst_addr: LOCAL_MAC,
            vlan: None,
            ethertype: EtherType::IPV6,
        };
        let mut buf = vec![0u8; eth.header_len() + ip6.buffer_len()];
        let mut frame = EthernetFrame::new_unchecked(&mut buf[..]);
        if eth.emit(&mut frame).is_err() {
            return;
        }
        let mut pkt = Ipv6Packet::new_unchecked(frame.payload_mut());
        if ip6.emit(&mut pkt).is_err() {
            return;
        }
        let hdr = ip6.header_len();
        let Some(body) = frame.payload_mut().get_mut(hdr..) else {
            return;
        };
        if na
            .emit(
                &mut Icmpv6Packet::new_unchecked(body),
                src,
                dst,
                ChecksumCaps::ALL,
            )
            .is_err()
        {
            return;
        }
        self.stack.receive(self.now_ns, &buf, &RxMeta::NONE);
    }

    pub(super) fn answer_arp(&mut self, payload: &[u8]) {
        let Ok(pkt) = ArpPacket::new_checked(payload) else {
            return;
        };
        let Ok(req) = ArpRepr::parse(&pkt) else {
            return;
        };
        if req.operation != ArpOperation::REQUEST {
            return;
        }
        let reply = ArpRepr {
            operation: ArpOperation::REPLY,
            source_hardware_addr: REMOTE_MAC,
            source_protocol_addr: req.target_protocol_addr,
            target_hardware_addr: req.source_hardware_addr,
            target_protocol_addr: req.source_protocol_addr,
        };
        let eth = EthernetRepr {
            src_addr: REMOTE_MAC,
            dst_addr: LOCAL_MAC,
            vlan: None,
            ethertype: EtherType::ARP,
        };
        let mut buf = vec![0u8; eth.header_len() + reply.buffer_len()];
        let mut frame = EthernetFrame::new_unchecked(&mut buf[..]);
        if eth.emit(&mut frame).is_err()
            || reply
                .emit(&mut ArpPacket::new_unchecked(frame.payload_mut()))
                .is_err()
        {
            return;
        }
        self.stack.receive(self.now_ns, &buf, &RxMeta::NONE);
    }

    pub(super) fn parse_segment<'a>(
        seg: &'a [u8],
        addrs: Addrs,
    ) -> Result<TcpRepr<'a>, wire::Error> {
        let pkt = TcpPacket::new_checked(seg)?;
        TcpRepr::parse(&pkt, &addrs.pair_out(), ChecksumCaps::ALL)
    }

    /// An actual segment in script notation (script-relative numbers when known).
    pub(super) fn describe(&self, seg: &[u8]) -> String {
        match Self::parse_segment(seg, self.addrs) {
            Ok(r) => describe_repr(&r, &self.ctx),
            Err(e) => format!("unparseable segment ({e})"),
        }
    }

    pub(super) fn outbound(
        &mut self,
        event: &Event,
        line: &TcpLine,
        window: Option<Window>,
    ) -> Result<(), Stop> {
        let tol = self.tolerance_usecs;
        let limit_usecs = match window {
            Some(w) => w.end_usecs.saturating_add(tol),
            None => usecs(self.now_ns).saturating_add(ANY_TIME_WAIT_USECS),
        };
        let mut acc = SuperSegment::new(line);
        if !self.check_psh {
            acc = acc.ignore_psh();
        }
        // Pieces of a super-segment are cut as TSO would: all but the last of one size (the
        // first piece's, i.e. the connection's MSS), the last no bigger.
        let mut piece_bytes: Option<usize> = None;
        loop {
            self.run_until(ns(limit_usecs).max(self.now_ns), true)?;
            let Some((sent_ns, tos, seg)) = self.out.pop_front() else {
                let what = if acc.covered_bytes() > 0 {
                    format!(
                        "the rest of it after {} bytes was not sent",
                        acc.covered_bytes()
                    )
                } else {
                    "nothing was sent".to_string()
                };
                // Say what the stack sent instead, and when (up to 3 s later).
                self.pending = None;
                let _ = self.run_until(ns(limit_usecs.saturating_add(3_000_000)), true);
                let what = match self.out.front() {
                    Some((at, _, seg)) => format!(
                        "{what} (next: `{}` at {} s)",
                        self.describe(seg),
                        Secs(usecs(*at))
                    ),
                    None => what,
                };
                return fail(
                    event.pos,
                    format!(
                        "expected `{line}` by {} s, {what}",
                        Secs(limit_usecs.saturating_sub(tol))
                    ),
                );
            };
            let repr = match Self::parse_segment(&seg, self.addrs) {
                Ok(r) => r,
                Err(e) => {
                    return fail(
                        event.pos,
                        format!("expected `{line}`, got an unparseable segment ({e})"),
                    );
                }
            };
            // packetdrill matches outbound packets against the socket under test alone and
            // passes over the others (`find_socket_for_live_packet`): a FIN or retransmission
            // of a connection the script left behind. Until a new active open's port is
            // known, only its SYN starts it (`find_connect_for_live_packet`).
            let belongs = match self.local_port {
                Some(p) => repr.src_port == p,
                None => {
                    repr.flags.contains(wire::tcp::TcpFlags::SYN)
                        && !repr.flags.contains(wire::tcp::TcpFlags::ACK)
                }
            };
            if !belongs {
                self.other_socket_segments += 1;
                continue;
            }
            if self.local_port.is_none() {
                self.local_port = Some(repr.src_port);
            }
            // `[ect0]`, `[noecn]`, `[ect01]`, `(tos 0x..)`: the IP header's traffic class.
            if let Some(spec) = line.ip.and_then(|i| i.tos)
                && !spec.matches(tos)
            {
                return fail(
                    event.pos,
                    format!(
                        "expected `{line}`, got `{}` with IP TOS/traffic class 0x{tos:02x} \
                         (ECN field {:02b})",
                        describe_repr(&repr, &self.ctx),
                        tos & 0x03
                    ),
                );
            }
            let sent_usecs = usecs(sent_ns);
            if let Err(e) = self.cursor.check(&event.time, sent_usecs, tol) {
                return fail(
                    event.pos,
                    format!(
                        "timing: `{line}`: {e}; got `{}`",
                        describe_repr(&repr, &self.ctx)
                    ),
                );
            }
            let got_bytes = repr.payload.len();
            if let Some(mss) = piece_bytes
                && got_bytes > mss
            {
                return fail(
                    event.pos,
                    format!(
                        "expected `{line}`: piece `{}` is longer than the {mss}-byte pieces before it",
                        describe_repr(&repr, &self.ctx)
                    ),
                );
            }
            let before = self.ctx.clone();
            let progress = acc.push(&mut self.ctx, &repr);
            if progress.is_ok() {
                // Option order and padding (what a `TcpRepr` does not keep), byte for byte.
                if let TcpOptionsSpec::List(list) = &line.options
                    && let Ok(pkt) = TcpPacket::new_checked(&seg[..])
                    && let Err(e) = check_option_layout(list, pkt.options())
                {
                    return fail(
                        event.pos,
                        format!(
                            "expected `{line}`, got `{}` with options {} on the wire: option \
                             layout: {e}",
                            describe_repr(&repr, &self.ctx),
                            crate::matcher::raw_options_text(pkt.options(), &self.ctx.seq)
                        ),
                    );
                }
            }
            match progress {
                Ok(Progress::Complete) => {
                    self.cursor.advance(&event.time, sent_usecs);
                    return Ok(());
                }
                Ok(Progress::Partial { .. }) if self.strict_segments => {
                    return fail(
                        event.pos,
                        format!(
                            "expected `{line}` as one segment (--strict_segments), got `{}`",
                            describe_repr(&repr, &before)
                        ),
                    );
                }
                Ok(Progress::Partial { .. }) => match piece_bytes {
                    Some(mss) if got_bytes != mss => {
                        return fail(
                            event.pos,
                            format!(
                                "expected `{line}`: piece `{}` is not {mss} bytes like the \
                                 pieces before it",
                                describe_repr(&repr, &before)
                            ),
                        );
                    }
                    _ => piece_bytes = Some(got_bytes),
                },
                Err(e) => {
                    // Describe with the context as it was before the attempt.
                    let ctx = if before.seq.stack_base.is_some() {
                        &before
                    } else {
                        &self.ctx
                    };
                    let got = describe_repr(&repr, ctx);
                    return fail(event.pos, format!("expected `{line}`, got `{got}`: {e}"));
                }
            }
        }
    }

    pub(super) fn inbound(&mut self, pos: Pos, line: &TcpLine) -> Result<(), Stop> {
        let Some(dst_port) = self.local_port else {
            return fail(
                pos,
                "inbound packet before the stack's port is known (no bind or connect)",
            );
        };
        if line.seq.len_bytes > INBOUND_PAYLOAD_BYTES_MAX {
            return fail(
                pos,
                format!(
                    "inbound payload of {} bytes does not fit one IPv4 packet",
                    line.seq.len_bytes
                ),
            );
        }
        if line.flags.contains(wire::tcp::TcpFlags::SYN)
            && !line.flags.contains(wire::tcp::TcpFlags::ACK)
            && core::mem::take(&mut self.listened_since_passive_syn)
        {
            // A SYN to a listener that is the socket under test opens a new passive
            // connection: packetdrill gives it the next ephemeral port and new sequence and
            // timestamp mappings (`handle_listen_for_script_packet`); the first keeps
            // `REMOTE_PORT`.
            if self.passive_conns > 0 {
                let mut ctx = MatchContext::new(PEER_ISN);
                ctx.tolerance_usecs = self.ctx.tolerance_usecs;
                ctx.ts_tick_usecs = self.ctx.ts_tick_usecs;
                ctx.ts_ecr_scaled = self.ctx.ts_ecr_scaled;
                self.ctx = ctx;
                self.remote_port = REMOTE_PORT.wrapping_add(self.passive_conns);
            }
            self.passive_conns = self.passive_conns.saturating_add(1);
        }
        let payload = vec![0u8; line.seq.len_bytes as usize];
        let (without_raw, raw_options) = split_raw_fast_open(line);
        let repr = self
            .ctx
            .build_inbound(
                without_raw.as_ref().unwrap_or(line),
                self.remote_port,
                dst_port,
                &payload,
            )
            .map_err(|e| Stop::Fail(pos, format!("cannot build `{line}`: {e}")))?;
        if line.flags.contains(wire::tcp::TcpFlags::SYN) {
            self.ctx.seq.learn_peer_isn(line.seq.start);
        }
        // `[ect0]`, `[ce]`, `(tos 0x..)`: the traffic class the frame carries (`[ect01]`
        // inbound is refused as unmodelled before this).
        let tos = line
            .ip
            .and_then(|i| i.tos)
            .and_then(|t| t.inbound_byte())
            .unwrap_or(0);
        let mut frame = build_frame(&repr, self.addrs, tos)
            .map_err(|e| Stop::Fail(pos, format!("cannot emit `{line}`: {e}")))?;
        if !raw_options.is_empty() {
            splice_tcp_options(&mut frame, &raw_options, self.addrs)
                .map_err(|e| Stop::Fail(pos, format!("cannot emit `{line}`: {e}")))?;
        }
        let mut meta = RxMeta::NONE;
        if let Some(mss) = self.inbound_gro_mss
            && line.seq.len_bytes > u32::from(mss)
        {
            meta.coalesced_segments =
                u16::try_from(line.seq.len_bytes.div_ceil(u32::from(mss))).unwrap_or(u16::MAX);
            meta.gro_mss_bytes = mss;
        }
        self.stack.receive(self.now_ns, &frame, &meta);
        self.drain()?;
        self.retry_pending()
    }

    // ----------------------------------------------------------------- system calls
}

/// An Ethernet/IP frame from the remote side carrying `repr`, with `tos` as its IPv4 TOS
/// byte or IPv6 traffic class (DSCP and ECN field).
pub(super) fn build_frame(
    repr: &TcpRepr<'_>,
    addrs: Addrs,
    tos: u8,
) -> Result<Vec<u8>, wire::Error> {
    let tcp_len = repr.buffer_len();
    let (ethertype, ip_header) = match addrs {
        Addrs::V4 { local, remote, .. } => {
            let ip = Ipv4Repr {
                src_addr: remote,
                dst_addr: local,
                protocol: IpProtocol::TCP,
                payload_len: tcp_len,
                hop_limit: 64,
                dscp: tos >> 2,
                ecn: tos & 0x03,
                ident: 0,
                dont_frag: true,
                more_frags: false,
                frag_offset_bytes: 0,
            };
            let mut whole = vec![0u8; ip.buffer_len()];
            ip.emit(
                &mut Ipv4Packet::new_unchecked(&mut whole[..]),
                ChecksumCaps::ALL,
            )?;
            whole.truncate(ip.buffer_len() - tcp_len);
            (EtherType::IPV4, whole)
        }
        Addrs::V6 { local, remote, .. } => {
            let ip = Ipv6Repr {
                src_addr: remote,
                dst_addr: local,
                next_header: IpProtocol::TCP,
                payload_len: tcp_len,
                hop_limit: 64,
                traffic_class: tos,
                flow_label: 0,
                ext_headers: [None; wire::MAX_EXT_HEADERS],
            };
            let mut whole = vec![0u8; ip.buffer_len()];
            ip.emit(&mut Ipv6Packet::new_unchecked(&mut whole[..]))?;
            whole.truncate(ip.header_len());
            (EtherType::IPV6, whole)
        }
    };
    let eth = EthernetRepr {
        src_addr: REMOTE_MAC,
        dst_addr: LOCAL_MAC,
        vlan: None,
        ethertype,
    };
    let mut buf = vec![0u8; eth.header_len() + ip_header.len() + tcp_len];
    let mut frame = EthernetFrame::new_unchecked(&mut buf[..]);
    eth.emit(&mut frame)?;
    let payload = frame.payload_mut();
    let (head, tcp) = payload.split_at_mut(ip_header.len());
    head.copy_from_slice(&ip_header);
    repr.emit(
        &mut TcpPacket::new_unchecked(tcp),
        &addrs.pair_in(),
        ChecksumCaps::ALL,
    )?;
    Ok(buf)
}

/// The Fast Open options of an inbound line whose cookie length RFC 7413 does not allow
/// (odd, 2, or above 16 bytes: `FO 1122`, `FO 112233`), which `TcpRepr` cannot carry: the
/// line without them, and their bytes as packetdrill writes them (kind 34, or kind 254 with
/// the magic 0xF989, then the cookie), to be spliced into the built frame
/// ([`splice_tcp_options`]). A peer sending such an option tests the receiver's parser.
pub(super) fn split_raw_fast_open(line: &TcpLine) -> (Option<TcpLine>, Vec<u8>) {
    let TcpOptionsSpec::List(list) = &line.options else {
        return (None, Vec::new());
    };
    let mut raw = Vec::new();
    let mut kept = Vec::with_capacity(list.len());
    for o in list {
        match o {
            TcpOption::FastOpen(c) | TcpOption::FastOpenExp(c)
                if wire::tcp::FastOpenOption::with_cookie(c, false).is_none() =>
            {
                if matches!(o, TcpOption::FastOpenExp(_)) {
                    raw.extend_from_slice(&[254, (4 + c.len()).min(255) as u8, 0xF9, 0x89]);
                } else {
                    raw.extend_from_slice(&[34, (2 + c.len()).min(255) as u8]);
                }
                raw.extend_from_slice(c);
            }
            _ => kept.push(o.clone()),
        }
    }
    if raw.is_empty() {
        return (None, raw);
    }
    let mut line = line.clone();
    line.options = TcpOptionsSpec::List(kept);
    (Some(line), raw)
}

/// Inserts `raw` option bytes right after the fixed TCP header of `frame` (an Ethernet frame
/// built by [`build_frame`]), preceded by NOPs to keep the header a multiple of 4 bytes, and
/// fixes the data offset, the IP length fields and both checksums. Errors when the options
/// would exceed the 40 bytes a TCP header holds.
pub(super) fn splice_tcp_options(
    frame: &mut Vec<u8>,
    raw: &[u8],
    addrs: Addrs,
) -> Result<(), String> {
    const ETH_BYTES: usize = 14;
    let (ip_header_bytes, v4) = match addrs {
        Addrs::V4 { .. } => {
            let ip = Ipv4Packet::new_checked(&frame[ETH_BYTES..]).map_err(|e| e.to_string())?;
            (ip.header_len(), true)
        }
        Addrs::V6 { .. } => (40, false),
    };
    let tcp_at = ETH_BYTES + ip_header_bytes;
    let header_bytes = TcpPacket::new_checked(&frame[tcp_at..])
        .map_err(|e| e.to_string())?
        .header_len();
    let added = raw.len().next_multiple_of(4);
    if header_bytes + added > 60 {
        return Err(format!(
            "TCP options of {} bytes exceed the header's 40",
            header_bytes - 20 + added
        ));
    }
    let mut insert = vec![1u8; added - raw.len()];
    insert.extend_from_slice(raw);
    let at = tcp_at + 20;
    frame.splice(at..at, insert);
    let tcp_len = frame.len() - tcp_at;
    if v4 {
        let mut ip = Ipv4Packet::new_unchecked(&mut frame[ETH_BYTES..]);
        ip.set_total_len(u16::try_from(ip_header_bytes + tcp_len).map_err(|e| e.to_string())?);
        ip.fill_checksum();
    } else {
        let mut ip = Ipv6Packet::new_unchecked(&mut frame[ETH_BYTES..]);
        ip.set_payload_len(u16::try_from(tcp_len).map_err(|e| e.to_string())?);
    }
    let mut tcp = TcpPacket::new_unchecked(&mut frame[tcp_at..]);
    tcp.set_header_len(header_bytes + added);
    tcp.fill_checksum(&addrs.pair_in());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse_event;

    fn line(src: &str) -> TcpLine {
        match parse_event(&format!("+0 {src}")).expect("parses").action {
            Action::Tcp(t) => t,
            other => panic!("not TCP: {other:?}"),
        }
    }

    #[test]
    fn fast_open_option_with_a_cookie_rfc_7413_refuses_is_spliced_in_as_raw_bytes() {
        // `fastopen/client/valid-cookie-format`: a SYN-ACK whose FO cookie is 2 bytes long.
        let l = line("< S. 0:0(0) ack 1 win 5840 <mss 940,nop,nop,sackOK,nop,wscale 6,FO 1122>");
        let (kept, raw) = split_raw_fast_open(&l);
        assert_eq!(raw, [34, 4, 0x11, 0x22]);
        let kept = kept.expect("the line without its FO option");
        let mut ctx = MatchContext::new(SeqNumber(5000));
        ctx.seq.learn_stack_isn(0, SeqNumber(7000));
        let repr = ctx.build_inbound(&kept, 1, 2, &[]).expect("builds");
        let addrs = Addrs::DEFAULT;
        let mut frame = build_frame(&repr, addrs, 0).expect("emits");
        let before = frame.len();
        splice_tcp_options(&mut frame, &raw, addrs).expect("fits");
        assert_eq!(frame.len(), before + 4);
        let ip = Ipv4Packet::new_checked(&frame[14..]).expect("IPv4");
        assert!(ip.verify_checksum(), "IPv4 header checksum");
        let tcp = TcpPacket::new_checked(ip.payload()).expect("TCP");
        assert!(tcp.verify_checksum(&addrs.pair_in()), "TCP checksum");
        assert_eq!(&tcp.options()[..4], &[34, 4, 0x11, 0x22]);
        // The rest of the header still parses: the options the Repr carried are intact, and
        // the FO option of a refused length is not taken for a cookie.
        let got = TcpRepr::parse(&tcp, &addrs.pair_in(), ChecksumCaps::ALL).expect("parses");
        assert_eq!(got.max_seg_size, Some(940));
        assert_eq!(got.window_scale, Some(6));
        assert!(got.sack_permitted);
        assert_eq!(got.fast_open, None);
        // A line whose options all fit is left alone.
        let (kept, raw) = split_raw_fast_open(&line("< S. 0:0(0) ack 1 win 5840 <FO abcd1234>"));
        assert!(kept.is_none() && raw.is_empty());
    }

    #[test]
    fn raw_options_beyond_the_tcp_header_s_40_bytes_are_refused() {
        // 20 bytes of options already; a 22-byte option (24 with its padding) does not fit.
        let l = line("< S 0:0(0) win 5840 <mss 940,sackOK,TS val 1 ecr 0,nop,wscale 6>");
        let repr = MatchContext::new(SeqNumber(5000))
            .build_inbound(&l, 1, 2, &[])
            .expect("builds");
        let mut frame = build_frame(&repr, Addrs::DEFAULT, 0).expect("emits");
        let mut raw = vec![34u8, 22];
        raw.extend_from_slice(&[0; 20]);
        assert!(splice_tcp_options(&mut frame, &raw, Addrs::DEFAULT).is_err());
    }
}
