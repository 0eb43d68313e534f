//! Model names made safe for C: identifiers, string literals and comment text.
//!
//! Model files are untrusted input, so no name reaches the generated sources verbatim. An
//! identifier keeps only `[A-Za-z0-9_]` (everything else becomes `_`), never starts with a
//! digit, never is a C keyword, a reserved name (leading underscore), a macro-like name (all
//! capitals) or a name the generated code or its headers use, and is unique within its
//! [`Names`] scope. Strings become C literals with every byte outside printable ASCII escaped;
//! comment text cannot close its comment.

use std::collections::HashSet;

/// C keywords (C99 and C11) and names of the standard headers and the generated code that a
/// model-derived identifier must not take.
const RESERVED: &[&str] = &[
    "auto",
    "break",
    "case",
    "char",
    "const",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "extern",
    "float",
    "for",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "register",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "typedef",
    "union",
    "unsigned",
    "void",
    "volatile",
    "while",
    "asm",
    "typeof",
    "bool",
    "true",
    "false",
    "alignas",
    "alignof",
    "noreturn",
    "static_assert",
    "thread_local",
    "complex",
    "imaginary",
    "int64_t",
    "uint64_t",
    "size_t",
    "main",
    "arg",
    "arena",
    "ldm",
    "para",
    "cpe",
    "first",
    "last",
    "f",
    "seg_lo",
    "seg_len",
    "reply",
    "opt",
    "inputs",
    "outputs",
    "params",
    "repeat",
    "start",
    "elapsed",
    "r",
    "isnan",
    "isinf",
    "isfinite",
    "isnormal",
    "signbit",
    "fpclassify",
    "errno",
    "assert",
    "offsetof",
    "stdin",
    "stdout",
    "stderr",
    "abs",
    "exp",
    "expf",
    "log",
    "logf",
    "sqrt",
    "sqrtf",
    "pow",
    "powf",
    "tanh",
    "tanhf",
    "sin",
    "sinf",
    "fmod",
    "fmodf",
    "cos",
    "cosf",
    "erf",
    "erff",
    "fabs",
    "fabsf",
    "abort",
    "printf",
    "exit",
];

/// Prefixes of names that the runtime and SDK headers own.
const RESERVED_PREFIXES: &[&str] = &["swflow", "athread", "crts", "slave_", "ldm_", "__"];

/// A scope of unique C identifiers.
#[derive(Default)]
pub struct Names {
    taken: HashSet<String>,
}

impl Names {
    /// A fresh identifier for `name`, with `prefix` in front when the name alone is unsafe.
    pub fn fresh(&mut self, name: &str, prefix: &str) -> String {
        let mut base: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' })
            .collect();
        if base.len() > 48 {
            base.truncate(48);
        }
        if !is_safe(&base) {
            base = format!("{prefix}{base}");
        }
        let mut candidate = base.clone();
        let mut k = 2;
        while !self.taken.insert(candidate.clone()) {
            candidate = format!("{base}_{k}");
            k += 1;
        }
        candidate
    }

    /// Claims `name` (a fixed identifier of the generated code) so no fresh name takes it.
    pub fn claim(&mut self, name: &str) {
        self.taken.insert(name.to_string());
    }
}

fn is_safe(base: &str) -> bool {
    let lower = base.to_ascii_lowercase();
    !base.is_empty()
        && !base.starts_with(|c: char| c.is_ascii_digit() || c == '_')
        && !RESERVED.contains(&base)
        && !RESERVED_PREFIXES.iter().any(|p| lower.starts_with(p))
        && base.chars().any(|c| c.is_ascii_lowercase())
}

/// A C string literal holding the bytes of `s`.
pub fn c_string(s: &str) -> String {
    let mut out = String::from("\"");
    for &b in s.as_bytes() {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            // Escaped so that no trigraph can form.
            b'?' => out.push_str("\\?"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\{b:03o}")),
        }
    }
    out.push('"');
    out
}

/// `s` as text inside a `/* */` comment: printable ASCII only, on one line, unable to end
/// the comment or form a trigraph.
pub fn comment(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        let c = if (' '..='~').contains(&c) { c } else { '?' };
        if (c == '/' && out.ends_with('*')) || (c == '?' && out.ends_with('?')) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_valid_unique_and_not_reserved() {
        let mut n = Names::default();
        assert_eq!(n.fresh("conv1.w", "t_"), "conv1_w");
        assert_eq!(n.fresh("conv1/w", "t_"), "conv1_w_2");
        assert_eq!(n.fresh("int", "t_"), "t_int");
        assert_eq!(n.fresh("3x", "t_"), "t_3x");
        assert_eq!(n.fresh("", "t_"), "t_");
        assert_eq!(n.fresh("NAN", "t_"), "t_NAN");
        assert_eq!(n.fresh("_MYID", "t_"), "t__MYID");
        assert_eq!(n.fresh("swflow_ldm", "t_"), "t_swflow_ldm");
        assert_eq!(n.fresh("x */ y\n", "t_"), "x____y_");
        n.claim("cpe2");
        assert_eq!(n.fresh("cpe", "t_"), "t_cpe");
    }

    #[test]
    fn strings_escape_everything_unprintable() {
        assert_eq!(c_string("a\"b\\c\n??=é"), "\"a\\\"b\\\\c\\012\\?\\?=\\303\\251\"");
    }

    #[test]
    fn comments_cannot_be_closed() {
        assert_eq!(comment("x */ y\nz ??/"), "x * / y?z ? ?/");
    }
}
