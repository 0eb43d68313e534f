//! The text form of the graph IR, printing side.
//!
//! ```text
//! graph "tiny" {
//!   %x: f32[1,3] = input
//!   %b: f32[3] = const [0.5, -1.0, 2.0]
//!   %w: f32[3,4] = const splat 0.02
//!   %y: f32[1,3] = add(%x, %b) @"add_node"
//!   %p: f32[1,1,2,2] = max_pool(%q) {kernel=[2,2], strides=[2,2], dilations=[1,1], pads=[0,0,0,0], ceil_mode=false}
//!   output "y" = %y
//! }
//! ```
//! Names made of `[A-Za-z0-9_./-]` print bare after `%`; others are quoted. Floats print in
//! the shortest form that parses back to the same bits, so [`super::parse`] of [`print`]
//! rebuilds an identical graph.

use std::fmt::Write;

use super::{Data, Graph, Op, PoolKind, Tensor};

/// Knobs for [`print_with`].
#[derive(Clone, Copy, Debug, Default)]
pub struct PrintOptions {
    /// Print constants with more than this many elements (and not all equal) as
    /// `<N values>`, which the parser rejects. `None` prints every constant in full.
    pub elide_constants_above: Option<usize>,
}

/// Prints `g` in the text form, constants in full.
pub fn print(g: &Graph) -> String {
    print_with(g, PrintOptions::default())
}

pub fn print_with(g: &Graph, opts: PrintOptions) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "graph {} {{", quote(&g.name));
    for n in g.nodes() {
        let _ = write!(s, "  {}: {} = {}", value_name(&n.name), n.ty, n.op.name());
        if let Op::Const(t) = &n.op {
            s.push(' ');
            write_const(&mut s, t, opts);
        }
        if !n.inputs.is_empty() {
            let operands: Vec<String> = n.inputs.iter().map(|&i| value_name(&g.node(i).name)).collect();
            let _ = write!(s, "({})", operands.join(", "));
        }
        let attrs = attributes(&n.op);
        if !attrs.is_empty() {
            let parts: Vec<String> = attrs.into_iter().map(|(k, v)| format!("{k}={v}")).collect();
            let _ = write!(s, " {{{}}}", parts.join(", "));
        }
        if let Some(origin) = &n.origin {
            let _ = write!(s, " @{}", quote(origin));
        }
        if n.recomputed {
            s.push_str(" recomputed");
        }
        s.push('\n');
    }
    for o in &g.outputs {
        let _ = writeln!(s, "  output {} = {}", quote(&o.name), value_name(&g.node(o.node).name));
    }
    s.push_str("}\n");
    s
}

/// The attributes of an op as `(key, value text)` pairs, in the order the parser expects.
fn attributes(op: &Op) -> Vec<(&'static str, String)> {
    let list = |v: &[usize]| format!("{v:?}").replace(' ', "");
    match op {
        Op::Cast { to } => vec![("to", to.name().to_string())],
        Op::Conv(c) => vec![
            ("strides", list(&c.strides)),
            ("dilations", list(&c.dilations)),
            ("pads", list(&c.pads)),
            ("groups", c.groups.to_string()),
        ],
        Op::ConvTranspose {
            conv: c,
            output_padding,
        } => vec![
            ("strides", list(&c.strides)),
            ("dilations", list(&c.dilations)),
            ("pads", list(&c.pads)),
            ("groups", c.groups.to_string()),
            ("output_padding", list(output_padding)),
        ],
        Op::Pool(p) => {
            let mut a = vec![
                ("kernel", list(&p.kernel)),
                ("strides", list(&p.strides)),
                ("dilations", list(&p.dilations)),
                ("pads", list(&p.pads)),
                ("ceil_mode", p.ceil_mode.to_string()),
            ];
            if let PoolKind::Avg { count_include_pad } = p.kind {
                a.push(("count_include_pad", count_include_pad.to_string()));
            }
            a
        }
        Op::Reduce { axes, .. } => vec![("axes", list(axes))],
        Op::Reshape { shape } | Op::Broadcast { shape } => vec![("shape", list(shape))],
        Op::Transpose { perm } => vec![("perm", list(perm))],
        Op::Slice { starts, steps, sizes } => vec![
            ("starts", list(starts)),
            ("steps", format!("{steps:?}").replace(' ', "")),
            ("sizes", list(sizes)),
        ],
        Op::Pad { pads, value } => vec![("pads", list(pads)), ("value", format!("{value:?}"))],
        Op::Concat { axis } | Op::Gather { axis } => vec![("axis", axis.to_string())],
        Op::Input | Op::Const(_) | Op::Unary(_) | Op::Binary(_) | Op::Select | Op::MatMul => Vec::new(),
    }
}

fn write_const(s: &mut String, t: &Tensor, opts: PrintOptions) {
    if t.numel() > 1 && t.is_splat() {
        s.push_str("splat ");
        write_elements(s, t.data(), 1);
        return;
    }
    if opts.elide_constants_above.is_some_and(|limit| t.numel() > limit) {
        let _ = write!(s, "<{} values>", t.numel());
        return;
    }
    s.push('[');
    write_elements(s, t.data(), t.numel());
    s.push(']');
}

/// Writes the first `n` elements separated by `, `.
fn write_elements(s: &mut String, d: &Data, n: usize) {
    fn join<T: std::fmt::Debug>(s: &mut String, v: &[T]) {
        for (i, x) in v.iter().enumerate() {
            if i > 0 {
                s.push_str(", ");
            }
            let _ = write!(s, "{x:?}");
        }
    }
    match d {
        Data::F32(v) => join(s, &v[..n]),
        Data::F64(v) => join(s, &v[..n]),
        Data::I64(v) => join(s, &v[..n]),
        Data::Bool(v) => join(s, &v[..n]),
    }
}

/// True for names that print without quotes after `%`.
pub(super) fn is_bare_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(is_bare_char)
}

pub(super) fn is_bare_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-')
}

/// A node name as the text form writes it: `%name`, or `%"name"` when it needs quotes.
pub fn value_name(name: &str) -> String {
    if is_bare_name(name) {
        format!("%{name}")
    } else {
        format!("%{}", quote(name))
    }
}

/// A double-quoted string with `\\`, `\"`, `\n`, `\r`, `\t` and `\u{..}` escapes.
pub(super) fn quote(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            '\r' => q.push_str("\\r"),
            '\t' => q.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(q, "\\u{{{:x}}}", c as u32);
            }
            c => q.push(c),
        }
    }
    q.push('"');
    q
}
