//! The text form of the graph IR, parsing side (see [`super::print`] for the syntax).

use std::collections::HashMap;
use std::sync::Arc;

use super::print::is_bare_char;
use super::{
    BinaryOp, ConvAttrs, DType, Data, Graph, Node, NodeId, Op, Output, PoolAttrs, PoolKind, ReduceKind, Tensor,
    TensorType, UnaryOp,
};

/// A syntax or reference error at a 1-based line and column.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {col}: {msg}")]
pub struct ParseError {
    pub line: usize,
    pub col: usize,
    pub msg: String,
}

/// Parses the text form. The result is not verified: run [`super::verify`] to check types.
pub fn parse(text: &str) -> Result<Graph, ParseError> {
    Parser {
        chars: text.chars().collect(),
        pos: 0,
        line: 1,
        col: 1,
    }
    .graph()
}

#[derive(Debug, PartialEq)]
enum Tok {
    /// `%name` or `%"quoted"`.
    Value(String),
    Str(String),
    /// A run of `[A-Za-z0-9_.+-]`: keywords, type names, numbers.
    Word(String),
    Punct(char),
    Eof,
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
    line: usize,
    col: usize,
}

type Attrs = HashMap<String, AttrValue>;

#[derive(Debug)]
enum AttrValue {
    Word(String),
    List(Vec<String>),
}

impl Parser {
    fn err<T>(&self, msg: impl Into<String>) -> Result<T, ParseError> {
        Err(ParseError {
            line: self.line,
            col: self.col,
            msg: msg.into(),
        })
    }

    fn bump(&mut self) -> Option<char> {
        let c = *self.chars.get(self.pos)?;
        self.pos += 1;
        if c == '\n' {
            self.line += 1;
            self.col = 1;
        } else {
            self.col += 1;
        }
        Some(c)
    }

    fn skip_space(&mut self) {
        while let Some(&c) = self.chars.get(self.pos) {
            if c == '#' {
                while self.chars.get(self.pos).is_some_and(|&c| c != '\n') {
                    self.bump();
                }
            } else if c.is_whitespace() {
                self.bump();
            } else {
                break;
            }
        }
    }

    fn peek(&mut self) -> Result<Tok, ParseError> {
        let (pos, line, col) = (self.pos, self.line, self.col);
        let t = self.next();
        (self.pos, self.line, self.col) = (pos, line, col);
        t
    }

    fn next(&mut self) -> Result<Tok, ParseError> {
        self.skip_space();
        let Some(c) = self.bump() else {
            return Ok(Tok::Eof);
        };
        match c {
            '%' => {
                if self.chars.get(self.pos) == Some(&'"') {
                    self.bump();
                    return Ok(Tok::Value(self.string_body()?));
                }
                let mut s = String::new();
                while let Some(&c) = self.chars.get(self.pos).filter(|&&c| is_bare_char(c)) {
                    s.push(c);
                    self.bump();
                }
                if s.is_empty() {
                    return self.err("expected a value name after '%'");
                }
                Ok(Tok::Value(s))
            }
            '"' => Ok(Tok::Str(self.string_body()?)),
            c if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '+') => {
                let mut s = c.to_string();
                while let Some(&c) = self
                    .chars
                    .get(self.pos)
                    .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '+'))
                {
                    s.push(c);
                    self.bump();
                }
                Ok(Tok::Word(s))
            }
            '{' | '}' | '(' | ')' | '[' | ']' | ',' | '=' | ':' | '@' | '<' | '>' => Ok(Tok::Punct(c)),
            c => self.err(format!("unexpected character {c:?}")),
        }
    }

    /// The rest of a quoted string after its opening quote.
    fn string_body(&mut self) -> Result<String, ParseError> {
        let mut s = String::new();
        loop {
            match self.bump() {
                None => return self.err("unterminated string"),
                Some('"') => return Ok(s),
                Some('\\') => match self.bump() {
                    Some('n') => s.push('\n'),
                    Some('r') => s.push('\r'),
                    Some('t') => s.push('\t'),
                    Some('"') => s.push('"'),
                    Some('\\') => s.push('\\'),
                    Some('u') => {
                        self.expect_char('{')?;
                        let mut hex = String::new();
                        while let Some(c) = self.bump().filter(|&c| c != '}') {
                            hex.push(c);
                        }
                        match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                            Some(c) => s.push(c),
                            None => return self.err(format!("bad unicode escape \\u{{{hex}}}")),
                        }
                    }
                    other => return self.err(format!("bad escape {other:?}")),
                },
                Some(c) => s.push(c),
            }
        }
    }

    fn expect_char(&mut self, c: char) -> Result<(), ParseError> {
        if self.bump() != Some(c) {
            return self.err(format!("expected '{c}'"));
        }
        Ok(())
    }

    fn expect(&mut self, p: char) -> Result<(), ParseError> {
        match self.next()? {
            Tok::Punct(c) if c == p => Ok(()),
            t => self.err(format!("expected '{p}', found {t:?}")),
        }
    }

    fn word(&mut self) -> Result<String, ParseError> {
        match self.next()? {
            Tok::Word(w) => Ok(w),
            t => self.err(format!("expected a word, found {t:?}")),
        }
    }

    fn string(&mut self) -> Result<String, ParseError> {
        match self.next()? {
            Tok::Str(s) => Ok(s),
            t => self.err(format!("expected a quoted string, found {t:?}")),
        }
    }

    fn graph(mut self) -> Result<Graph, ParseError> {
        if self.word()? != "graph" {
            return self.err("expected 'graph'");
        }
        let mut g = Graph::new(self.string()?);
        self.expect('{')?;
        let mut ids: HashMap<String, NodeId> = HashMap::new();
        loop {
            match self.next()? {
                Tok::Punct('}') => break,
                Tok::Value(name) => {
                    let node = self.node(name, &ids)?;
                    if ids.contains_key(&node.name) {
                        return self.err(format!("value %{} defined twice", node.name));
                    }
                    let name = node.name.clone();
                    ids.insert(name, g.push_unchecked(node));
                }
                Tok::Word(w) if w == "output" => {
                    let name = self.string()?;
                    self.expect('=')?;
                    let node = self.value_ref(&ids)?;
                    g.outputs.push(Output { name, node });
                }
                t => return self.err(format!("expected a node, an output or '}}', found {t:?}")),
            }
        }
        match self.next()? {
            Tok::Eof => Ok(g),
            t => self.err(format!("unexpected {t:?} after the graph")),
        }
    }

    fn value_ref(&mut self, ids: &HashMap<String, NodeId>) -> Result<NodeId, ParseError> {
        match self.next()? {
            Tok::Value(v) => match ids.get(&v) {
                Some(&id) => Ok(id),
                None => self.err(format!("value %{v} used before it is defined")),
            },
            t => self.err(format!("expected a value, found {t:?}")),
        }
    }

    fn ty(&mut self) -> Result<TensorType, ParseError> {
        let d = self.word()?;
        let Some(dtype) = DType::from_name(&d) else {
            return self.err(format!("unknown element type '{d}'"));
        };
        let shape = self
            .list()?
            .iter()
            .map(|w| self.usize_of(w))
            .collect::<Result<Vec<_>, _>>()?;
        TensorType::new(dtype, shape).or_else(|e| self.err(e.0))
    }

    /// `[w, w, ...]` as words.
    fn list(&mut self) -> Result<Vec<String>, ParseError> {
        self.expect('[')?;
        let mut items = Vec::new();
        if self.peek()? == Tok::Punct(']') {
            self.next()?;
            return Ok(items);
        }
        loop {
            items.push(self.word()?);
            match self.next()? {
                Tok::Punct(',') => {}
                Tok::Punct(']') => return Ok(items),
                t => return self.err(format!("expected ',' or ']', found {t:?}")),
            }
        }
    }

    fn usize_of(&self, w: &str) -> Result<usize, ParseError> {
        w.parse()
            .or_else(|_| self.err(format!("expected a non-negative integer, found '{w}'")))
    }

    fn node(&mut self, name: String, ids: &HashMap<String, NodeId>) -> Result<Node, ParseError> {
        self.expect(':')?;
        let ty = self.ty()?;
        self.expect('=')?;
        let opname = self.word()?;
        let mut inputs = Vec::new();
        let mut const_value = None;
        if opname == "const" {
            const_value = Some(self.const_data(&ty)?);
        }
        if self.peek()? == Tok::Punct('(') {
            self.next()?;
            loop {
                inputs.push(self.value_ref(ids)?);
                match self.next()? {
                    Tok::Punct(',') => {}
                    Tok::Punct(')') => break,
                    t => return self.err(format!("expected ',' or ')', found {t:?}")),
                }
            }
        }
        let mut attrs = Attrs::new();
        if self.peek()? == Tok::Punct('{') {
            self.next()?;
            loop {
                let key = self.word()?;
                self.expect('=')?;
                let value = if self.peek()? == Tok::Punct('[') {
                    AttrValue::List(self.list()?)
                } else {
                    AttrValue::Word(self.word()?)
                };
                attrs.insert(key, value);
                match self.next()? {
                    Tok::Punct(',') => {}
                    Tok::Punct('}') => break,
                    t => return self.err(format!("expected ',' or '}}', found {t:?}")),
                }
            }
        }
        let origin = if self.peek()? == Tok::Punct('@') {
            self.next()?;
            Some(self.string()?)
        } else {
            None
        };
        let recomputed = self.peek()? == Tok::Word("recomputed".into());
        if recomputed {
            self.next()?;
        }
        let op = match const_value {
            Some(t) => Op::Const(Arc::new(t)),
            None => self.op(&opname, &mut attrs)?,
        };
        if let Some(k) = attrs.keys().next() {
            return self.err(format!("unknown attribute '{k}' for {opname}"));
        }
        Ok(Node {
            name,
            op,
            inputs,
            ty,
            origin,
            recomputed,
        })
    }

    fn const_data(&mut self, ty: &TensorType) -> Result<Tensor, ParseError> {
        let n = ty.numel();
        let words = match self.peek()? {
            Tok::Word(w) if w == "splat" => {
                self.next()?;
                vec![self.word()?; n]
            }
            Tok::Punct('<') => return self.err("elided constant: print the graph with constants in full to parse it"),
            _ => self.list()?,
        };
        if words.len() != n {
            return self.err(format!("constant of type {ty} needs {n} values, found {}", words.len()));
        }
        fn all<T: std::str::FromStr>(p: &Parser, w: &[String]) -> Result<Vec<T>, ParseError> {
            w.iter()
                .map(|x| x.parse().or_else(|_| p.err(format!("bad constant element '{x}'"))))
                .collect()
        }
        let data = match ty.dtype {
            DType::F32 => Data::F32(all(self, &words)?),
            DType::F64 => Data::F64(all(self, &words)?),
            DType::I64 => Data::I64(all(self, &words)?),
            DType::Bool => Data::Bool(all(self, &words)?),
        };
        Tensor::new(ty.shape.clone(), data).or_else(|e| self.err(e.0))
    }

    fn take_list(&self, attrs: &mut Attrs, key: &str) -> Result<Vec<String>, ParseError> {
        match attrs.remove(key) {
            Some(AttrValue::List(v)) => Ok(v),
            Some(AttrValue::Word(_)) => self.err(format!("attribute '{key}' must be a list")),
            None => self.err(format!("missing attribute '{key}'")),
        }
    }

    fn take_word(&self, attrs: &mut Attrs, key: &str) -> Result<String, ParseError> {
        match attrs.remove(key) {
            Some(AttrValue::Word(w)) => Ok(w),
            Some(AttrValue::List(_)) => self.err(format!("attribute '{key}' must be a single value")),
            None => self.err(format!("missing attribute '{key}'")),
        }
    }

    fn usizes(&self, attrs: &mut Attrs, key: &str) -> Result<Vec<usize>, ParseError> {
        self.take_list(attrs, key)?.iter().map(|w| self.usize_of(w)).collect()
    }

    fn usize_attr(&self, attrs: &mut Attrs, key: &str) -> Result<usize, ParseError> {
        let w = self.take_word(attrs, key)?;
        self.usize_of(&w)
    }

    fn bool_attr(&self, attrs: &mut Attrs, key: &str) -> Result<bool, ParseError> {
        let w = self.take_word(attrs, key)?;
        w.parse()
            .or_else(|_| self.err(format!("attribute '{key}' must be true or false")))
    }

    fn conv_attrs(&self, attrs: &mut Attrs) -> Result<ConvAttrs, ParseError> {
        Ok(ConvAttrs {
            strides: self.usizes(attrs, "strides")?,
            dilations: self.usizes(attrs, "dilations")?,
            pads: self.usizes(attrs, "pads")?,
            groups: self.usize_attr(attrs, "groups")?,
        })
    }

    fn pool_attrs(&self, attrs: &mut Attrs, avg: bool) -> Result<PoolAttrs, ParseError> {
        Ok(PoolAttrs {
            kernel: self.usizes(attrs, "kernel")?,
            strides: self.usizes(attrs, "strides")?,
            dilations: self.usizes(attrs, "dilations")?,
            pads: self.usizes(attrs, "pads")?,
            ceil_mode: self.bool_attr(attrs, "ceil_mode")?,
            kind: if avg {
                PoolKind::Avg {
                    count_include_pad: self.bool_attr(attrs, "count_include_pad")?,
                }
            } else {
                PoolKind::Max
            },
        })
    }

    fn op(&self, name: &str, attrs: &mut Attrs) -> Result<Op, ParseError> {
        if let Some(u) = UnaryOp::ALL.into_iter().find(|u| u.name() == name) {
            return Ok(Op::Unary(u));
        }
        if let Some(b) = BinaryOp::ALL.into_iter().find(|b| b.name() == name) {
            return Ok(Op::Binary(b));
        }
        if let Some(kind) = [ReduceKind::Sum, ReduceKind::Max, ReduceKind::Min, ReduceKind::Prod]
            .into_iter()
            .find(|k| k.name() == name)
        {
            return Ok(Op::Reduce {
                kind,
                axes: self.usizes(attrs, "axes")?,
            });
        }
        Ok(match name {
            "input" => Op::Input,
            "select" => Op::Select,
            "matmul" => Op::MatMul,
            "cast" => {
                let to = self.take_word(attrs, "to")?;
                match DType::from_name(&to) {
                    Some(to) => Op::Cast { to },
                    None => return self.err(format!("unknown element type '{to}'")),
                }
            }
            "conv" => Op::Conv(self.conv_attrs(attrs)?),
            "conv_transpose" => Op::ConvTranspose {
                conv: self.conv_attrs(attrs)?,
                output_padding: self.usizes(attrs, "output_padding")?,
            },
            "max_pool" => Op::Pool(self.pool_attrs(attrs, false)?),
            "avg_pool" => Op::Pool(self.pool_attrs(attrs, true)?),
            "reshape" => Op::Reshape {
                shape: self.usizes(attrs, "shape")?,
            },
            "broadcast" => Op::Broadcast {
                shape: self.usizes(attrs, "shape")?,
            },
            "transpose" => Op::Transpose {
                perm: self.usizes(attrs, "perm")?,
            },
            "slice" => {
                let steps = self.take_list(attrs, "steps")?;
                let steps = steps
                    .iter()
                    .map(|w| w.parse().or_else(|_| self.err(format!("bad step '{w}'"))))
                    .collect::<Result<_, _>>()?;
                Op::Slice {
                    starts: self.usizes(attrs, "starts")?,
                    steps,
                    sizes: self.usizes(attrs, "sizes")?,
                }
            }
            "pad" => {
                let value = self.take_word(attrs, "value")?;
                Op::Pad {
                    pads: self.usizes(attrs, "pads")?,
                    value: value
                        .parse()
                        .or_else(|_| self.err(format!("bad pad value '{value}'")))?,
                }
            }
            "concat" => Op::Concat {
                axis: self.usize_attr(attrs, "axis")?,
            },
            "gather" => Op::Gather {
                axis: self.usize_attr(attrs, "axis")?,
            },
            _ => return self.err(format!("unknown op '{name}'")),
        })
    }
}
