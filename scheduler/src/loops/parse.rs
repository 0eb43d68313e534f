//! Parsing kernels (with their schedules) from the text form of [`super::print_kernel`].
//!
//! Kernels are parsed against a program, whose tensor table gives the named tensors (constant
//! tensors carry model data that kernel text does not). This is how a schedule is pinned: print
//! a kernel, edit its schedule lines, parse it back and replace the kernel.

use std::collections::HashMap;

use swflow_frontend::ir::{BinaryOp, DType, ReduceKind, TensorType, UnaryOp};

use super::{Access, Affine, Expr, Index, Kernel, Loop, LoopKind, Program, Reduction, Scalar, Stmt, TensorId};
use crate::schedule::share::MeshLine;
use crate::schedule::{Buffer, Residence, Schedule};

/// A syntax or reference error, with the line it was found on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {msg}")]
pub struct LoopParseError {
    pub line: usize,
    pub msg: String,
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Word(String),
    Str(String),
    Punct(char),
}

struct Parser<'p> {
    toks: Vec<(Tok, usize)>,
    pos: usize,
    program: &'p Program,
    loops: Vec<Loop>,
    operands: Vec<TensorId>,
    operand_of: HashMap<String, usize>,
}

fn lex(text: &str) -> Result<Vec<(Tok, usize)>, LoopParseError> {
    let chars: Vec<char> = text.chars().collect();
    let mut toks = Vec::new();
    let (mut i, mut line) = (0, 1);
    let word_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/');
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '"' {
            let mut s = String::new();
            i += 1;
            loop {
                match chars.get(i) {
                    None => {
                        return Err(LoopParseError {
                            line,
                            msg: "unterminated string".into(),
                        })
                    }
                    Some('"') => break,
                    Some('\\') => {
                        i += 1;
                        match chars.get(i) {
                            Some('n') => s.push('\n'),
                            Some('r') => s.push('\r'),
                            Some('t') => s.push('\t'),
                            Some('0') => s.push('\0'),
                            Some('u') if chars.get(i + 1) == Some(&'{') => {
                                let close = chars[i..].iter().position(|&c| c == '}' || c == '"').map(|p| p + i);
                                let Some(close) = close.filter(|&c| chars[c] == '}') else {
                                    return Err(LoopParseError {
                                        line,
                                        msg: "unterminated unicode escape".into(),
                                    });
                                };
                                let hex: String = chars[i + 2..close].iter().collect();
                                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                                    Some(c) => s.push(c),
                                    None => {
                                        return Err(LoopParseError {
                                            line,
                                            msg: format!("bad unicode escape \\u{{{hex}}}"),
                                        })
                                    }
                                }
                                i = close;
                            }
                            Some(&other) => s.push(other),
                            None => {
                                return Err(LoopParseError {
                                    line,
                                    msg: "bad escape".into(),
                                })
                            }
                        }
                    }
                    Some(&other) => s.push(other),
                }
                i += 1;
            }
            i += 1;
            toks.push((Tok::Str(s), line));
        } else if word_char(c) || (c == '-' && chars.get(i + 1).is_some_and(|&n| n.is_ascii_digit() || n == 'i')) {
            let mut s = c.to_string();
            i += 1;
            while let Some(&n) = chars.get(i) {
                let exponent_sign = matches!(n, '-' | '+')
                    && s.ends_with('e')
                    && s.chars().next().is_some_and(|f| f.is_ascii_digit() || f == '-');
                if word_char(n) || exponent_sign {
                    s.push(n);
                    i += 1;
                } else {
                    break;
                }
            }
            // A lone slash is the division operator, not a name.
            toks.push((if s == "/" { Tok::Punct('/') } else { Tok::Word(s) }, line));
        } else {
            toks.push((Tok::Punct(c), line));
            i += 1;
        }
    }
    Ok(toks)
}

/// Parses one kernel against `program`'s tensors.
pub fn parse_kernel(text: &str, program: &Program) -> Result<Kernel, LoopParseError> {
    let mut p = Parser {
        toks: lex(text)?,
        pos: 0,
        program,
        loops: Vec::new(),
        operands: Vec::new(),
        operand_of: HashMap::new(),
    };
    p.kernel()
}

impl Parser<'_> {
    fn line(&self) -> usize {
        self.toks.get(self.pos).or(self.toks.last()).map_or(0, |t| t.1)
    }

    fn err<T>(&self, msg: impl Into<String>) -> Result<T, LoopParseError> {
        Err(LoopParseError {
            line: self.line(),
            msg: msg.into(),
        })
    }

    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.0)
    }

    fn next(&mut self) -> Result<Tok, LoopParseError> {
        let t = self.toks.get(self.pos).map(|t| t.0.clone());
        self.pos += 1;
        t.map_or_else(|| self.err("unexpected end of text"), Ok)
    }

    fn punct(&mut self, c: char) -> Result<(), LoopParseError> {
        match self.next()? {
            Tok::Punct(x) if x == c => Ok(()),
            t => self.err(format!("expected '{c}', found {t:?}")),
        }
    }

    fn is_punct(&self, c: char) -> bool {
        self.peek() == Some(&Tok::Punct(c))
    }

    fn word(&mut self) -> Result<String, LoopParseError> {
        match self.next()? {
            Tok::Word(w) => Ok(w),
            t => self.err(format!("expected a word, found {t:?}")),
        }
    }

    fn keyword(&mut self, k: &str) -> Result<(), LoopParseError> {
        let w = self.word()?;
        if w != k {
            return self.err(format!("expected '{k}', found '{w}'"));
        }
        Ok(())
    }

    fn number<T: std::str::FromStr>(&mut self) -> Result<T, LoopParseError> {
        let w = self.word()?;
        w.parse()
            .or_else(|_| self.err(format!("expected a number, found '{w}'")))
    }

    fn name(&mut self) -> Result<String, LoopParseError> {
        match self.next()? {
            Tok::Word(w) | Tok::Str(w) => Ok(w),
            t => self.err(format!("expected a name, found {t:?}")),
        }
    }

    /// `a, b, c` until `end` (not consumed), each parsed by `item`.
    fn list<T>(
        &mut self,
        end: char,
        mut item: impl FnMut(&mut Self) -> Result<T, LoopParseError>,
    ) -> Result<Vec<T>, LoopParseError> {
        let mut out = Vec::new();
        while !self.is_punct(end) {
            out.push(item(self)?);
            if !self.is_punct(',') {
                break;
            }
            self.punct(',')?;
        }
        Ok(out)
    }

    fn loop_index(&self, name: &str) -> Result<usize, LoopParseError> {
        self.loops
            .iter()
            .position(|l| l.name == name)
            .map_or_else(|| self.err(format!("unknown loop '{name}'")), Ok)
    }

    fn kernel(&mut self) -> Result<Kernel, LoopParseError> {
        self.keyword("kernel")?;
        let name = self.name()?;
        self.punct('=')?;
        let mut op = self.word()?;
        while self.is_punct('+') {
            self.punct('+')?;
            op = format!("{op}+{}", self.word()?);
        }
        let origin = if self.is_punct('@') {
            self.punct('@')?;
            Some(self.name()?)
        } else {
            None
        };
        let mut fused = Vec::new();
        if self.peek() == Some(&Tok::Word("fuses".into())) {
            self.keyword("fuses")?;
            fused.push(self.name()?);
            while self.is_punct(',') {
                self.punct(',')?;
                fused.push(self.name()?);
            }
        }
        self.punct('{')?;
        self.keyword("tensors")?;
        loop {
            let t = self.name()?;
            self.punct(':')?;
            let ty = self.ty()?;
            let id = self
                .program
                .tensors
                .iter()
                .position(|x| x.name == t)
                .map(|i| TensorId(i as u32));
            let Some(id) = id.filter(|&id| self.program.tensor(id).ty == ty) else {
                return self.err(format!("no tensor '{t}' of type {ty} in the program"));
            };
            self.operand_of.insert(t, self.operands.len());
            self.operands.push(id);
            if !self.is_punct(',') {
                break;
            }
            self.punct(',')?;
        }
        self.keyword("loops")?;
        // A kernel without loops goes straight on to its target access.
        let has_loops = self.toks.get(self.pos + 1).map(|t| &t.0) != Some(&Tok::Punct('['));
        if has_loops {
            self.loops()?;
        }
        let target = self.access()?;
        let reduce = if self.is_punct('=') {
            None
        } else {
            let kind = match self.word()?.as_str() {
                "sum" => ReduceKind::Sum,
                "max" => ReduceKind::Max,
                "min" => ReduceKind::Min,
                "prod" => ReduceKind::Prod,
                other => return self.err(format!("unknown reduction '{other}'")),
            };
            self.punct('(')?;
            let init = self.scalar()?;
            self.punct(')')?;
            Some(Reduction { kind, init })
        };
        self.punct('=')?;
        let value = self.expr()?;
        let epilogue = if self.peek() == Some(&Tok::Word("then".into())) {
            self.keyword("then")?;
            Some(self.expr()?)
        } else {
            None
        };
        let keep = if self.peek() == Some(&Tok::Word("keep".into())) {
            self.keyword("keep")?;
            let t = self.name()?;
            let Some(&operand) = self.operand_of.get(&t) else {
                return self.err(format!("'{t}' is not an operand of the kernel"));
            };
            Some(Access {
                operand,
                index: target.index.clone(),
                pad: None,
                spread: Vec::new(),
            })
        } else {
            None
        };
        let schedule = if self.is_punct('}') {
            None
        } else {
            Some(self.schedule()?)
        };
        self.punct('}')?;
        if self.pos < self.toks.len() {
            return self.err("text after the kernel");
        }
        let mut kernel = Kernel {
            name,
            op,
            origin,
            fused,
            loops: std::mem::take(&mut self.loops),
            operands: std::mem::take(&mut self.operands),
            stmt: Stmt {
                target,
                value,
                reduce,
                epilogue,
                keep,
            },
            schedule: None,
        };
        // The room a buffer keeps after its tile follows from the kernel's statement.
        kernel.schedule = schedule.map(|mut s| {
            crate::schedule::keep_room(&kernel, &mut s.buffers);
            s
        });
        Ok(kernel)
    }

    /// `a:4, b:8 | c:3`: parallel loops, then reduction loops after `|`.
    fn loops(&mut self) -> Result<(), LoopParseError> {
        let mut kind = LoopKind::Parallel;
        loop {
            if self.is_punct('|') {
                self.punct('|')?;
                kind = LoopKind::Reduce;
            }
            let name = self.word()?;
            self.punct(':')?;
            let extent = self.number()?;
            self.loops.push(Loop { name, extent, kind });
            if self.is_punct(',') {
                self.punct(',')?;
            } else if !self.is_punct('|') {
                return Ok(());
            }
        }
    }

    fn ty(&mut self) -> Result<TensorType, LoopParseError> {
        let d = self.word()?;
        let Some(dtype) = DType::from_name(&d) else {
            return self.err(format!("unknown element type '{d}'"));
        };
        self.punct('[')?;
        let shape = self.list(']', |p| p.number())?;
        self.punct(']')?;
        TensorType::new(dtype, shape).or_else(|e| self.err(e.0))
    }

    fn access(&mut self) -> Result<Access, LoopParseError> {
        let t = self.name()?;
        let Some(&operand) = self.operand_of.get(&t) else {
            return self.err(format!("'{t}' is not an operand of the kernel"));
        };
        self.punct('[')?;
        let index = self.list(']', |p| p.index())?;
        let pad = if self.peek() == Some(&Tok::Word("else".into())) {
            self.word()?;
            Some(self.scalar()?)
        } else {
            None
        };
        self.punct(']')?;
        Ok(Access {
            operand,
            index,
            pad,
            spread: Vec::new(),
        })
    }

    fn index(&mut self) -> Result<Index, LoopParseError> {
        if self.peek() == Some(&Tok::Word("gather".into()))
            && self.toks.get(self.pos + 1).map(|t| &t.0) == Some(&Tok::Punct('('))
        {
            self.word()?;
            self.punct('(')?;
            let access = self.access()?;
            self.punct(',')?;
            let extent = self.number()?;
            self.punct(')')?;
            return Ok(Index::Gathered {
                access: Box::new(access),
                extent,
            });
        }
        // Terms: [-] (N | N*v | v), joined by + or -.
        let mut a = Affine::default();
        let mut sign = 1i64;
        if self.is_punct('-') {
            self.punct('-')?;
            sign = -1;
        }
        loop {
            let w = self.word()?;
            if let Some(v) = w
                .strip_prefix('-')
                .filter(|v| v.starts_with(|c: char| c.is_ascii_alphabetic()))
            {
                let l = self.loop_index(v)?;
                a = a.plus(l, -sign);
            } else if let Ok(c) = w.parse::<i64>() {
                if self.is_punct('*') {
                    self.punct('*')?;
                    let v = self.word()?;
                    let l = self.loop_index(&v)?;
                    a = a.plus(l, sign * c);
                } else {
                    a.offset += sign * c;
                }
            } else {
                let l = self.loop_index(&w)?;
                a = a.plus(l, sign);
            }
            if self.is_punct('+') {
                self.punct('+')?;
                sign = 1;
            } else if self.is_punct('-') {
                self.punct('-')?;
                sign = -1;
            } else {
                return Ok(Index::Affine(a));
            }
        }
    }

    fn scalar(&mut self) -> Result<Scalar, LoopParseError> {
        let w = self.word()?;
        let bad = |p: &Self| p.err(format!("bad constant '{w}'"));
        if let Some(v) = w.strip_suffix("f64") {
            return v.parse().map(Scalar::F64).or_else(|_| bad(self));
        }
        if let Some(v) = w.strip_suffix("i64") {
            return v.parse().map(Scalar::I64).or_else(|_| bad(self));
        }
        match w.as_str() {
            "true" => Ok(Scalar::Bool(true)),
            "false" => Ok(Scalar::Bool(false)),
            _ => w.parse().map(Scalar::F32).or_else(|_| bad(self)),
        }
    }

    fn expr(&mut self) -> Result<Expr, LoopParseError> {
        if self.is_punct('(') {
            self.punct('(')?;
            let a = self.expr()?;
            let op = match self.next()? {
                Tok::Punct('+') => BinaryOp::Add,
                Tok::Punct('-') => BinaryOp::Sub,
                Tok::Punct('*') => BinaryOp::Mul,
                Tok::Punct('/') => BinaryOp::Div,
                t => return self.err(format!("expected an operator, found {t:?}")),
            };
            let b = self.expr()?;
            self.punct(')')?;
            return Ok(Expr::binary(op, a, b));
        }
        let is_call = self.toks.get(self.pos + 1).map(|t| &t.0) == Some(&Tok::Punct('('))
            || self.toks.get(self.pos + 1).map(|t| &t.0) == Some(&Tok::Punct('<'));
        let is_access = self.toks.get(self.pos + 1).map(|t| &t.0) == Some(&Tok::Punct('['));
        if is_access {
            return Ok(Expr::Load(self.access()?));
        }
        if !is_call && self.peek() == Some(&Tok::Word("acc".into())) {
            self.pos += 1;
            return Ok(Expr::Acc);
        }
        if !is_call {
            return Ok(Expr::Const(self.scalar()?));
        }
        let f = self.word()?;
        if f == "cast" {
            self.punct('<')?;
            let d = self.word()?;
            let Some(d) = DType::from_name(&d) else {
                return self.err(format!("unknown element type '{d}'"));
            };
            self.punct('>')?;
            self.punct('(')?;
            let a = self.expr()?;
            self.punct(')')?;
            return Ok(Expr::Cast(d, Box::new(a)));
        }
        self.punct('(')?;
        let args = self.list(')', |p| p.expr())?;
        self.punct(')')?;
        let mut args = args.into_iter();
        let mut arg = |p: &Self| {
            args.next()
                .map_or_else(|| p.err(format!("{f} needs more operands")), Ok)
        };
        if let Some(u) = UnaryOp::ALL.into_iter().find(|u| u.name() == f) {
            return Ok(Expr::Unary(u, Box::new(arg(self)?)));
        }
        if let Some(b) = BinaryOp::ALL.into_iter().find(|b| b.name() == f) {
            let x = arg(self)?;
            return Ok(Expr::binary(b, x, arg(self)?));
        }
        if f == "select" {
            let (c, a) = (arg(self)?, arg(self)?);
            return Ok(Expr::Select(Box::new(c), Box::new(a), Box::new(arg(self)?)));
        }
        self.err(format!("unknown function '{f}'"))
    }

    fn loop_names(&mut self) -> Result<Vec<usize>, LoopParseError> {
        self.punct('[')?;
        let names = self.list(']', |p| p.word())?;
        self.punct(']')?;
        names.iter().map(|n| self.loop_index(n)).collect()
    }

    /// Numbers joined by `x` (`1x64x28`): a buffer's dimensions, a grid's parts.
    fn extents(&self, text: &str, what: &str) -> Result<Vec<usize>, LoopParseError> {
        text.split('x')
            .map(|d| d.parse())
            .collect::<Result<Vec<usize>, _>>()
            .or_else(|_| self.err(format!("bad {what} '{text}'")))
    }

    fn schedule(&mut self) -> Result<Schedule, LoopParseError> {
        self.keyword("partition")?;
        let partition = self.loop_names()?;
        let partition_points = self.number()?;
        self.keyword("points")?;
        self.punct(',')?;
        let mut grid = Vec::new();
        if self.peek() == Some(&Tok::Word("grid".into())) {
            self.word()?;
            let text = self.word()?;
            grid = self.extents(&text, "grid")?;
            self.punct(',')?;
        }
        let chunk: usize = self.number()?;
        self.keyword("per")?;
        self.keyword("CPE")?;
        self.keyword("tiles")?;
        let mut tiles = vec![1; self.loops.len()];
        let mut pairs = Vec::new();
        while self.peek() != Some(&Tok::Word("order".into())) {
            let l = self.word()?;
            self.punct(':')?;
            pairs.push((l, self.number::<usize>()?));
            if !self.is_punct(',') {
                break;
            }
            self.punct(',')?;
        }
        for (l, t) in pairs {
            tiles[self.loop_index(&l)?] = t;
        }
        self.keyword("order")?;
        let order = self.loop_names()?;
        let mut buffers = Vec::new();
        while self.peek() == Some(&Tok::Word("ldm".into())) {
            self.word()?;
            let t = self.name()?;
            self.punct(':')?;
            let elem_bytes = self
                .operand_of
                .get(&t)
                .map(|&o| self.program.tensor(self.operands[o]).ty.dtype.size_bytes());
            let Some(elem_bytes) = elem_bytes else {
                return self.err(format!("'{t}' is not an operand"));
            };
            let buffer = match self.word()?.as_str() {
                "direct" => Buffer {
                    dims: Vec::new(),
                    elem_bytes,
                    residence: Residence::Direct,
                    depth: 0,
                    double: false,
                    shared: None,
                    split: false,
                    posted: false,
                    room: 0,
                },
                "buffer" => {
                    let dims_text = self.word()?;
                    let dims = match dims_text.as_str() {
                        "scalar" => Vec::new(),
                        text => self.extents(text, "buffer dims")?,
                    };
                    self.keyword("at")?;
                    self.keyword("depth")?;
                    let depth = self.number()?;
                    let (mut double, mut shared, mut split, mut posted) = (false, None, false, false);
                    while self.is_punct(',') {
                        self.punct(',')?;
                        match self.word()?.as_str() {
                            "double" if !double && shared.is_none() => double = true,
                            "shared" if shared.is_none() => {
                                shared = Some(match self.word()?.as_str() {
                                    "along" => match self.word()?.as_str() {
                                        "rows" => MeshLine::Row,
                                        "columns" => MeshLine::Column,
                                        other => {
                                            return self.err(format!("expected 'rows' or 'columns', found '{other}'"))
                                        }
                                    },
                                    "across" => {
                                        self.keyword("the")?;
                                        self.keyword("mesh")?;
                                        MeshLine::Mesh
                                    }
                                    other => return self.err(format!("expected 'along' or 'across', found '{other}'")),
                                });
                                if self.peek() == Some(&Tok::Word("in".into())) {
                                    self.word()?;
                                    self.keyword("slices")?;
                                    split = true;
                                }
                            }
                            "posted" if shared.is_some() && !posted => posted = true,
                            other => {
                                return self.err(format!(
                                    "expected 'double', 'shared along rows|columns' (then perhaps 'in slices') or \
                                     'shared across the mesh', then perhaps 'posted', found '{other}'"
                                ))
                            }
                        }
                    }
                    Buffer {
                        dims,
                        elem_bytes,
                        residence: Residence::Buffer,
                        depth,
                        double,
                        shared,
                        split,
                        posted,
                        room: 0,
                    }
                }
                other => return self.err(format!("expected 'direct' or 'buffer', found '{other}'")),
            };
            buffers.push(buffer);
        }
        let ranges = (0..self.loops.len())
            .map(|l| crate::schedule::partition::range(&partition, &grid, chunk, l, self.loops[l].extent))
            .collect();
        Ok(Schedule {
            partition,
            partition_points,
            chunk,
            grid,
            ranges,
            tiles,
            order,
            buffers,
        })
    }
}
