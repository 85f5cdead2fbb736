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
                        self.out.push_back((self.now_ns, ip.payload().to_vec()));
                    }
                }
                EtherType::IPV6 => {
                    let Ok(ip) = Ipv6Packet::new_checked(eth.payload()) else {
                        continue;
                    };
                    if ip.next_header() == IpProtocol::TCP
                        && IpAddr::V6(ip.dst_addr()) == self.addrs.remote()
                    {
                        self.out.push_back((self.now_ns, ip.payload().to_vec()));
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
            let Some((sent_ns, seg)) = self.out.pop_front() else {
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
                    Some((at, seg)) => format!(
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
                self.ctx = ctx;
                self.remote_port = REMOTE_PORT.wrapping_add(self.passive_conns);
            }
            self.passive_conns = self.passive_conns.saturating_add(1);
        }
        let payload = vec![0u8; line.seq.len_bytes as usize];
        let repr = self
            .ctx
            .build_inbound(line, self.remote_port, dst_port, &payload)
            .map_err(|e| Stop::Fail(pos, format!("cannot build `{line}`: {e}")))?;
        if line.flags.contains(wire::tcp::TcpFlags::SYN) {
            self.ctx.seq.learn_peer_isn(line.seq.start);
        }
        let frame = build_frame(&repr, self.addrs)
            .map_err(|e| Stop::Fail(pos, format!("cannot emit `{line}`: {e}")))?;
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

/// An Ethernet/IP frame from the remote side carrying `repr`.
pub(super) fn build_frame(repr: &TcpRepr<'_>, addrs: Addrs) -> Result<Vec<u8>, wire::Error> {
    let tcp_len = repr.buffer_len();
    let (ethertype, ip_header) = match addrs {
        Addrs::V4 { local, remote, .. } => {
            let ip = Ipv4Repr {
                src_addr: remote,
                dst_addr: local,
                protocol: IpProtocol::TCP,
                payload_len: tcp_len,
                hop_limit: 64,
                dscp: 0,
                ecn: 0,
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
                traffic_class: 0,
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
