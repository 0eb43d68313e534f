//! Model names made safe for C: identifiers, string literals and comment text.
//!
//! Model files are untrusted input, so no name reaches the generated sources verbatim. An
//! identifier keeps only `[A-Za-z0-9_]` (everything else becomes `_`), never starts with a
//! digit, never is a C keyword, a reserved name (leading underscore), a macro-like name (all
//! capitals), a macro GCC predefines in GNU mode or a name the generated code or its headers
//! use, and is unique within its [`Names`] scope, ignoring case, together with the names
//! derived from it. Strings become C literals with `"`, `\`, `?` and every byte outside
//! printable ASCII escaped. Comment text is printable ASCII on one line that cannot
//! end its comment, open a nested one, form a trigraph or continue the line, whatever
//! surrounds it.

use std::collections::HashSet;

/// C keywords (C99 and C11), names of the standard headers and the generated code, and the
/// macros GCC predefines on Linux in GNU mode (the Sunway builds do not ask for strict C)
/// that a model-derived identifier must not take.
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
    "linux",
    "unix",
];

/// Prefixes of names that the runtime and SDK headers own.
const RESERVED_PREFIXES: &[&str] = &["swflow", "athread", "crts", "slave_", "ldm_", "__"];

/// A scope of unique C identifiers. Identifiers that differ in case only are not unique:
/// kernel names become file names and upper-case include guards.
#[derive(Default)]
pub struct Names {
    /// Every identifier of the scope, in lower case.
    taken: HashSet<String>,
}

impl Names {
    /// A fresh identifier for `name`, with `prefix` in front when the name alone is unsafe.
    pub fn fresh(&mut self, name: &str, prefix: &str) -> String {
        self.fresh_with(name, prefix, &[])
    }

    /// A fresh identifier for `name` such that it followed by each of `suffixes` is fresh too;
    /// all of these are taken.
    pub fn fresh_with(&mut self, name: &str, prefix: &str, suffixes: &[&str]) -> String {
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
        loop {
            let family: Vec<String> = std::iter::once("")
                .chain(suffixes.iter().copied())
                .map(|s| format!("{candidate}{s}").to_ascii_lowercase())
                .collect();
            if family.iter().all(|n| !self.taken.contains(n)) {
                self.taken.extend(family);
                return candidate;
            }
            candidate = format!("{base}_{k}");
            k += 1;
        }
    }

    /// Claims `name` (a fixed identifier of the generated code) so no fresh name takes it.
    pub fn claim(&mut self, name: &str) {
        self.taken.insert(name.to_ascii_lowercase());
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

/// `s` as text inside a `/* */` comment or a Makefile `#` comment: printable ASCII on one
/// line, safe wherever it is put inside the comment. Every character outside printable ASCII
/// and every `\` becomes `?`, so nothing continues the line; a space separates `/` and `*`
/// (in either order) and two `?`, so nothing ends the comment, opens a nested one or forms a
/// trigraph; and a `/`, `*` or `?` at either end gets a space outside it, so neither can
/// combine with the characters around the text.
pub fn comment(s: &str) -> String {
    const EDGE: [char; 3] = ['/', '*', '?'];
    let mut out = String::new();
    for c in s.chars() {
        let c = if (' '..='~').contains(&c) && c != '\\' { c } else { '?' };
        let joins = match out.chars().next_back() {
            None => EDGE.contains(&c),
            Some(prev) => matches!((prev, c), ('/', '*') | ('*', '/') | ('?', '?')),
        };
        if joins {
            out.push(' ');
        }
        out.push(c);
    }
    if out.ends_with(EDGE) {
        out.push(' ');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_valid_unique_and_not_reserved() {
        let long = "a".repeat(60);
        let table: &[(&str, &str)] = &[
            ("conv1.w", "conv1_w"),
            ("conv1/w", "conv1_w_2"),
            ("Conv1_w", "Conv1_w_3"),
            ("CONV1_W", "t_CONV1_W"),
            ("int", "t_int"),
            ("while", "t_while"),
            ("main", "t_main"),
            ("3x", "t_3x"),
            ("", "t_"),
            ("NAN", "t_NAN"),
            ("_MYID", "t__MYID"),
            ("__thread_local", "t___thread_local"),
            ("swflow_ldm", "t_swflow_ldm"),
            ("athread_spawn", "t_athread_spawn"),
            ("linux", "t_linux"),
            ("unix", "t_unix"),
            ("x */ y\n", "x____y_"),
            ("*/ #include <stdio.h> /*", "t_____include__stdio_h____"),
            ("<:%:", "t_____"),
            ("\\u0041 \\U0001F600", "t__u0041__U0001F600"),
            ("中文\u{2028}", "t____"),
            ("é\0", "t___"),
            ("a$b@c`d", "a_b_c_d"),
            (&long, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
            (&long, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa_2"),
        ];
        let mut n = Names::default();
        for (name, want) in table {
            assert_eq!(n.fresh(name, "t_"), *want, "{name:?}");
        }
        n.claim("Cpe2");
        assert_eq!(n.fresh("cpe2", "t_"), "cpe2_2");
    }

    #[test]
    fn identifiers_leave_room_for_their_derived_names() {
        let suffixes = &["_run", "_para"];
        let mut n = Names::default();
        assert_eq!(n.fresh_with("k_x", "k_", suffixes), "k_x");
        assert_eq!(n.fresh_with("k_x_para", "k_", suffixes), "k_x_para_2");
        assert_eq!(n.fresh_with("k_X", "k_", suffixes), "k_X_2");
        assert_eq!(n.fresh_with("k_y_run", "k_", suffixes), "k_y_run");
        assert_eq!(n.fresh_with("k_y", "k_", suffixes), "k_y_2");
        assert_eq!(n.fresh("k_x_RUN", "k_"), "k_x_RUN_2");
    }

    #[test]
    fn strings_escape_everything_unprintable() {
        let table: &[(&str, &str)] = &[
            ("", r#""""#),
            ("plain name", r#""plain name""#),
            ("a\"b", r#""a\"b""#),
            ("'c'", r#""'c'""#),
            ("back\\", r#""back\\""#),
            ("\\\n", r#""\\\012""#),
            ("\r\n\x0c\x0b\t\x7f", r#""\015\012\014\013\011\177""#),
            ("\0", r#""\000""#),
            ("\x001", r#""\0001""#),
            ("??= ??/ ??' ?", r#""\?\?= \?\?/ \?\?' \?""#),
            ("*/ /* //", r#""*/ /* //""#),
            (
                "%: %:%: <: :> <% %> # ## #include <stdio.h>",
                r#""%: %:%: <: :> <% %> # ## #include <stdio.h>""#,
            ),
            ("\\u0041 \\U0001F600", r#""\\u0041 \\U0001F600""#),
            ("é中\u{2028}😀", r#""\303\251\344\270\255\342\200\250\360\237\230\200""#),
            ("$@`", r#""$@`""#),
        ];
        for (s, want) in table {
            assert_eq!(c_string(s), *want, "{s:?}");
        }
    }

    #[test]
    fn comments_cannot_be_closed_nested_continued_or_trigraphed() {
        let table: &[(&str, &str)] = &[
            ("", ""),
            ("conv1.w f32[2,3]", "conv1.w f32[2,3]"),
            ("*/", " * / "),
            ("/*", " / * "),
            ("*/ #include <stdio.h> /*", " * / #include <stdio.h> / * "),
            ("a/*b*/c", "a/ *b* /c"),
            ("a/**/b", "a/ ** /b"),
            ("a*/*b", "a* / *b"),
            ("a//b", "a//b"),
            ("/", " / "),
            ("*", " * "),
            ("?", " ? "),
            ("a*", "a* "),
            ("/a", " /a"),
            ("x */ y\nz ??/", "x * / y?z ? ?/ "),
            ("line\\", "line? "),
            ("a\\\nb", "a? ?b"),
            ("a\\\r\nb", "a? ? ?b"),
            ("a\rb\x0cc\x0bd\0e\tf\x7fg", "a?b?c?d?e?f?g"),
            (
                "a ??/ ??= ??' ??( ??) ??! ??< ??> ??- b",
                "a ? ?/ ? ?= ? ?' ? ?( ? ?) ? ?! ? ?< ? ?> ? ?- b",
            ),
            ("a???b", "a? ? ?b"),
            ("a?\\b", "a? ?b"),
            (
                "%: %:%: <: :> <% %> # ## #define X 1",
                "%: %:%: <: :> <% %> # ## #define X 1",
            ),
            ("\\u0041 \\U0001F600", " ?u0041 ?U0001F600"),
            ("中文\u{2028}é", " ? ? ? ? "),
            ("\"q\" 'c' $@`", "\"q\" 'c' $@`"),
        ];
        for (s, want) in table {
            let got = comment(s);
            assert_eq!(got, *want, "{s:?}");
            assert!(got.bytes().all(|b| (b' '..=b'~').contains(&b) && b != b'\\'), "{got:?}");
            for bad in ["/*", "*/", "??"] {
                assert!(!got.contains(bad), "{got:?}");
            }
            assert!(
                !got.starts_with(['/', '*', '?']) && !got.ends_with(['/', '*', '?']),
                "{got:?}"
            );
        }
    }
}
