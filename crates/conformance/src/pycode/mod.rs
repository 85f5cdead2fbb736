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

use parse::{BinOp, CmpOp, Expr, Stmt, parse_block};

mod parse;
#[cfg(test)]
mod tests;

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
