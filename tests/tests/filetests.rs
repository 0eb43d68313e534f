//! Text-file tests of the graph IR, with their expectations inside the files.
//!
//! Each file under `tests/filetests/` starts with `#` directive lines, then a body:
//! - `# import: <path>` — the body is the graph the ONNX model at `<path>` (relative to the
//!   conformance data folder, e.g. `node/test_lrn`) imports to, in the text form, with the
//!   inputs that carry shapes or axes frozen to their test values;
//! - `# pass: simplify` — the body is a graph in the text form, a line `----`, and the graph
//!   that [`simplify`] makes of it;
//! - `# pass: fuse` — the body is a graph in the text form, a line `----`, the fusion plan
//!   ([`print_plan`]: each kernel-owning node with the nodes joined into it, and the rule
//!   that joined each) and the loop IR that lowering makes of the graph under that plan;
//! - `# pass: elide` — the body is a graph in the text form, a line `----`, the number of
//!   copies [`elide_copies`] removes from the loop IR of the fused graph, and that loop IR
//!   after it;
//! - `# pass: schedule` — the body is a graph in the text form, a line `----`, and the loop
//!   IR that the pipeline makes of it for SW26010, with every kernel's schedule;
//! - neither — the body is a graph in the text form; it must parse, and then either verify
//!   and print back exactly as written, or fail with the message of an `# error: <message>`
//!   directive.
//!
//! `SWFLOW_BLESS=1 cargo test --test filetests` rewrites the bodies and error directives from
//! what the code produces now; review the diff before committing it.

use std::path::{Path, PathBuf};

use swflow_frontend::fuse::{plan, print_plan};
use swflow_frontend::ir::{parse, print, verify};
use swflow_frontend::simplify::simplify;
use swflow_scheduler::elide::elide_copies;
use swflow_scheduler::loops::{print_program, verify_program};
use swflow_scheduler::lower::lower_fused;
use swflow_scheduler::pipeline::compile;
use swflow_scheduler::target::Target;
use swflow_tests::{conformance_dir, workspace_root, OnnxCase};

/// The line between a pass test's input and its result.
const SEPARATOR: &str = "----\n";

struct FileTest {
    path: PathBuf,
    directives: Vec<(String, String)>,
    body: String,
}

impl FileTest {
    fn load(path: &Path) -> FileTest {
        let text = std::fs::read_to_string(path).unwrap();
        let mut directives = Vec::new();
        let mut rest = text.as_str();
        while let Some(line) = rest.strip_prefix("# ") {
            let (line, tail) = line.split_once('\n').unwrap_or((line, ""));
            let (k, v) = line.split_once(':').unwrap_or((line, ""));
            directives.push((k.trim().to_string(), v.trim().to_string()));
            rest = tail;
        }
        FileTest {
            path: path.to_path_buf(),
            directives,
            body: rest.to_string(),
        }
    }

    fn directive(&self, key: &str) -> Option<&str> {
        self.directives.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    fn write(&self, directives: &[(String, String)], body: &str) {
        let mut text: String = directives
            .iter()
            .map(|(k, v)| {
                if v.is_empty() {
                    format!("# {k}\n")
                } else {
                    format!("# {k}: {v}\n")
                }
            })
            .collect();
        text.push_str(body);
        std::fs::write(&self.path, text).unwrap();
    }

    /// The body of a pass test: the input graph, the separator and the pass's result.
    fn pass_body(&self, pass: &str) -> Result<String, String> {
        let (input, _) = self.body.split_once(SEPARATOR).unwrap_or((&self.body, ""));
        let g = parse(input).map_err(|e| format!("input does not parse: {e}"))?;
        verify(&g).map_err(|e| format!("input does not verify: {e}"))?;
        let out = match pass {
            "simplify" => {
                let out = simplify(&g);
                verify(&out).map_err(|e| format!("the {pass} result does not verify: {e}"))?;
                print(&out)
            }
            "fuse" => {
                let plan = plan(&g);
                let p = lower_fused(&g, &plan).map_err(|e| format!("lowering the fused graph: {e}"))?;
                verify_program(&p).map_err(|e| format!("the fused loop IR does not verify: {e}"))?;
                format!("{}{}", print_plan(&g, &plan), print_program(&p))
            }
            "elide" => {
                let mut p = lower_fused(&g, &plan(&g)).map_err(|e| format!("lowering the fused graph: {e}"))?;
                let removed = elide_copies(&mut p, &Target::sw26010());
                verify_program(&p).map_err(|e| format!("the loop IR after eliding copies does not verify: {e}"))?;
                format!("copies removed: {removed}\n{}", print_program(&p))
            }
            "schedule" => {
                let p = compile(&g, &Target::sw26010()).map_err(|e| format!("compiling the graph: {e}"))?;
                print_program(&p)
            }
            _ => return Err(format!("unknown pass '{pass}'")),
        };
        Ok(format!("{input}{SEPARATOR}{out}"))
    }

    /// `Ok` when the file's expectations hold, else a description of the difference.
    fn run(&self, bless: bool) -> Result<(), String> {
        if let Some(pass) = self.directive("pass") {
            let actual = self.pass_body(pass)?;
            if actual == self.body {
                return Ok(());
            }
            if bless {
                self.write(&self.directives, &actual);
                return Ok(());
            }
            return Err(format!("body differs; expected:\n{}\nactual:\n{actual}", self.body));
        }
        let (actual_body, actual_error) = match self.directive("import") {
            Some(model) => {
                let case = OnnxCase::new(conformance_dir().map_err(|e| e.to_string())?.join(model));
                let g = case.import().map_err(|e| format!("{e:#}"))?;
                let text = print(&g);
                let again = parse(&text).map_err(|e| format!("printed graph does not parse: {e}"))?;
                if print(&again) != text {
                    return Err("printed graph does not round-trip".into());
                }
                (text, None)
            }
            None => match parse(&self.body) {
                Err(e) => (self.body.clone(), Some(format!("parse: {e}"))),
                Ok(g) => match verify(&g) {
                    Err(e) => (self.body.clone(), Some(format!("verify: {e}"))),
                    Ok(()) => (print(&g), None),
                },
            },
        };
        let expected_error = self.directive("error").map(str::to_string);
        if actual_body == self.body && actual_error == expected_error {
            return Ok(());
        }
        if bless {
            let mut directives: Vec<_> = self.directives.iter().filter(|(k, _)| k != "error").cloned().collect();
            if let Some(e) = actual_error {
                directives.push(("error".into(), e));
            }
            self.write(&directives, &actual_body);
            return Ok(());
        }
        if actual_error != expected_error {
            return Err(format!("expected error {expected_error:?}, got {actual_error:?}"));
        }
        Err(format!(
            "body differs; expected:\n{}\nactual:\n{actual_body}",
            self.body
        ))
    }
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            out.extend(files(&p));
        } else if p.extension().is_some_and(|e| e == "swg") {
            out.push(p);
        }
    }
    out.sort();
    out
}

#[test]
fn filetests() {
    let bless = std::env::var_os("SWFLOW_BLESS").is_some_and(|v| v == "1");
    let all = files(&workspace_root().join("tests/filetests"));
    assert!(!all.is_empty(), "no file tests found");
    let failures: Vec<String> = all
        .iter()
        .filter_map(|p| {
            FileTest::load(p)
                .run(bless)
                .err()
                .map(|e| format!("{}: {e}", p.display()))
        })
        .collect();
    println!(
        "filetests: {} passed, {} failed",
        all.len() - failures.len(),
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
