//! swflow code generation: writes the host (MPE) and slave (CPE) C sources, headers, the
//! parameter file and the Makefile of a scheduled model; or compiles its kernels in-process
//! with Cranelift and runs them on the emulator ([`jit`]). Both start from each kernel's CPE
//! program ([`cpe`]).
//!
//! The output folder:
//! ```text
//! host/main.c              the four stages: arena, parameters and inputs, kernels, outputs
//! host/<k>.c               per kernel: fills its parameter struct, spawns, joins
//! slave/<k>_slave.c        per kernel: the CPE code (LDM tiles, DMA, compute loops)
//! slave/swflow_ldm.c       the LDM area all kernels share
//! include/<k>.h            per kernel: the host entry point
//! include/<k>_para.h       per kernel: the parameter struct
//! include/swflow_ldm.h     every kernel's LDM layout, with compile-time size checks
//! include/swflow_machine.h the target as the emulator models it: CPEs, LDM, timing
//! runtime/                 runtime-c: host helpers, slave helpers, emulator and SDK headers
//! params.bin               the constants, with a checked header
//! Makefile                 default (emulator), sunway, sunway-pro, check-sunway(-pro), run, clean
//! ```
//! File skeletons are handlebars templates under `codegen/templates/`; kernel bodies come
//! from their CPE programs ([`cpe`]). The same program and options give byte-identical files.

mod cost;
pub mod cpe;
pub mod jit;
pub mod names;
mod params;
mod scalar;
mod writer;

use std::collections::BTreeMap;
use std::path::Path;

use handlebars::Handlebars;
use serde_json::{json, Value};
use swflow_scheduler::loops::{Program, TensorId, TensorKind};
use swflow_scheduler::memplan::{self, MemoryPlan};
use swflow_scheduler::schedule::Schedule;
use swflow_scheduler::target::{Api, Target};

use names::{c_string, comment, Names};
use scalar::{ctype, dtype_enum};

pub use swflow_scheduler as scheduler;

/// A program that cannot be turned into C.
#[derive(Debug, thiserror::Error)]
pub enum CodegenError {
    #[error("kernel '{kernel}': {reason} are not supported by code generation")]
    Unsupported { kernel: String, reason: String },
    #[error("internal error: kernel '{kernel}': {reason}")]
    Internal { kernel: String, reason: String },
    #[error("internal error: template {name}: {reason}")]
    Template { name: String, reason: String },
}

/// The generated files, by path relative to the output folder.
pub struct Generated {
    pub files: BTreeMap<String, Vec<u8>>,
    /// The C function of each kernel of the program, in program order (the name the
    /// emulator reports the kernel by).
    pub kernel_functions: Vec<String>,
}

impl Generated {
    /// Writes every file under `dir` (created if missing).
    pub fn write_to(&self, dir: &Path) -> std::io::Result<()> {
        for (path, bytes) in &self.files {
            let full = dir.join(path);
            if let Some(parent) = full.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(full, bytes)?;
        }
        Ok(())
    }

    /// Bytes of the generated C sources and headers (runtime and params.bin excluded).
    pub fn source_bytes(&self) -> usize {
        self.files
            .iter()
            .filter(|(p, _)| !p.starts_with("runtime/") && (p.ends_with(".c") || p.ends_with(".h")))
            .map(|(_, b)| b.len())
            .sum()
    }
}

/// runtime-c, copied into every output folder.
const RUNTIME: &[(&str, &str)] = &[
    (
        "include/swflow_host.h",
        include_str!("../../runtime-c/include/swflow_host.h"),
    ),
    (
        "include/swflow_slave.h",
        include_str!("../../runtime-c/include/swflow_slave.h"),
    ),
    ("src/swflow_host.c", include_str!("../../runtime-c/src/swflow_host.c")),
    (
        "emulator/swflow_emu.h",
        include_str!("../../runtime-c/emulator/swflow_emu.h"),
    ),
    ("emulator/athread.h", include_str!("../../runtime-c/emulator/athread.h")),
    ("emulator/slave.h", include_str!("../../runtime-c/emulator/slave.h")),
    ("emulator/crts.h", include_str!("../../runtime-c/emulator/crts.h")),
    (
        "emulator/emulator.c",
        include_str!("../../runtime-c/emulator/emulator.c"),
    ),
    (
        "sdk/sw26010/athread.h",
        include_str!("../../runtime-c/sdk/sw26010/athread.h"),
    ),
    (
        "sdk/sw26010/slave.h",
        include_str!("../../runtime-c/sdk/sw26010/slave.h"),
    ),
    (
        "sdk/sw26010pro/crts.h",
        include_str!("../../runtime-c/sdk/sw26010pro/crts.h"),
    ),
];

/// Names derived from a kernel's function name: its host entry point, parameter struct and
/// header, LDM struct and its size check, and its CPE source file. The `slave_` name the
/// Sunway toolchains give the CPE function never equals a kernel's name: those begin `k_`.
const KERNEL_SUFFIXES: &[&str] = &["_run", "_para", "_ldm", "_fits_ldm", "_slave"];

const TEMPLATES: &[(&str, &str)] = &[
    ("slave", include_str!("../templates/slave.c.hbs")),
    ("host_kernel", include_str!("../templates/host_kernel.c.hbs")),
    ("kernel_h", include_str!("../templates/kernel.h.hbs")),
    ("para_h", include_str!("../templates/para.h.hbs")),
    ("ldm_h", include_str!("../templates/ldm.h.hbs")),
    ("ldm_c", include_str!("../templates/ldm.c.hbs")),
    ("main", include_str!("../templates/main.c.hbs")),
    ("makefile", include_str!("../templates/Makefile.hbs")),
];

struct Templates(Handlebars<'static>);

impl Templates {
    fn new() -> Result<Templates, CodegenError> {
        let mut hb = Handlebars::new();
        hb.set_strict_mode(true);
        hb.register_escape_fn(handlebars::no_escape);
        for (name, text) in TEMPLATES {
            hb.register_template_string(name, *text)
                .map_err(|e| CodegenError::Template {
                    name: name.to_string(),
                    reason: e.to_string(),
                })?;
        }
        Ok(Templates(hb))
    }

    fn render(&self, name: &str, data: &Value) -> Result<Vec<u8>, CodegenError> {
        self.0
            .render(name, data)
            .map(String::into_bytes)
            .map_err(|e| CodegenError::Template {
                name: name.to_string(),
                reason: e.to_string(),
            })
    }
}

/// Generates the output folder of a scheduled program. `emulator_lib` is the path the
/// Makefile's default build links the emulator from.
pub fn generate(p: &Program, target: &Target, emulator_lib: &str) -> Result<Generated, CodegenError> {
    let t = Templates::new()?;
    let plan = memplan::plan(p, target);
    let offset = |id: TensorId| -> usize {
        plan.offsets[p.storage(id).index()].expect("every tensor a kernel or output uses has a place in the arena")
    };
    let model = comment(&p.name);
    let target_name = comment(&target.name);
    let crts = target.api == Api::Crts;
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut funcs = kernel_function_names(p).into_iter();
    let mut kernels = Vec::new();
    let mut ldm_kernels = Vec::new();
    for k in &p.kernels {
        let s: &Schedule = k.schedule.as_ref().ok_or_else(|| CodegenError::Internal {
            kernel: k.name.clone(),
            reason: "kernel is not scheduled".into(),
        })?;
        let func = funcs.next().expect("a function name per kernel");
        let fields = cpe::Fields::of(p, k);
        let field_rows: Vec<Value> = fields
            .tensors
            .iter()
            .zip(&fields.decls)
            .map(|(&id, field)| {
                let info = p.tensor(id);
                json!({
                    "name": field.name,
                    "ctype": ctype(info.ty.dtype),
                    "offset": offset(id),
                    "tensor": comment(&info.name),
                    "ty": comment(&info.ty.to_string()),
                })
            })
            .collect();
        let program = cpe::build(p, k, fields)?;
        let node = k.origin.as_deref().map(comment);
        let op = comment(&k.op);
        let schedule: Vec<String> = s.describe(k, p).lines().map(|l| comment(l.trim())).collect();
        let guard = format!("{}_H", func.to_ascii_uppercase());
        let para_guard = format!("{}_PARA_H", func.to_ascii_uppercase());
        let data = json!({
            "func": func, "op": op, "node": node, "target": target_name,
            "schedule": schedule, "body": cpe::print_body(&program, &func), "fields": field_rows,
            "guard": guard, "para_guard": para_guard,
        });
        files.insert(format!("slave/{func}_slave.c"), t.render("slave", &data)?);
        files.insert(format!("host/{func}.c"), t.render("host_kernel", &data)?);
        files.insert(format!("include/{func}.h"), t.render("kernel_h", &data)?);
        let para = json!({"func": func, "fields": data["fields"], "guard": para_guard});
        files.insert(format!("include/{func}_para.h"), t.render("para_h", &para)?);
        ldm_kernels.push(json!({
            "func": func, "members": cpe::print_ldm_members(&program), "replies": program.replies,
        }));
        kernels.push(func);
    }
    let ldm_bytes = target.ldm_budget();
    let ldm = json!({"model": model, "kernels": ldm_kernels, "ldm_bytes": ldm_bytes, "target": target_name});
    files.insert("include/swflow_ldm.h".into(), t.render("ldm_h", &ldm)?);
    files.insert("slave/swflow_ldm.c".into(), t.render("ldm_c", &ldm)?);
    let (main, params_bin) = main_data(p, target, &plan, &kernels, &model)?;
    files.insert("host/main.c".into(), t.render("main", &main)?);
    files.insert("params.bin".into(), params_bin);
    let make = json!({
        "model": model, "target": target_name, "emulator_lib": emulator_lib,
        "crts": crts, "api": if crts { "CRTS" } else { "athread" },
        "kernels": kernels,
    });
    files.insert("Makefile".into(), t.render("makefile", &make)?);

    files.insert("include/swflow_machine.h".into(), machine_header(target).into_bytes());
    for (path, text) in RUNTIME {
        files.insert(format!("runtime/{path}"), text.as_bytes().to_vec());
    }
    Ok(Generated {
        files,
        kernel_functions: kernels,
    })
}

/// The C function of each kernel, in program order: the name the emulator reports it by.
pub fn kernel_function_names(p: &Program) -> Vec<String> {
    let mut global = Names::default();
    p.kernels
        .iter()
        .map(|k| global.fresh_with(&format!("k_{}", k.name), "k_", KERNEL_SUFFIXES))
        .collect()
}

/// `swflow_machine.h`: the target as runtime-c's emulator build starts it: `SWFLOW_CPES`,
/// `SWFLOW_LDM_BYTES` (the LDM left to data) and `SWFLOW_MACHINE`, the machine description
/// (clock, peak and timing parameters as TOML) that times the run. Programs written by hand
/// for the emulator use it too.
pub fn machine_header(target: &Target) -> String {
    let spec = toml::to_string(&target.machine_spec()).expect("a machine description serialises");
    format!(
        "/* The machine the swflow emulator models for {name}, generated by swflow from the\n \
         * target's description (parameters and their sources: the target file). */\n\
         #ifndef SWFLOW_MACHINE_H\n#define SWFLOW_MACHINE_H\n\n\
         #define SWFLOW_CPES {cpes}\n#define SWFLOW_LDM_BYTES {ldm}\n#define SWFLOW_MACHINE {text}\n\n#endif\n",
        name = comment(&target.name),
        cpes = target.cpes,
        ldm = target.ldm_budget(),
        text = c_string(&spec)
    )
}

/// The data of `host/main.c` and the parameter file.
fn main_data(
    p: &Program,
    target: &Target,
    plan: &MemoryPlan,
    kernels: &[String],
    model: &str,
) -> Result<(Value, Vec<u8>), CodegenError> {
    let offset = |id: TensorId| plan.offsets[p.storage(id).index()];
    let mut shapes = Vec::new();
    let mut describe = |kind: &str, i: usize, id: TensorId, name: &str| -> Value {
        let ty = &p.tensor(id).ty;
        let shape = if ty.shape.is_empty() {
            "NULL".to_string()
        } else {
            let n = format!("{kind}{i}_shape");
            let dims: Vec<String> = ty.shape.iter().map(|d| d.to_string()).collect();
            shapes.push(json!({"name": n, "count": dims.len(), "dims": dims.join(", ")}));
            n
        };
        json!({
            "name": c_string(name), "dtype": dtype_enum(ty.dtype), "rank": ty.shape.len(),
            "shape": shape, "offset": offset(id).unwrap_or(0),
        })
    };
    let inputs: Vec<Value> = p
        .inputs
        .iter()
        .enumerate()
        .map(|(i, &id)| describe("input", i, id, &p.tensor(id).name))
        .collect();
    let files = swflow_frontend::npy::output_file_names(p.outputs.iter().map(|(n, _)| n.as_str()));
    let outputs: Vec<Value> = p
        .outputs
        .iter()
        .zip(&files)
        .enumerate()
        .map(|(i, ((name, id), file))| {
            let mut v = describe("output", i, *id, name);
            v["file"] = json!(c_string(file));
            v
        })
        .collect();
    let mut records = Vec::new();
    for (i, t) in p.tensors.iter().enumerate() {
        if let (TensorKind::Const(c), Some(off)) = (&t.kind, plan.offsets[i]) {
            records.push((t.name.clone(), off, params::tensor_bytes(c)));
        }
    }
    let param_rows: Vec<Value> = records
        .iter()
        .map(|(name, off, bytes)| json!({"name": c_string(name), "offset": off, "bytes": bytes.len()}))
        .collect();
    let bin = params::encode(&records);
    if let Some(bad) = p
        .inputs
        .iter()
        .chain(p.outputs.iter().map(|(_, id)| id))
        .find(|&&id| offset(id).is_none())
    {
        return Err(CodegenError::Internal {
            kernel: p.tensor(*bad).name.clone(),
            reason: "an input or output has no place in the arena".into(),
        });
    }
    let data = json!({
        "model": model, "target": comment(&target.name), "kernels": kernels, "arena_bytes": plan.arena_bytes.max(1),
        "alignment": target.memory_alignment_bytes.max(16), "shapes": shapes,
        "inputs": inputs, "outputs": outputs, "params": param_rows,
        "n_inputs": p.inputs.len(), "n_outputs": p.outputs.len(), "n_params": records.len(),
    });
    Ok((data, bin))
}
