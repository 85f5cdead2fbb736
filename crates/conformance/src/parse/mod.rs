//! A scannerless recursive-descent parser for packetdrill scripts.
//!
//! The grammar follows packetdrill's `parser.y` in spirit: the language is token-based, not
//! line-based (a `sendmsg(…)` may span lines), except that an errno after a return value must be
//! on the same line, and an unsupported packet line extends to the end of its line.
//! Whitespace, `// …` and `/* … */` comments separate tokens anywhere.
//!
//! Errors carry the 1-based line and byte column where parsing stopped.

use crate::ast::*;
use wire::tcp::TcpFlags;

mod expr;
mod packet;
#[cfg(test)]
mod tests;

/// Why a script failed to parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseErrorKind {
    /// Something specific was expected here.
    Expected(&'static str),
    /// A number does not fit its field.
    NumberTooLarge,
    /// A time has more than 6 significant fractional digits (finer than 1 µs).
    TimeTooPrecise,
    /// `a~b` or `a...b` with `b < a`.
    TimeRangeBackwards,
    /// `start:end(len)` with `end != start + len`.
    InconsistentSeqRange,
    /// A flag letter appears twice, or `-` is combined with flags.
    BadFlags,
    /// A `/* … */`, backtick or `%{ … }%` block never ends.
    Unterminated(&'static str),
    /// `--option` after the first event.
    OptionAfterEvent,
    /// A `FO` cookie that is not an even number of hex digits.
    BadCookie,
    /// Expressions nested deeper than [`MAX_EXPR_DEPTH`].
    TooDeep,
    /// An `md5` digest that is not 1 to 16 bytes of hex digit pairs.
    BadDigest,
}

/// Deepest nesting of `[…]`, `{…}` and calls an expression may have (bounds parser recursion).
pub const MAX_EXPR_DEPTH: u32 = 32;

impl core::fmt::Display for ParseErrorKind {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ParseErrorKind::Expected(what) => write!(f, "expected {what}"),
            ParseErrorKind::NumberTooLarge => f.write_str("number too large for its field"),
            ParseErrorKind::TimeTooPrecise => f.write_str("time finer than 1 microsecond"),
            ParseErrorKind::TimeRangeBackwards => f.write_str("time range ends before it starts"),
            ParseErrorKind::InconsistentSeqRange => {
                f.write_str("sequence range end is not start + length")
            }
            ParseErrorKind::BadFlags => f.write_str("repeated TCP flag or '-' mixed with flags"),
            ParseErrorKind::Unterminated(what) => write!(f, "unterminated {what}"),
            ParseErrorKind::OptionAfterEvent => f.write_str("--option after the first event"),
            ParseErrorKind::BadCookie => {
                f.write_str("fast open cookie must be pairs of hex digits")
            }
            ParseErrorKind::TooDeep => {
                write!(f, "expression nested deeper than {MAX_EXPR_DEPTH}")
            }
            ParseErrorKind::BadDigest => {
                f.write_str("md5 digest must be 1 to 16 bytes of hex digit pairs")
            }
        }
    }
}

/// A parse failure with its position (1-based line, 1-based byte column).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseError {
    pub line: u32,
    pub col: u32,
    pub kind: ParseErrorKind,
}

impl core::fmt::Display for ParseError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.col, self.kind)
    }
}

impl std::error::Error for ParseError {}

/// Parses a whole script.
pub fn parse_script(src: &str) -> Result<Script, ParseError> {
    let mut p = Parser::new(src);
    let mut script = Script::default();
    loop {
        p.skip_trivia()?;
        if p.at_end() {
            break;
        }
        if p.starts_with("--") {
            if !script.events.is_empty() {
                return Err(p.error(ParseErrorKind::OptionAfterEvent));
            }
            script.options.push(p.script_option()?);
            continue;
        }
        script.events.push(p.event()?);
    }
    Ok(script)
}

/// Parses one event (time and action), e.g. `+0 > S. 0:0(0) ack 1 <...>`; trailing trivia is
/// allowed, anything else after the event is an error.
pub fn parse_event(src: &str) -> Result<Event, ParseError> {
    let mut p = Parser::new(src);
    p.skip_trivia()?;
    let ev = p.event()?;
    p.skip_trivia()?;
    if !p.at_end() {
        return Err(p.error(ParseErrorKind::Expected("end of input")));
    }
    Ok(ev)
}

/// Internal failure: either a real error or "this packet line is of an unsupported kind".
enum Fail {
    Error(ParseError),
    Unsupported,
}

impl From<ParseError> for Fail {
    fn from(e: ParseError) -> Fail {
        Fail::Error(e)
    }
}

/// A position in the source. Invariant: `pos` is on a char boundary of `src`;
/// `depth <= MAX_EXPR_DEPTH`.
#[derive(Clone, Copy)]
struct Parser<'s> {
    src: &'s str,
    pos: usize,
    line: u32,
    col: u32,
    /// Current expression nesting depth.
    depth: u32,
}

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

fn is_ident_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

impl<'s> Parser<'s> {
    fn new(src: &'s str) -> Self {
        Parser {
            src,
            pos: 0,
            line: 1,
            col: 1,
            depth: 0,
        }
    }

    fn error(&self, kind: ParseErrorKind) -> ParseError {
        ParseError {
            line: self.line,
            col: self.col,
            kind,
        }
    }

    fn here(&self) -> Pos {
        Pos {
            line: self.line,
            col: self.col,
        }
    }

    fn at_end(&self) -> bool {
        self.pos >= self.src.len()
    }

    fn rest(&self) -> &'s str {
        self.src.get(self.pos..).unwrap_or("")
    }

    fn peek(&self) -> Option<u8> {
        self.src.as_bytes().get(self.pos).copied()
    }

    fn peek_at(&self, n: usize) -> Option<u8> {
        self.src.as_bytes().get(self.pos + n).copied()
    }

    fn starts_with(&self, s: &str) -> bool {
        self.rest().starts_with(s)
    }

    /// Advances one character (not byte), tracking line and column.
    fn bump(&mut self) {
        if let Some(c) = self.rest().chars().next() {
            self.pos += c.len_utf8();
            if c == '\n' {
                self.line += 1;
                self.col = 1;
            } else {
                self.col += c.len_utf8() as u32;
            }
        }
    }

    fn bump_n(&mut self, n: usize) {
        for _ in 0..n {
            self.bump();
        }
    }

    fn eat(&mut self, s: &str) -> bool {
        if self.starts_with(s) {
            self.bump_n(s.chars().count());
            true
        } else {
            false
        }
    }

    fn expect(&mut self, s: &'static str) -> Result<(), ParseError> {
        if self.eat(s) {
            Ok(())
        } else {
            Err(self.error(ParseErrorKind::Expected(s)))
        }
    }

    /// Skips spaces, newlines and comments.
    fn skip_trivia(&mut self) -> Result<(), ParseError> {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\r' | b'\n') => self.bump(),
                Some(b'/') if self.peek_at(1) == Some(b'/') => {
                    while let Some(c) = self.peek() {
                        if c == b'\n' {
                            break;
                        }
                        self.bump();
                    }
                }
                Some(b'/') if self.peek_at(1) == Some(b'*') => {
                    let start = *self;
                    self.bump_n(2);
                    loop {
                        if self.at_end() {
                            return Err(start.error(ParseErrorKind::Unterminated("/* comment")));
                        }
                        if self.eat("*/") {
                            break;
                        }
                        self.bump();
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    /// Skips spaces and tabs only (stays on the current line).
    fn skip_inline_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\r') = self.peek() {
            self.bump();
        }
    }

    fn ident(&mut self) -> Result<&'s str, ParseError> {
        let start = self.pos;
        match self.peek() {
            Some(c) if is_ident_start(c) => self.bump(),
            _ => return Err(self.error(ParseErrorKind::Expected("identifier"))),
        }
        while let Some(c) = self.peek() {
            if !is_ident_char(c) {
                break;
            }
            self.bump();
        }
        Ok(self.src.get(start..self.pos).unwrap_or(""))
    }

    fn peek_ident(&self) -> Option<&'s str> {
        let mut p = *self;
        p.ident().ok()
    }

    /// Unsigned decimal or `0x` hexadecimal integer.
    fn uint(&mut self) -> Result<u64, ParseError> {
        let at = *self;
        if self.starts_with("0x") || self.starts_with("0X") {
            self.bump_n(2);
            let mut v: u64 = 0;
            let mut n = 0;
            while let Some(d) = self.peek().and_then(|c| (c as char).to_digit(16)) {
                v = v
                    .checked_mul(16)
                    .and_then(|v| v.checked_add(u64::from(d)))
                    .ok_or(at.error(ParseErrorKind::NumberTooLarge))?;
                n += 1;
                self.bump();
            }
            if n == 0 {
                return Err(self.error(ParseErrorKind::Expected("hex digits")));
            }
            return Ok(v);
        }
        let mut v: u64 = 0;
        let mut n = 0;
        while let Some(d) = self.peek().and_then(|c| (c as char).to_digit(10)) {
            v = v
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(d)))
                .ok_or(at.error(ParseErrorKind::NumberTooLarge))?;
            n += 1;
            self.bump();
        }
        if n == 0 {
            return Err(self.error(ParseErrorKind::Expected("number")));
        }
        Ok(v)
    }

    fn u32(&mut self) -> Result<u32, ParseError> {
        let at = *self;
        let v = self.uint()?;
        u32::try_from(v).map_err(|_| at.error(ParseErrorKind::NumberTooLarge))
    }

    fn u16(&mut self) -> Result<u16, ParseError> {
        let at = *self;
        let v = self.uint()?;
        u16::try_from(v).map_err(|_| at.error(ParseErrorKind::NumberTooLarge))
    }

    fn u8(&mut self) -> Result<u8, ParseError> {
        let at = *self;
        let v = self.uint()?;
        u8::try_from(v).map_err(|_| at.error(ParseErrorKind::NumberTooLarge))
    }

    fn script_option(&mut self) -> Result<ScriptOption, ParseError> {
        self.expect("--")?;
        let start = self.pos;
        while let Some(c) = self.peek() {
            if !(is_ident_char(c) || c == b'-') {
                break;
            }
            self.bump();
        }
        let name = self.src.get(start..self.pos).unwrap_or("");
        if name.is_empty() {
            return Err(self.error(ParseErrorKind::Expected("option name")));
        }
        let value = if self.eat("=") {
            let vstart = self.pos;
            // `--define=CC="reno cubic"`, `--define=SCRIPT=`cleanup``: quoted parts may hold
            // spaces.
            let mut quote: Option<u8> = None;
            while let Some(c) = self.peek() {
                match quote {
                    Some(q) if c == q => quote = None,
                    Some(_) if c == b'\n' => {
                        return Err(self.error(ParseErrorKind::Unterminated("quoted option value")));
                    }
                    Some(_) => {}
                    None if c.is_ascii_whitespace() => break,
                    None if c == b'"' || c == b'`' => quote = Some(c),
                    None => {}
                }
                self.bump();
            }
            if quote.is_some() {
                return Err(self.error(ParseErrorKind::Unterminated("quoted option value")));
            }
            let v = self.src.get(vstart..self.pos).unwrap_or("");
            if v.is_empty() {
                return Err(self.error(ParseErrorKind::Expected("option value")));
            }
            Some(v.to_string())
        } else {
            None
        };
        Ok(ScriptOption {
            name: name.to_string(),
            value,
        })
    }

    /// A time in seconds (`2`, `0.100`, `.1`) converted to microseconds.
    fn time_usecs(&mut self) -> Result<u64, ParseError> {
        let at = *self;
        let mut whole: u64 = 0;
        let mut digits = 0;
        while let Some(d) = self.peek().and_then(|c| (c as char).to_digit(10)) {
            whole = whole
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(d)))
                .ok_or(at.error(ParseErrorKind::NumberTooLarge))?;
            digits += 1;
            self.bump();
        }
        let mut frac_usecs: u64 = 0;
        if self.peek() == Some(b'.') && self.peek_at(1).is_some_and(|c| c.is_ascii_digit()) {
            self.bump();
            let mut scale: u64 = 100_000;
            while let Some(d) = self.peek().and_then(|c| (c as char).to_digit(10)) {
                if scale == 0 {
                    if d != 0 {
                        return Err(at.error(ParseErrorKind::TimeTooPrecise));
                    }
                } else {
                    frac_usecs += u64::from(d) * scale;
                    scale /= 10;
                }
                digits += 1;
                self.bump();
            }
        }
        if digits == 0 {
            return Err(self.error(ParseErrorKind::Expected("time")));
        }
        whole
            .checked_mul(1_000_000)
            .and_then(|v| v.checked_add(frac_usecs))
            .ok_or(at.error(ParseErrorKind::NumberTooLarge))
    }

    fn event_time(&mut self) -> Result<EventTime, ParseError> {
        if self.eat("*") {
            return Ok(EventTime::Any);
        }
        let relative = self.eat("+");
        // `+` is a token of its own in packetdrill's lexer: `+ 0.00` is `+0.00`.
        self.skip_inline_ws();
        let start_usecs = self.time_usecs()?;
        self.skip_inline_ws();
        let at = *self;
        if self.eat("...") {
            self.skip_inline_ws();
            let end_usecs = self.time_usecs()?;
            if end_usecs < start_usecs {
                return Err(at.error(ParseErrorKind::TimeRangeBackwards));
            }
            return Ok(if relative {
                EventTime::RelativeBlocking {
                    start_usecs,
                    end_usecs,
                }
            } else {
                EventTime::AbsoluteBlocking {
                    start_usecs,
                    end_usecs,
                }
            });
        }
        if self.eat("~") {
            self.skip_inline_ws();
            if relative {
                self.expect("+")?;
                self.skip_inline_ws();
            } else if self.peek() == Some(b'+') {
                return Err(self.error(ParseErrorKind::Expected("absolute end time")));
            }
            let end_usecs = self.time_usecs()?;
            if end_usecs < start_usecs {
                return Err(at.error(ParseErrorKind::TimeRangeBackwards));
            }
            return Ok(if relative {
                EventTime::RelativeRange {
                    start_usecs,
                    end_usecs,
                }
            } else {
                EventTime::AbsoluteRange {
                    start_usecs,
                    end_usecs,
                }
            });
        }
        Ok(if relative {
            EventTime::Relative {
                after_usecs: start_usecs,
            }
        } else {
            EventTime::Absolute {
                at_usecs: start_usecs,
            }
        })
    }

    fn event(&mut self) -> Result<Event, ParseError> {
        let pos = self.here();
        let time = if self.peek() == Some(b'`') || self.starts_with("%{") {
            EventTime::Unspecified
        } else {
            let t = self.event_time()?;
            self.skip_trivia()?;
            t
        };
        let action = self.action()?;
        Ok(Event { pos, time, action })
    }

    fn action(&mut self) -> Result<Action, ParseError> {
        match self.peek() {
            Some(b'<' | b'>') => self.packet(),
            Some(b'`') => self.shell(),
            Some(b'%') if self.starts_with("%{") => self.code(),
            Some(c) if is_ident_start(c) => Ok(Action::Syscall(self.syscall()?)),
            _ => Err(self.error(ParseErrorKind::Expected(
                "packet ('<' or '>'), system call, `command` or %{ code }%",
            ))),
        }
    }

    fn shell(&mut self) -> Result<Action, ParseError> {
        let start = *self;
        self.expect("`")?;
        let body = self.pos;
        loop {
            match self.peek() {
                None => return Err(start.error(ParseErrorKind::Unterminated("`command`"))),
                Some(b'`') => break,
                Some(_) => self.bump(),
            }
        }
        let text = self.src.get(body..self.pos).unwrap_or("").to_string();
        self.bump();
        Ok(Action::Shell(text))
    }

    fn code(&mut self) -> Result<Action, ParseError> {
        let start = *self;
        self.expect("%{")?;
        let body = self.pos;
        loop {
            if self.at_end() {
                return Err(start.error(ParseErrorKind::Unterminated("%{ code }%")));
            }
            if self.starts_with("}%") {
                break;
            }
            self.bump();
        }
        let text = self.src.get(body..self.pos).unwrap_or("").to_string();
        self.bump_n(2);
        Ok(Action::Code(text))
    }
}
