//! Packet lines (packetdrill's `packet_spec`): direction, IP-level annotations, ports,
//! flags, sequence ranges, `ack`/`win`/`urg` and the TCP options, on the same [`Parser`].

use super::*;

impl<'s> Parser<'s> {
    /// A packet line; an unsupported one is captured verbatim up to the end of its line.
    pub(super) fn packet(&mut self) -> Result<Action, ParseError> {
        let start = *self;
        let mut p = *self;
        match p.packet_inner() {
            Ok(a) => {
                *self = p;
                Ok(a)
            }
            Err(Fail::Error(e)) => Err(e),
            Err(Fail::Unsupported) => {
                *self = start;
                Ok(Action::Unsupported(self.rest_of_line()))
            }
        }
    }

    /// The text up to the end of the line, without a trailing `//` comment or whitespace.
    pub(super) fn rest_of_line(&mut self) -> String {
        let begin = self.pos;
        let mut end = self.pos;
        while let Some(c) = self.peek() {
            if c == b'\n' {
                break;
            }
            if c == b'/' && self.peek_at(1) == Some(b'/') {
                while let Some(c) = self.peek() {
                    if c == b'\n' {
                        break;
                    }
                    self.bump();
                }
                break;
            }
            self.bump();
            if !c.is_ascii_whitespace() {
                end = self.pos;
            }
        }
        self.src.get(begin..end).unwrap_or("").to_string()
    }

    pub(super) fn packet_inner(&mut self) -> Result<Action, Fail> {
        let direction = if self.eat("<") {
            Direction::Inbound
        } else {
            self.expect(">")?;
            Direction::Outbound
        };
        self.skip_inline_ws();
        let ip = self.ip_info()?;
        self.skip_inline_ws();
        match self.peek_ident() {
            Some("udp") => {
                self.bump_n(3);
                self.skip_inline_ws();
                let ports = self.port_info()?;
                self.skip_inline_ws();
                self.expect("(")?;
                let len_bytes = self.u32()?;
                self.expect(")")?;
                return Ok(Action::Udp(UdpLine {
                    direction,
                    ip,
                    ports,
                    len_bytes,
                }));
            }
            Some("icmp") => {
                self.bump_n(4);
                self.skip_inline_ws();
                let text = self.rest_of_line();
                let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
                return Ok(Action::Icmp(IcmpLine {
                    direction,
                    ip,
                    text,
                }));
            }
            _ => {}
        }
        let ports = self.port_info()?;
        self.skip_inline_ws();
        let flags = self.flags()?;
        self.skip_inline_ws();
        let seq = self.seq_range()?;
        self.skip_trivia()?;
        let ack = self.keyword_value("ack", Self::u32)?;
        let win = self.keyword_value("win", Self::u16)?;
        let urg = self.keyword_value("urg", Self::u16)?;
        let options = if self.peek() == Some(b'<') {
            self.tcp_options()?
        } else {
            TcpOptionsSpec::Absent
        };
        Ok(Action::Tcp(TcpLine {
            direction,
            ip,
            ports,
            flags,
            seq,
            ack,
            win,
            urg,
            options,
        }))
    }

    /// `keyword value` (trivia skipped after each) when the next word is `keyword`; `None`,
    /// consuming nothing, otherwise.
    pub(super) fn keyword_value<T, E>(
        &mut self,
        keyword: &str,
        value: fn(&mut Self) -> Result<T, E>,
    ) -> Result<Option<T>, Fail>
    where
        Fail: From<E>,
    {
        if !self.peek_keyword(keyword) {
            return Ok(None);
        }
        self.bump_n(keyword.len());
        self.skip_trivia()?;
        let v = value(self)?;
        self.skip_trivia()?;
        Ok(Some(v))
    }

    /// packetdrill's `opt_ip_info`: `[tos_spec]`, `[flowlabel 0x..]`, `[ttl N]`,
    /// `[tos_spec, flowlabel 0x..]`, in brackets or parentheses; `None` when absent.
    pub(super) fn ip_info(&mut self) -> Result<Option<IpInfo>, Fail> {
        let close = match self.peek() {
            Some(b'[') => "]",
            Some(b'(') => ")",
            _ => return Ok(None),
        };
        let at = *self;
        self.bump();
        self.skip_inline_ws();
        let mut info = IpInfo {
            tos: None,
            flow_label: None,
            ttl: None,
        };
        let word = self.peek_ident();
        let tos = match word {
            Some("noecn") => Some(TosSpec::NoEcn),
            Some("ect0") => Some(TosSpec::Ect0),
            Some("ect1") => Some(TosSpec::Ect1),
            Some("ce") => Some(TosSpec::Ce),
            Some("ect01") => Some(TosSpec::Ect01),
            _ => None,
        };
        if let (Some(t), Some(w)) = (tos, word) {
            self.bump_n(w.len());
            info.tos = Some(t);
        } else if word == Some("tos") {
            self.bump_n(3);
            self.skip_inline_ws();
            info.tos = Some(TosSpec::Tos(self.u8()?));
        } else if word == Some("ttl") {
            self.bump_n(3);
            self.skip_inline_ws();
            info.ttl = Some(self.u8()?);
        } else if word != Some("flowlabel") {
            return Err(Fail::Error(at.error(ParseErrorKind::Expected(
                "ECN codepoint, tos, flowlabel or ttl",
            ))));
        }
        self.skip_inline_ws();
        if info.tos.is_some() && self.eat(",") {
            self.skip_inline_ws();
            if self.peek_keyword("flowlabel") {
                self.bump_n(9);
            } else {
                return Err(Fail::Error(
                    self.error(ParseErrorKind::Expected("flowlabel")),
                ));
            }
            info.flow_label = Some(self.flow_label()?);
        } else if info.tos.is_none() && info.ttl.is_none() {
            self.bump_n(9);
            info.flow_label = Some(self.flow_label()?);
        }
        self.skip_inline_ws();
        self.expect(close)?;
        Ok(Some(info))
    }

    /// The 20-bit value after `flowlabel`.
    pub(super) fn flow_label(&mut self) -> Result<u32, ParseError> {
        self.skip_inline_ws();
        let at = *self;
        let v = self.u32()?;
        if v >= 1 << 20 {
            return Err(at.error(ParseErrorKind::NumberTooLarge));
        }
        Ok(v)
    }

    /// packetdrill's `opt_port_info`: `SRC>DST` before the flags (or a UDP line's length).
    pub(super) fn port_info(&mut self) -> Result<Option<(u16, u16)>, Fail> {
        let mut p = *self;
        if !p.peek().is_some_and(|c| c.is_ascii_digit()) {
            return Ok(None);
        }
        let Ok(src) = p.u16() else {
            return Ok(None);
        };
        p.skip_inline_ws();
        if !p.eat(">") {
            return Ok(None);
        }
        p.skip_inline_ws();
        let dst = p.u16()?;
        *self = p;
        Ok(Some((src, dst)))
    }

    /// True at the end of the input, at whitespace, or where a `//` or `/*` comment starts.
    pub(super) fn at_word_end(&self) -> bool {
        match self.peek() {
            None => true,
            Some(c) if c.is_ascii_whitespace() => true,
            Some(b'/') => matches!(self.peek_at(1), Some(b'/' | b'*')),
            Some(_) => false,
        }
    }

    pub(super) fn peek_keyword(&self, kw: &str) -> bool {
        self.peek_ident() == Some(kw)
    }

    pub(super) fn flags(&mut self) -> Result<TcpFlags, Fail> {
        let at = *self;
        if self.peek() == Some(b'-') {
            self.bump();
            if !self.at_word_end() {
                return Err(Fail::Error(at.error(ParseErrorKind::BadFlags)));
            }
            return Ok(TcpFlags::NONE);
        }
        let mut flags = TcpFlags::NONE;
        let mut n = 0;
        while let Some(c) = self.peek() {
            let f = match c {
                b'F' => TcpFlags::FIN,
                b'S' => TcpFlags::SYN,
                b'R' => TcpFlags::RST,
                b'P' => TcpFlags::PSH,
                b'.' => TcpFlags::ACK,
                b'U' => TcpFlags::URG,
                b'E' => TcpFlags::ECE,
                b'W' => TcpFlags::CWR,
                _ => break,
            };
            if flags.intersects(f) {
                return Err(Fail::Error(at.error(ParseErrorKind::BadFlags)));
            }
            flags |= f;
            n += 1;
            self.bump();
        }
        // Flags must be a whole word: `S.` is flags, `Sx` or `[ect0]` is something else. A
        // comment ends the word as whitespace does: `F// note` is the flags `F` (the line is
        // then incomplete, an error), never an unsupported line, whose kept text drops the
        // comment and would read differently when parsed again.
        if n == 0 || !self.at_word_end() {
            return Err(Fail::Unsupported);
        }
        Ok(flags)
    }

    pub(super) fn seq_range(&mut self) -> Result<SeqRange, ParseError> {
        let at = *self;
        let start = self.u32()?;
        self.expect(":")?;
        let end = self.u32()?;
        self.expect("(")?;
        let len_bytes = self.u32()?;
        self.expect(")")?;
        if start.wrapping_add(len_bytes) != end {
            return Err(at.error(ParseErrorKind::InconsistentSeqRange));
        }
        Ok(SeqRange {
            start,
            end,
            len_bytes,
        })
    }

    pub(super) fn tcp_options(&mut self) -> Result<TcpOptionsSpec, Fail> {
        self.expect("<")?;
        self.skip_inline_ws();
        if self.eat("...") {
            self.skip_inline_ws();
            self.expect(">")?;
            return Ok(TcpOptionsSpec::Any);
        }
        let mut list = Vec::new();
        self.skip_inline_ws();
        if self.eat(">") {
            return Ok(TcpOptionsSpec::List(list));
        }
        loop {
            self.skip_inline_ws();
            list.push(self.tcp_option()?);
            self.skip_inline_ws();
            if self.eat(">") {
                return Ok(TcpOptionsSpec::List(list));
            }
            self.expect(",")?;
        }
    }

    pub(super) fn tcp_option(&mut self) -> Result<TcpOption, Fail> {
        let name = match self.peek_ident() {
            Some(n) => n,
            None => {
                return Err(Fail::Error(
                    self.error(ParseErrorKind::Expected("TCP option")),
                ));
            }
        };
        let opt = match name {
            "nop" => {
                self.bump_n(3);
                TcpOption::Nop
            }
            "eol" => {
                self.bump_n(3);
                TcpOption::Eol
            }
            "mss" => {
                self.bump_n(3);
                self.skip_inline_ws();
                TcpOption::Mss(self.u16()?)
            }
            "wscale" => {
                self.bump_n(6);
                self.skip_inline_ws();
                TcpOption::WindowScale(self.u8()?)
            }
            "sackOK" => {
                self.bump_n(6);
                TcpOption::SackPermitted
            }
            "sack" => {
                self.bump_n(4);
                let mut blocks = Vec::new();
                loop {
                    self.skip_inline_ws();
                    if !self.peek().is_some_and(|c| c.is_ascii_digit()) {
                        break;
                    }
                    let left = self.u32()?;
                    self.expect(":")?;
                    let right = self.u32()?;
                    blocks.push((left, right));
                }
                if blocks.is_empty() {
                    return Err(Fail::Error(
                        self.error(ParseErrorKind::Expected("SACK block")),
                    ));
                }
                TcpOption::Sack(blocks)
            }
            "TS" => {
                self.bump_n(2);
                self.skip_inline_ws();
                if !self.peek_keyword("val") {
                    return Err(Fail::Error(self.error(ParseErrorKind::Expected("val"))));
                }
                self.bump_n(3);
                self.skip_inline_ws();
                let val = self.u32()?;
                self.skip_inline_ws();
                if !self.peek_keyword("ecr") {
                    return Err(Fail::Error(self.error(ParseErrorKind::Expected("ecr"))));
                }
                self.bump_n(3);
                self.skip_inline_ws();
                let ecr = self.u32()?;
                TcpOption::Timestamp { val, ecr }
            }
            "FO" | "FOEXP" => {
                let experimental = name == "FOEXP";
                self.bump_n(name.len());
                self.skip_inline_ws();
                let at = *self;
                let start = self.pos;
                while self.peek().is_some_and(is_ident_char) {
                    self.bump();
                }
                let word = self.src.get(start..self.pos).unwrap_or("");
                if !word.bytes().all(|c| c.is_ascii_hexdigit()) {
                    // A symbolic cookie (`FO TFO_COOKIE`), defined by the executor.
                    TcpOption::FastOpenNamed {
                        experimental,
                        name: word.to_string(),
                    }
                } else {
                    let cookie = decode_hex(word).ok_or(at.error(ParseErrorKind::BadCookie))?;
                    if experimental {
                        TcpOption::FastOpenExp(cookie)
                    } else {
                        TcpOption::FastOpen(cookie)
                    }
                }
            }
            "md5" => {
                self.bump_n(3);
                self.skip_inline_ws();
                let at = *self;
                let start = self.pos;
                while self.peek().is_some_and(is_ident_char) {
                    self.bump();
                }
                let word = self.src.get(start..self.pos).unwrap_or("");
                match decode_hex(word) {
                    Some(digest) if !digest.is_empty() && digest.len() <= 16 => {
                        TcpOption::Md5(digest)
                    }
                    _ => return Err(Fail::Error(at.error(ParseErrorKind::BadDigest))),
                }
            }
            _ => return Err(Fail::Unsupported),
        };
        Ok(opt)
    }
}

/// Decodes an even-length hex string (possibly empty).
fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    let b = s.as_bytes();
    b.chunks(2)
        .map(|pair| {
            let hi = (*pair.first()? as char).to_digit(16)?;
            let lo = (*pair.get(1)? as char).to_digit(16)?;
            u8::try_from(hi * 16 + lo).ok()
        })
        .collect()
}
