//! Expressions: system-call lines and their arguments (packetdrill's `syscall_spec`,
//! `expression`), on the same [`Parser`].

use super::*;

impl<'s> Parser<'s> {
    pub(super) fn syscall(&mut self) -> Result<SyscallLine, ParseError> {
        let name = self.ident()?.to_string();
        self.skip_trivia()?;
        self.expect("(")?;
        let args = self.expr_list(")")?;
        self.skip_trivia()?;
        self.expect("=")?;
        self.skip_trivia()?;
        let ret = self.expr()?;
        self.skip_inline_ws();
        let mut errno = None;
        let mut errno_note = None;
        if let Some(c) = self.peek()
            && is_ident_start(c)
        {
            errno = Some(self.ident()?.to_string());
            self.skip_inline_ws();
        }
        // packetdrill's `opt_note` stands on its own: `= 0x2 (flags O_RDWR)` and
        // `= -1 (Invalid Argument)` carry a note and no errno.
        {
            if self.peek() == Some(b'(') {
                let start = *self;
                self.bump();
                let body = self.pos;
                loop {
                    match self.peek() {
                        None | Some(b'\n') => {
                            return Err(start.error(ParseErrorKind::Unterminated("errno note")));
                        }
                        Some(b')') => break,
                        Some(_) => self.bump(),
                    }
                }
                errno_note = Some(self.src.get(body..self.pos).unwrap_or("").to_string());
                self.bump();
            }
        }
        Ok(SyscallLine {
            name,
            args,
            ret,
            errno,
            errno_note,
        })
    }

    /// Comma-separated expressions up to and including `close`.
    fn expr_list(&mut self, close: &'static str) -> Result<Vec<Expr>, ParseError> {
        let mut items = Vec::new();
        self.skip_trivia()?;
        if self.eat(close) {
            return Ok(items);
        }
        loop {
            self.skip_trivia()?;
            items.push(self.expr()?);
            self.skip_trivia()?;
            if self.eat(close) {
                return Ok(items);
            }
            if !self.eat(",") {
                return Err(self.error(ParseErrorKind::Expected(if close == ")" {
                    "',' or ')'"
                } else {
                    "',' or ']'"
                })));
            }
        }
    }

    fn expr(&mut self) -> Result<Expr, ParseError> {
        let first = self.term()?;
        let mut ops = vec![first];
        loop {
            let save = *self;
            self.skip_trivia()?;
            if self.eat("|") {
                self.skip_trivia()?;
                ops.push(self.term()?);
            } else {
                *self = save;
                break;
            }
        }
        if ops.len() == 1 {
            Ok(ops.pop().unwrap_or(Expr::Ellipsis))
        } else {
            Ok(Expr::Or(ops))
        }
    }

    fn term(&mut self) -> Result<Expr, ParseError> {
        if self.depth >= MAX_EXPR_DEPTH {
            return Err(self.error(ParseErrorKind::TooDeep));
        }
        self.depth += 1;
        let r = self.term_inner();
        self.depth -= 1;
        r
    }

    fn term_inner(&mut self) -> Result<Expr, ParseError> {
        match self.peek() {
            Some(b'.') if self.starts_with("...") => {
                self.bump_n(3);
                Ok(Expr::Ellipsis)
            }
            Some(b'-') => {
                let at = *self;
                self.bump();
                let v = self.uint()?;
                let v = i64::try_from(v).map_err(|_| at.error(ParseErrorKind::NumberTooLarge))?;
                Ok(Expr::Int(-v))
            }
            Some(c) if c.is_ascii_digit() => {
                let at = *self;
                let v = self.uint()?;
                let v = i64::try_from(v).map_err(|_| at.error(ParseErrorKind::NumberTooLarge))?;
                Ok(Expr::Int(v))
            }
            Some(b'"') => {
                let first = self.string()?;
                // `"abc"...`: a prefix; `"ab" "cd"`: adjacent strings, concatenated.
                let mut p = *self;
                p.skip_trivia()?;
                if p.eat("...") {
                    *self = p;
                    return Ok(Expr::StrPrefix(first));
                }
                let mut parts = vec![first];
                while p.peek() == Some(b'"') {
                    parts.push(p.string()?);
                    *self = p;
                    p.skip_trivia()?;
                }
                Ok(if parts.len() == 1 {
                    Expr::Str(parts.pop().unwrap_or_default())
                } else {
                    Expr::Strs(parts)
                })
            }
            Some(b'[') => {
                self.bump();
                Ok(Expr::List(self.expr_list("]")?))
            }
            Some(b'{') => {
                self.bump();
                Ok(Expr::Struct(self.fields()?))
            }
            Some(c) if is_ident_start(c) => {
                let name = self.ident()?.to_string();
                let save = *self;
                self.skip_inline_ws();
                if self.eat("(") {
                    let args = self.expr_list(")")?;
                    Ok(Expr::Call(name, args))
                } else if self.peek() == Some(b'=') && self.peek_at(1) != Some(b'=') {
                    // packetdrill's `WORD '=' expression` outside braces.
                    self.bump();
                    self.skip_trivia()?;
                    Ok(Expr::Assign(name, Box::new(self.expr()?)))
                } else {
                    *self = save;
                    Ok(Expr::Symbol(name))
                }
            }
            _ => Err(self.error(ParseErrorKind::Expected("expression"))),
        }
    }

    /// Struct elements up to and including `}`.
    fn fields(&mut self) -> Result<Vec<Field>, ParseError> {
        let mut fields = Vec::new();
        self.skip_trivia()?;
        if self.eat("}") {
            return Ok(fields);
        }
        loop {
            self.skip_trivia()?;
            fields.push(self.field()?);
            self.skip_trivia()?;
            if self.eat("}") {
                return Ok(fields);
            }
            if !self.eat(",") {
                return Err(self.error(ParseErrorKind::Expected("',' or '}'")));
            }
        }
    }

    fn field(&mut self) -> Result<Field, ParseError> {
        // `name=value` or `name(param)=value`; otherwise a positional expression.
        let save = *self;
        if let Ok(name) = self.ident() {
            let name = name.to_string();
            let mut p = *self;
            p.skip_trivia()?;
            if p.eat("=") {
                p.skip_trivia()?;
                let value = p.expr()?;
                *self = p;
                return Ok(Field {
                    name: Some(name),
                    param: None,
                    value,
                });
            }
            if p.eat("(") {
                p.skip_trivia()?;
                if let Ok(param) = p.expr() {
                    p.skip_trivia()?;
                    if p.eat(")") {
                        p.skip_trivia()?;
                        if p.eat("=") {
                            p.skip_trivia()?;
                            let value = p.expr()?;
                            *self = p;
                            return Ok(Field {
                                name: Some(name),
                                param: Some(param),
                                value,
                            });
                        }
                    }
                }
            }
        }
        *self = save;
        Ok(Field {
            name: None,
            param: None,
            value: self.expr()?,
        })
    }

    /// A double-quoted string, without the quotes (no escapes are interpreted).
    fn string(&mut self) -> Result<String, ParseError> {
        let start = *self;
        self.expect("\"")?;
        let body = self.pos;
        loop {
            match self.peek() {
                None => return Err(start.error(ParseErrorKind::Unterminated("string"))),
                Some(b'"') => break,
                Some(_) => self.bump(),
            }
        }
        let s = self.src.get(body..self.pos).unwrap_or("").to_string();
        self.bump();
        Ok(s)
    }
}
