//! An evaluator for the Python of packetdrill's `%{ … }%` blocks, restricted to what
//! conformance scripts write there: statements separated by newlines or `;` (a `\` at the
//! end of a line continues it, `#` starts a comment), `assert COND[, MESSAGE]`,
//! `NAME = EXPR`, `NAME += EXPR` (and `-=`, `*=`), `print(...)` (not evaluated: it has no
//! effect on a verdict), `pass`; expressions over integers, booleans, strings and tuples with
//! `or`, `and`, `not`, chained comparisons (`a <= b <= c`), `|`, `^`, `&`, `<<`, `>>`, `+`,
//! `-`, `*`, `//`, `%` (integer remainder, or `'fmt' % args` with `%d %i %u %s %x`), unary
//! `-`/`+`/`~`, and parentheses.
//!
//! packetdrill runs each block with the socket's `tcp_info` fields bound as `tcpi_*`
//! variables and a preamble of constants; variables a block assigns stay bound for the later
//! blocks of the script. The evaluator does the same: [`Env`] holds the assigned variables
//! and [`run_block`] resolves other names through a caller's [`Names`] (the `tcp_info`
//! snapshot taken at the block's time) and then [`constant`].
//!
//! Anything outside the subset — a function call other than `print`, a float, `/`, `import`,
//! a name nobody binds, a `tcp_info` field the stack does not provide — is
//! [`CodeError::Unsupported`]: the executor skips the script with that reason rather than
//! guess. A false assertion is [`CodeError::Failed`].

use std::collections::BTreeMap;
use std::fmt;

/// A value of the subset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Int(i64),
    Bool(bool),
    Str(String),
    Tuple(Vec<Value>),
    None,
}

impl Value {
    /// Python truthiness.
    fn truthy(&self) -> bool {
        match self {
            Value::Int(n) => *n != 0,
            Value::Bool(b) => *b,
            Value::Str(s) => !s.is_empty(),
            Value::Tuple(v) => !v.is_empty(),
            Value::None => false,
        }
    }

    /// The integer a value stands for in arithmetic (`True` is 1, as in Python).
    fn int(&self) -> Result<i64, CodeError> {
        match self {
            Value::Int(n) => Ok(*n),
            Value::Bool(b) => Ok(i64::from(*b)),
            other => Err(unsupported(format!("{other} is not a number"))),
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(n) => write!(f, "{n}"),
            Value::Bool(true) => f.write_str("True"),
            Value::Bool(false) => f.write_str("False"),
            Value::Str(s) => f.write_str(s),
            Value::Tuple(v) => {
                f.write_str("(")?;
                for (i, x) in v.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{x}")?;
                }
                f.write_str(")")
            }
            Value::None => f.write_str("None"),
        }
    }
}

/// Why a block did not pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CodeError {
    /// The block needs something the evaluator or the stack cannot give (the reason says
    /// what): the script is skipped.
    Unsupported(String),
    /// An assertion was false: `assertion` is its text, `message` its message (or the
    /// values compared when it has none).
    Failed { assertion: String, message: String },
}

fn unsupported(msg: impl Into<String>) -> CodeError {
    CodeError::Unsupported(msg.into())
}

/// How a name the block does not assign resolves.
pub enum Lookup {
    Value(i64),
    /// The name is the caller's but has no value now (the reason says why).
    Unavailable(String),
    /// Not the caller's name.
    NotMine,
}

/// The caller's names (the `tcp_info` fields).
pub trait Names {
    fn lookup(&self, name: &str) -> Lookup;
}

/// The constants packetdrill's Python preamble and Linux's headers give every block:
/// congestion-avoidance states, `TCPI_OPT_*` bits, TCP states.
pub fn constant(name: &str) -> Option<i64> {
    Some(match name {
        "TCP_CA_Open" => 0,
        "TCP_CA_Disorder" => 1,
        "TCP_CA_CWR" => 2,
        "TCP_CA_Recovery" => 3,
        "TCP_CA_Loss" => 4,
        "TCPI_OPT_TIMESTAMPS" => 1,
        "TCPI_OPT_SACK" => 2,
        "TCPI_OPT_WSCALE" => 4,
        "TCPI_OPT_ECN" => 8,
        "TCPI_OPT_ECN_SEEN" => 16,
        "TCPI_OPT_SYN_DATA" => 32,
        "TCP_ESTABLISHED" => 1,
        "TCP_SYN_SENT" => 2,
        "TCP_SYN_RECV" => 3,
        "TCP_FIN_WAIT1" => 4,
        "TCP_FIN_WAIT2" => 5,
        "TCP_TIME_WAIT" => 6,
        "TCP_CLOSE" => 7,
        "TCP_CLOSE_WAIT" => 8,
        "TCP_LAST_ACK" => 9,
        "TCP_LISTEN" => 10,
        "TCP_CLOSING" => 11,
        _ => return None,
    })
}

/// Variables assigned by the blocks of one script so far.
#[derive(Debug, Clone, Default)]
pub struct Env {
    vars: BTreeMap<String, Value>,
}

/// Assertions of one block: how many were evaluated, and of those how many held. Invariant:
/// `passed ≤ checked`; a block that returned [`CodeError::Failed`] stopped at its first false
/// assertion, counted in `checked` and not in `passed`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub checked: usize,
    pub passed: usize,
}

/// Runs one block in `env`. Returns the counts so far with the error, if any.
pub fn run_block(code: &str, env: &mut Env, names: &dyn Names) -> (Counts, Result<(), CodeError>) {
    let mut counts = Counts::default();
    let stmts = match parse_block(code) {
        Ok(s) => s,
        Err(e) => return (counts, Err(e)),
    };
    for stmt in &stmts {
        let r = exec(stmt, env, names, &mut counts);
        if r.is_err() {
            return (counts, r);
        }
    }
    (counts, Ok(()))
}

/// The `assert` statements of a block, counted as the parser sees them (0 when it does not
/// parse).
pub fn assertions_in_block(code: &str) -> usize {
    parse_block(code).map_or(0, |v| {
        v.iter()
            .filter(|s| matches!(s, Stmt::Assert { .. }))
            .count()
    })
}

fn exec(
    stmt: &Stmt,
    env: &mut Env,
    names: &dyn Names,
    counts: &mut Counts,
) -> Result<(), CodeError> {
    match stmt {
        Stmt::Pass | Stmt::Print => Ok(()),
        Stmt::Expr(e) => eval(e, env, names).map(|_| ()),
        Stmt::Assign { name, op, value } => {
            let v = eval(value, env, names)?;
            let v = match op {
                None => v,
                Some(op) => {
                    let old = eval(&Expr::Name(name.clone()), env, names)?;
                    binary(*op, old, v)?
                }
            };
            env.vars.insert(name.clone(), v);
            Ok(())
        }
        Stmt::Assert { cond, msg, text } => {
            let ok = eval(cond, env, names)?.truthy();
            counts.checked += 1;
            if ok {
                counts.passed += 1;
                return Ok(());
            }
            let message = match msg {
                Some(m) => match eval(m, env, names) {
                    Ok(v) => v.to_string(),
                    Err(_) => String::from("(message not evaluable)"),
                },
                None => String::new(),
            };
            Err(CodeError::Failed {
                assertion: text.clone(),
                message: format!("{}{message}", operands(cond, env, names)),
            })
        }
    }
}

/// `name=value, ...` for the names a failed condition reads, to explain it.
fn operands(cond: &Expr, env: &Env, names: &dyn Names) -> String {
    let mut seen = Vec::new();
    cond.names(&mut seen);
    let mut s = String::new();
    for n in seen {
        if let Ok(v) = eval(&Expr::Name(n.to_string()), env, names) {
            s.push_str(&format!("{n}={v}; "));
        }
    }
    s
}

// ------------------------------------------------------------------ lexer

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

// ------------------------------------------------------------------ parser

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BinOp {
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
enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Expr {
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
    fn names<'a>(&'a self, out: &mut Vec<&'a str>) {
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
enum Stmt {
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

fn parse_block(code: &str) -> Result<Vec<Stmt>, CodeError> {
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
        loop {
            let Some(op) = self.peek_op() else { break };
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

// ------------------------------------------------------------------ evaluation

fn eval(e: &Expr, env: &Env, names: &dyn Names) -> Result<Value, CodeError> {
    Ok(match e {
        Expr::Int(n) => Value::Int(*n),
        Expr::Str(s) => Value::Str(s.clone()),
        Expr::Name(n) => {
            if let Some(v) = env.vars.get(n) {
                return Ok(v.clone());
            }
            match names.lookup(n) {
                Lookup::Value(v) => return Ok(Value::Int(v)),
                Lookup::Unavailable(why) => return Err(CodeError::Unsupported(why)),
                Lookup::NotMine => {}
            }
            match constant(n) {
                Some(v) => Value::Int(v),
                None if n == "None" => Value::None,
                None => return Err(unsupported(format!("name `{n}` is not defined"))),
            }
        }
        Expr::Tuple(v) => Value::Tuple(
            v.iter()
                .map(|x| eval(x, env, names))
                .collect::<Result<_, _>>()?,
        ),
        Expr::Not(x) => Value::Bool(!eval(x, env, names)?.truthy()),
        Expr::Neg(x) => Value::Int(
            eval(x, env, names)?
                .int()?
                .checked_neg()
                .ok_or_else(|| unsupported("integer overflow"))?,
        ),
        Expr::Invert(x) => Value::Int(!eval(x, env, names)?.int()?),
        Expr::Bin(BinOp::Or, a, b) => {
            let a = eval(a, env, names)?;
            if a.truthy() { a } else { eval(b, env, names)? }
        }
        Expr::Bin(BinOp::And, a, b) => {
            let a = eval(a, env, names)?;
            if a.truthy() { eval(b, env, names)? } else { a }
        }
        Expr::Bin(op, a, b) => binary(*op, eval(a, env, names)?, eval(b, env, names)?)?,
        Expr::Cmp(first, rest) => {
            let mut l = eval(first, env, names)?;
            for (op, r) in rest {
                let r = eval(r, env, names)?;
                if !compare(*op, &l, &r)? {
                    return Ok(Value::Bool(false));
                }
                l = r;
            }
            Value::Bool(true)
        }
    })
}

fn compare(op: CmpOp, l: &Value, r: &Value) -> Result<bool, CodeError> {
    let ord = match (l, r) {
        (Value::Str(a), Value::Str(b)) => a.cmp(b),
        (Value::None, Value::None) => core::cmp::Ordering::Equal,
        _ if matches!(op, CmpOp::Eq | CmpOp::Ne)
            && (matches!(l, Value::Str(_) | Value::None | Value::Tuple(_))
                || matches!(r, Value::Str(_) | Value::None | Value::Tuple(_))) =>
        {
            return Ok((l == r) == (op == CmpOp::Eq));
        }
        _ => l.int()?.cmp(&r.int()?),
    };
    Ok(match op {
        CmpOp::Eq => ord.is_eq(),
        CmpOp::Ne => ord.is_ne(),
        CmpOp::Lt => ord.is_lt(),
        CmpOp::Le => ord.is_le(),
        CmpOp::Gt => ord.is_gt(),
        CmpOp::Ge => ord.is_ge(),
    })
}

fn binary(op: BinOp, a: Value, b: Value) -> Result<Value, CodeError> {
    if let (BinOp::Mod, Value::Str(fmt)) = (op, &a) {
        return format_percent(fmt, &b).map(Value::Str);
    }
    if let (BinOp::Add, Value::Str(x), Value::Str(y)) = (op, &a, &b) {
        return Ok(Value::Str(format!("{x}{y}")));
    }
    let (x, y) = (a.int()?, b.int()?);
    let overflow = || unsupported("integer overflow");
    let v = match op {
        BinOp::BitOr => x | y,
        BinOp::BitXor => x ^ y,
        BinOp::BitAnd => x & y,
        BinOp::Shl => u32::try_from(y)
            .ok()
            .and_then(|s| x.checked_shl(s))
            .ok_or_else(overflow)?,
        BinOp::Shr => x >> y.clamp(0, 63),
        BinOp::Add => x.checked_add(y).ok_or_else(overflow)?,
        BinOp::Sub => x.checked_sub(y).ok_or_else(overflow)?,
        BinOp::Mul => x.checked_mul(y).ok_or_else(overflow)?,
        // Python rounds toward negative infinity; the remainder takes the divisor's sign.
        BinOp::FloorDiv if y == 0 => return Err(unsupported("division by zero")),
        BinOp::FloorDiv => {
            let q = x.checked_div(y).ok_or_else(overflow)?;
            q - i64::from(x % y != 0 && (x < 0) != (y < 0))
        }
        BinOp::Mod if y == 0 => return Err(unsupported("division by zero")),
        BinOp::Mod => {
            let r = x.checked_rem(y).ok_or_else(overflow)?;
            if r != 0 && (r < 0) != (y < 0) {
                r + y
            } else {
                r
            }
        }
        BinOp::Or | BinOp::And => unreachable!("short-circuit operators are evaluated lazily"),
    };
    Ok(Value::Int(v))
}

/// `fmt % args` with the conversions `%d %i %u %s %x %%`.
fn format_percent(fmt: &str, args: &Value) -> Result<String, CodeError> {
    let args: Vec<&Value> = match args {
        Value::Tuple(v) => v.iter().collect(),
        one => vec![one],
    };
    let mut next = args.into_iter();
    let mut out = String::new();
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('%') => out.push('%'),
            Some(conv @ ('d' | 'i' | 'u' | 's' | 'x')) => {
                let v = next
                    .next()
                    .ok_or_else(|| unsupported("not enough arguments for format"))?;
                match conv {
                    'x' => out.push_str(&format!("{:x}", v.int()?)),
                    's' => out.push_str(&v.to_string()),
                    _ => out.push_str(&v.int()?.to_string()),
                }
            }
            other => return Err(unsupported(format!("format conversion %{other:?}"))),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Info(Vec<(&'static str, Option<i64>)>);

    impl Names for Info {
        fn lookup(&self, name: &str) -> Lookup {
            match self.0.iter().find(|(n, _)| *n == name) {
                Some((_, Some(v))) => Lookup::Value(*v),
                Some((_, None)) => Lookup::Unavailable(format!("{name} unknown")),
                None if name.starts_with("tcpi_") => Lookup::Unavailable(format!("no {name}")),
                None => Lookup::NotMine,
            }
        }
    }

    fn run(code: &str, info: &Info) -> (Counts, Result<(), CodeError>) {
        run_block(code, &mut Env::default(), info)
    }

    fn cwnd(n: i64) -> Info {
        Info(vec![
            ("tcpi_snd_cwnd", Some(n)),
            ("tcpi_options", Some(7)),
            ("tcpi_rtt", Some(20_000)),
            ("tcpi_ca_state", Some(3)),
            ("tcpi_lost", None),
        ])
    }

    #[test]
    fn assert_with_message_passes_and_fails_on_the_value() {
        let (c, r) = run("assert tcpi_snd_cwnd == 10, tcpi_snd_cwnd", &cwnd(10));
        assert_eq!(
            (c, r),
            (
                Counts {
                    checked: 1,
                    passed: 1
                },
                Ok(())
            )
        );
        let (c, r) = run(
            "assert tcpi_snd_cwnd == 10, 'cwnd=%d' % tcpi_snd_cwnd",
            &cwnd(12),
        );
        assert_eq!(
            c,
            Counts {
                checked: 1,
                passed: 0
            }
        );
        let Err(CodeError::Failed { message, .. }) = r else {
            panic!("{r:?}")
        };
        assert!(message.ends_with("cwnd=12"), "{message}");
    }

    #[test]
    fn statements_split_on_newlines_semicolons_and_continue_after_backslash() {
        let code = "print(tcpi_snd_cwnd); assert tcpi_snd_cwnd == 10,tcpi_snd_cwnd\n\
                    assert 15000 <= tcpi_rtt <= 25000, 'rtt=%d' % tcpi_rtt;\\\n  \
                    assert (tcpi_options & TCPI_OPT_SACK) != 0  # comment\n";
        assert_eq!(assertions_in_block(code), 3);
        assert_eq!(
            run(code, &cwnd(10)),
            (
                Counts {
                    checked: 3,
                    passed: 3
                },
                Ok(())
            )
        );
    }

    #[test]
    fn chained_comparison_needs_every_link() {
        assert!(
            run("assert 25000 <= tcpi_rtt <= 36000", &cwnd(1))
                .1
                .is_err()
        );
        assert!(
            run("assert 1 < 2 < 3 and not 3 < 2 or 0", &cwnd(1))
                .1
                .is_ok()
        );
    }

    #[test]
    fn variables_persist_across_blocks_and_augmented_assignment_adds() {
        let mut env = Env::default();
        let info = cwnd(59);
        assert!(run_block("cwnd = 58", &mut env, &info).1.is_ok());
        let (c, r) = run_block(
            "cwnd += 1; assert tcpi_snd_cwnd == cwnd, tcpi_snd_cwnd",
            &mut env,
            &info,
        );
        assert_eq!((c.passed, r), (1, Ok(())));
        let r = run_block("TCP_INFINITE_SSTHRESH = 0x7fffffff", &mut env, &info).1;
        assert!(r.is_ok());
        assert!(
            run_block(
                "assert TCP_INFINITE_SSTHRESH == 2147483647",
                &mut env,
                &info
            )
            .1
            .is_ok()
        );
    }

    #[test]
    fn constants_name_linux_states() {
        let (c, r) = run(
            "assert tcpi_ca_state == TCP_CA_Recovery, 'ca_state: %d rtt: %d' % (tcpi_ca_state, tcpi_rtt)",
            &cwnd(1),
        );
        assert_eq!((c.passed, r), (1, Ok(())));
    }

    #[test]
    fn unknown_field_or_syntax_is_unsupported_never_passed() {
        let (c, r) = run(
            "assert tcpi_snd_cwnd == 10; assert tcpi_lost == 1",
            &cwnd(10),
        );
        assert_eq!(
            c,
            Counts {
                checked: 1,
                passed: 1
            }
        );
        assert_eq!(r, Err(CodeError::Unsupported("tcpi_lost unknown".into())));
        for code in [
            "assert tcpi_busy_time == 0",
            "import os",
            "assert len(x) == 1",
            "assert 1.5 > 1",
            "assert undefined_name == 1",
            "assert 4 / 2 == 2",
        ] {
            assert!(
                matches!(run(code, &cwnd(1)).1, Err(CodeError::Unsupported(_))),
                "{code}"
            );
        }
    }

    #[test]
    fn arithmetic_follows_python() {
        for code in [
            "assert 7 // 2 == 3 and -7 // 2 == -4 and -7 % 3 == 2 and 7 % -3 == -2",
            "assert 1 + 2 * 3 == 7 and (1 + 2) * 3 == 9 and 1 << 4 == 16 and 0x10 | 1 == 17",
            "assert ~0 == -1 and 6 ^ 3 == 5 and -(2) == -2",
        ] {
            assert_eq!(run(code, &cwnd(1)).1, Ok(()), "{code}");
        }
    }
}
