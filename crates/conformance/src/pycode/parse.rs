//! The lexer and parser of the `%{ }%` subset: text to statements.

use super::{CodeError, unsupported};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Int(i64),
    Name(String),
    Str(String),
    Op(&'static str),
    /// A statement boundary: newline or `;`.
    End,
}

const OPS: [&str; 27] = [
    "//", "<<", ">>", "<=", ">=", "==", "!=", "+=", "-=", "*=", "**", "(", ")", ",", "<", ">", "+",
    "-", "*", "/", "%", "&", "|", "^", "~", "=", ".",
];

fn lex(code: &str) -> Result<Vec<Tok>, CodeError> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut depth = 0usize;
    while i < b.len() {
        let c = b[i];
        match c {
            b'\\' if b.get(i + 1) == Some(&b'\n') => i += 2,
            b'\\' if b.get(i + 1) == Some(&b'\r') && b.get(i + 2) == Some(&b'\n') => i += 3,
            b'\n' | b';' => {
                if depth == 0 || c == b';' {
                    out.push(Tok::End);
                }
                i += 1;
            }
            b' ' | b'\t' | b'\r' => i += 1,
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'\'' | b'"' => {
                let start = i + 1;
                let mut j = start;
                while j < b.len() && b[j] != c {
                    if b[j] == b'\\' || b[j] == b'\n' {
                        return Err(unsupported("escapes and multi-line strings"));
                    }
                    j += 1;
                }
                if j >= b.len() {
                    return Err(unsupported("unterminated string"));
                }
                out.push(Tok::Str(code[start..j].to_string()));
                i = j + 1;
            }
            b'0'..=b'9' => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                if b.get(i) == Some(&b'.') {
                    return Err(unsupported("floating-point numbers"));
                }
                let t = code[start..i].replace('_', "");
                let n = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                    i64::from_str_radix(h, 16)
                } else if let Some(o) = t.strip_prefix("0o") {
                    i64::from_str_radix(o, 8)
                } else {
                    t.parse()
                };
                out.push(Tok::Int(n.map_err(|_| unsupported(format!("number {t}")))?));
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                out.push(Tok::Name(code[start..i].to_string()));
            }
            _ => {
                let rest = &code[i..];
                let Some(op) = OPS.iter().find(|op| rest.starts_with(**op)) else {
                    return Err(unsupported(format!("character {:?}", c as char)));
                };
                match *op {
                    "(" => depth += 1,
                    ")" => depth = depth.saturating_sub(1),
                    _ => {}
                }
                out.push(Tok::Op(op));
                i += op.len();
            }
        }
    }
    out.push(Tok::End);
    Ok(out)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BinOp {
    Or,
    And,
    BitOr,
    BitXor,
    BitAnd,
    Shl,
    Shr,
    Add,
    Sub,
    Mul,
    FloorDiv,
    Mod,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Expr {
    Int(i64),
    Str(String),
    Name(String),
    Tuple(Vec<Expr>),
    Not(Box<Expr>),
    Neg(Box<Expr>),
    Invert(Box<Expr>),
    Bin(BinOp, Box<Expr>, Box<Expr>),
    /// `a op1 b op2 c ...`: every adjacent pair must hold.
    Cmp(Box<Expr>, Vec<(CmpOp, Expr)>),
}

impl Expr {
    /// Every name the expression reads, in order, once each.
    pub(super) fn names<'a>(&'a self, out: &mut Vec<&'a str>) {
        match self {
            Expr::Name(n) => {
                if !out.contains(&n.as_str()) {
                    out.push(n);
                }
            }
            Expr::Int(_) | Expr::Str(_) => {}
            Expr::Tuple(v) => v.iter().for_each(|e| e.names(out)),
            Expr::Not(e) | Expr::Neg(e) | Expr::Invert(e) => e.names(out),
            Expr::Bin(_, a, b) => {
                a.names(out);
                b.names(out);
            }
            Expr::Cmp(a, rest) => {
                a.names(out);
                rest.iter().for_each(|(_, e)| e.names(out));
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Stmt {
    Pass,
    Print,
    Expr(Expr),
    Assign {
        name: String,
        op: Option<BinOp>,
        value: Expr,
    },
    Assert {
        cond: Expr,
        msg: Option<Expr>,
        text: String,
    },
}

struct Parser {
    toks: Vec<Tok>,
    i: usize,
}

pub(super) fn parse_block(code: &str) -> Result<Vec<Stmt>, CodeError> {
    let mut p = Parser {
        toks: lex(code)?,
        i: 0,
    };
    let mut out = Vec::new();
    while p.i < p.toks.len() {
        if p.eat(&Tok::End) {
            continue;
        }
        let start = p.i;
        let stmt = p.stmt()?;
        if let Stmt::Assert { text, .. } = &stmt
            && text.is_empty()
        {
            let text = p.toks[start..p.i]
                .iter()
                .map(tok_text)
                .collect::<Vec<_>>()
                .join(" ");
            if let Stmt::Assert { cond, msg, .. } = stmt {
                out.push(Stmt::Assert { cond, msg, text });
            }
        } else {
            out.push(stmt);
        }
        if !p.eat(&Tok::End) {
            return Err(unsupported(format!(
                "unexpected {} after a statement",
                p.peek().map(tok_text).unwrap_or_default()
            )));
        }
    }
    Ok(out)
}

fn tok_text(t: &Tok) -> String {
    match t {
        Tok::Int(n) => n.to_string(),
        Tok::Name(n) => n.clone(),
        Tok::Str(s) => format!("'{s}'"),
        Tok::Op(o) => (*o).to_string(),
        Tok::End => ";".to_string(),
    }
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.i)
    }

    fn peek_op(&self) -> Option<&'static str> {
        match self.peek() {
            Some(Tok::Op(o)) => Some(o),
            _ => None,
        }
    }

    fn peek_name(&self) -> Option<&str> {
        match self.peek() {
            Some(Tok::Name(n)) => Some(n),
            _ => None,
        }
    }

    fn eat(&mut self, t: &Tok) -> bool {
        if self.peek() == Some(t) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn eat_op(&mut self, op: &str) -> bool {
        if self.peek_op() == Some(op) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn eat_name(&mut self, kw: &str) -> bool {
        if self.peek_name() == Some(kw) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn stmt(&mut self) -> Result<Stmt, CodeError> {
        if self.eat_name("assert") {
            let cond = self.expr()?;
            let msg = if self.eat_op(",") {
                Some(self.expr()?)
            } else {
                None
            };
            return Ok(Stmt::Assert {
                cond,
                msg,
                text: String::new(),
            });
        }
        if self.eat_name("pass") {
            return Ok(Stmt::Pass);
        }
        if self.peek_name() == Some("print") && self.toks.get(self.i + 1) == Some(&Tok::Op("(")) {
            // Skip the balanced argument list unevaluated.
            self.i += 1;
            let mut depth = 0usize;
            while let Some(t) = self.peek() {
                match t {
                    Tok::Op("(") => depth += 1,
                    Tok::Op(")") => {
                        depth -= 1;
                        if depth == 0 {
                            self.i += 1;
                            return Ok(Stmt::Print);
                        }
                    }
                    Tok::End => break,
                    _ => {}
                }
                self.i += 1;
            }
            return Err(unsupported("unbalanced print(...)"));
        }
        if let Some(name) = self.peek_name().map(str::to_string)
            && let Some(Tok::Op(op)) = self.toks.get(self.i + 1)
        {
            let op = match *op {
                "=" => Some(None),
                "+=" => Some(Some(BinOp::Add)),
                "-=" => Some(Some(BinOp::Sub)),
                "*=" => Some(Some(BinOp::Mul)),
                _ => None,
            };
            if let Some(op) = op {
                if is_keyword(&name) {
                    return Err(unsupported(format!("statement `{name}`")));
                }
                self.i += 2;
                let value = self.expr()?;
                return Ok(Stmt::Assign { name, op, value });
            }
        }
        if let Some(kw) = self.peek_name().filter(|n| is_keyword(n)) {
            return Err(unsupported(format!("statement `{kw}`")));
        }
        Ok(Stmt::Expr(self.expr()?))
    }

    fn expr(&mut self) -> Result<Expr, CodeError> {
        self.or()
    }

    fn or(&mut self) -> Result<Expr, CodeError> {
        let mut l = self.and()?;
        while self.eat_name("or") {
            l = Expr::Bin(BinOp::Or, Box::new(l), Box::new(self.and()?));
        }
        Ok(l)
    }

    fn and(&mut self) -> Result<Expr, CodeError> {
        let mut l = self.not()?;
        while self.eat_name("and") {
            l = Expr::Bin(BinOp::And, Box::new(l), Box::new(self.not()?));
        }
        Ok(l)
    }

    fn not(&mut self) -> Result<Expr, CodeError> {
        if self.eat_name("not") {
            return Ok(Expr::Not(Box::new(self.not()?)));
        }
        self.cmp()
    }

    fn cmp(&mut self) -> Result<Expr, CodeError> {
        let first = self.binary(0)?;
        let mut rest = Vec::new();
        loop {
            let op = match self.peek_op() {
                Some("==") => CmpOp::Eq,
                Some("!=") => CmpOp::Ne,
                Some("<") => CmpOp::Lt,
                Some("<=") => CmpOp::Le,
                Some(">") => CmpOp::Gt,
                Some(">=") => CmpOp::Ge,
                _ => break,
            };
            self.i += 1;
            rest.push((op, self.binary(0)?));
        }
        Ok(if rest.is_empty() {
            first
        } else {
            Expr::Cmp(Box::new(first), rest)
        })
    }

    /// Binary operators by Python's precedence levels, loosest first.
    fn binary(&mut self, level: usize) -> Result<Expr, CodeError> {
        const LEVELS: [&[(&str, BinOp)]; 6] = [
            &[("|", BinOp::BitOr)],
            &[("^", BinOp::BitXor)],
            &[("&", BinOp::BitAnd)],
            &[("<<", BinOp::Shl), (">>", BinOp::Shr)],
            &[("+", BinOp::Add), ("-", BinOp::Sub)],
            &[
                ("*", BinOp::Mul),
                ("//", BinOp::FloorDiv),
                ("%", BinOp::Mod),
            ],
        ];
        let Some(ops) = LEVELS.get(level) else {
            return self.unary();
        };
        let mut l = self.binary(level + 1)?;
        while let Some(op) = self.peek_op() {
            if op == "/" || op == "**" {
                return Err(unsupported(format!("operator {op}")));
            }
            let Some(&(_, bin)) = ops.iter().find(|(s, _)| *s == op) else {
                break;
            };
            self.i += 1;
            l = Expr::Bin(bin, Box::new(l), Box::new(self.binary(level + 1)?));
        }
        Ok(l)
    }

    fn unary(&mut self) -> Result<Expr, CodeError> {
        if self.eat_op("-") {
            return Ok(Expr::Neg(Box::new(self.unary()?)));
        }
        if self.eat_op("+") {
            return self.unary();
        }
        if self.eat_op("~") {
            return Ok(Expr::Invert(Box::new(self.unary()?)));
        }
        self.atom()
    }

    fn atom(&mut self) -> Result<Expr, CodeError> {
        let t = self.peek().cloned();
        self.i += 1;
        let e = match t {
            Some(Tok::Int(n)) => Expr::Int(n),
            Some(Tok::Str(s)) => Expr::Str(s),
            Some(Tok::Name(n)) if n == "True" => Expr::Int(1),
            Some(Tok::Name(n)) if n == "False" => Expr::Int(0),
            Some(Tok::Name(n)) if is_keyword(&n) => {
                return Err(unsupported(format!("keyword `{n}` in an expression")));
            }
            Some(Tok::Name(n)) => Expr::Name(n),
            Some(Tok::Op("(")) => {
                let mut items = Vec::new();
                let mut trailing_comma = false;
                while !self.eat_op(")") {
                    items.push(self.expr()?);
                    trailing_comma = self.eat_op(",");
                    if !trailing_comma && self.peek_op() != Some(")") {
                        return Err(unsupported("malformed parenthesis"));
                    }
                }
                match (items.len(), trailing_comma) {
                    (1, false) => items.pop().unwrap_or(Expr::Int(0)),
                    _ => Expr::Tuple(items),
                }
            }
            other => {
                return Err(unsupported(format!(
                    "unexpected {}",
                    other.as_ref().map(tok_text).unwrap_or_default()
                )));
            }
        };
        match self.peek_op() {
            Some("(") => Err(unsupported("function calls other than print()")),
            Some(".") => Err(unsupported("attribute access")),
            _ => Ok(e),
        }
    }
}

fn is_keyword(n: &str) -> bool {
    matches!(
        n,
        "assert"
            | "and"
            | "or"
            | "not"
            | "if"
            | "else"
            | "elif"
            | "for"
            | "while"
            | "in"
            | "is"
            | "import"
            | "from"
            | "def"
            | "return"
            | "lambda"
            | "pass"
            | "del"
            | "global"
            | "with"
            | "try"
            | "except"
            | "raise"
            | "class"
    )
}
