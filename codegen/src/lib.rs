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
//! include/<k>_ldm.h        per kernel: its LDM layout, with a compile-time size check
//! include/swflow_ldm.h     the LDM area all kernels share: the union of their layouts
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
pub mod saved;
mod scalar;
pub mod travel;
pub mod tune;
mod writer;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use handlebars::Handlebars;
use serde_json::{json, Value};
use swflow_scheduler::loops::{Program, TensorId, TensorKind};
use swflow_scheduler::memplan::{self, MemoryPlan};
use swflow_scheduler::schedule::Schedule;
use swflow_scheduler::target::{Api, Target};

use names::{c_string, comment, Names};
use scalar::{ctype, dtype_enum};
use swflow_frontend::ir::Tensor;
use swflow_frontend::training::optim::{Optimizer, Scheduled, TrainingStep};
use swflow_frontend::training::GradProgram;

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
        "include/swflow_train.h",
        include_str!("../../runtime-c/include/swflow_train.h"),
    ),
    ("src/swflow_train.c", include_str!("../../runtime-c/src/swflow_train.c")),
    (
        "emulator/swflow_emu.h",
        include_str!("../../runtime-c/emulator/swflow_emu.h"),
    ),
    ("emulator/athread.h", include_str!("../../runtime-c/emulator/athread.h")),
    ("emulator/slave.h", include_str!("../../runtime-c/emulator/slave.h")),
    ("emulator/crts.h", include_str!("../../runtime-c/emulator/crts.h")),
    ("emulator/simd.h", include_str!("../../runtime-c/emulator/simd.h")),
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
    ("sdk/sw26010/simd.h", include_str!("../../runtime-c/sdk/sw26010/simd.h")),
    (
        "sdk/sw26010pro/crts.h",
        include_str!("../../runtime-c/sdk/sw26010pro/crts.h"),
    ),
    (
        "sdk/sw26010pro/simd.h",
        include_str!("../../runtime-c/sdk/sw26010pro/simd.h"),
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
    ("kernel_ldm_h", include_str!("../templates/kernel_ldm.h.hbs")),
    ("ldm_c", include_str!("../templates/ldm.c.hbs")),
    ("main", include_str!("../templates/main.c.hbs")),
    ("train", include_str!("../templates/train.c.hbs")),
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
/// What turns a compiled training step into a training program (`host/main.c` from
/// `templates/train.c.hbs`, the loop in runtime-c's `swflow_train.c`). Names are the
/// program's input and output names.
#[derive(Clone, Debug)]
pub struct TrainingSpec {
    /// Inputs taken one batch at a time along their first axis, all with the same batch.
    pub batched: Vec<String>,
    /// Which of `batched` holds the labels.
    pub labels: Option<String>,
    /// The number of classes the labels index (0: the labels are not class indices).
    pub classes: usize,
    /// Parameters and running statistics: input, the output holding its next value, and its
    /// initial value.
    pub params: Vec<(String, String, Arc<Tensor>)>,
    /// Optimizer state (zero at first): input and the output holding its next value.
    pub state: Vec<(String, String)>,
    /// Scalars the step number sets: input, kind (`swflow_scheduled_kind`), and the
    /// constants `a` and `b` of its formula.
    pub scheduled: Vec<(String, u8, f64, f64)>,
    /// Dropout noise filled before every step: input and stream number
    /// ([`swflow_frontend::random::dropout_noise`]).
    pub noise: Vec<(String, usize)>,
}

impl TrainingSpec {
    /// The spec of `step`, the training step of `program` with `optimizer`: the batched inputs
    /// are the data inputs, then the labels; the parameters start at their initializers.
    pub fn new(step: &TrainingStep, program: &GradProgram, optimizer: &Optimizer) -> Result<TrainingSpec, String> {
        let g = &step.graph;
        let labels = program.labels.as_ref().map(|(n, _)| n.clone());
        let carried: Vec<&String> = step
            .params
            .iter()
            .chain(&step.state)
            .chain(&step.buffers)
            .chain(step.scheduled.iter().map(|(n, _)| n))
            .chain(&step.noise)
            .collect();
        let mut batched: Vec<String> = g
            .inputs()
            .map(|id| g.node(id).name.clone())
            .filter(|n| !carried.contains(&n) && Some(n) != labels.as_ref())
            .collect();
        batched.extend(labels.clone());
        let first_dim = |n: &String| {
            g.inputs()
                .find(|&id| g.node(id).name == *n)
                .and_then(|id| g.node(id).ty.shape.first().copied())
        };
        let sizes: Vec<Option<usize>> = batched.iter().map(first_dim).collect();
        if sizes.iter().any(|s| s.is_none() || *s != sizes[0]) {
            return Err(format!(
                "a training program takes its data a batch at a time along the first axis, but the inputs {} do not share a batch size",
                batched.join(", ")
            ));
        }
        let updates = step.updates();
        let (np, ns) = (step.params.len(), step.state.len());
        // Running statistics start at their initializers and are written with the parameters.
        let params = updates[..np]
            .iter()
            .chain(&updates[np + ns..])
            .map(|(name, out)| {
                let value = program
                    .parameters
                    .get(name)
                    .ok_or_else(|| format!("no initial value for parameter '{name}'"))?;
                Ok((name.clone(), out.clone(), Arc::new(value.clone())))
            })
            .collect::<Result<Vec<_>, String>>()?;
        let state = updates[np..np + ns].to_vec();
        let scheduled = step
            .scheduled
            .iter()
            .map(|(name, kind)| match (kind, optimizer) {
                (Scheduled::AdamStepSize, Optimizer::Adam { lr, beta1, .. }) => Ok((name.clone(), 0, *lr, *beta1)),
                (Scheduled::AdamBias2Sqrt, Optimizer::Adam { beta2, .. }) => Ok((name.clone(), 1, 0.0, *beta2)),
                _ => Err(format!("input '{name}' has no schedule for this optimizer")),
            })
            .collect::<Result<Vec<_>, String>>()?;
        let noise = step
            .noise
            .iter()
            .enumerate()
            .filter(|(_, n)| g.inputs().any(|id| g.node(id).name == **n))
            .map(|(k, n)| (n.clone(), k))
            .collect();
        Ok(TrainingSpec {
            batched,
            labels,
            classes: program.classes.unwrap_or(0),
            params,
            state,
            scheduled,
            noise,
        })
    }
}

/// Where a gradient program writes its outputs: the loss and gradients under the names `run
/// --grad` uses, and an index naming the gradients' files.
#[derive(Clone, Debug)]
pub struct GradientLayout {
    /// One path per program output, relative to the output folder (`loss.npy`,
    /// `grad/<name>.npy`).
    pub files: Vec<String>,
    /// The text of `gradients.json`.
    pub index: String,
    /// Inputs whose values the parameter file holds (the parameters, at their initializers'
    /// values); the program does not take them as inputs.
    pub params: Vec<(String, Arc<Tensor>)>,
}

/// What `host/main.c` does with the kernels.
enum Main<'a> {
    /// Run once, write one file per output.
    Inference,
    /// Run once, write the outputs as a gradient program's files.
    Gradient(&'a GradientLayout),
    /// Run once per batch: a training program.
    Training(&'a TrainingSpec),
}

pub fn generate(p: &Program, target: &Target, emulator_lib: &str) -> Result<Generated, CodegenError> {
    generate_with(p, target, emulator_lib, Main::Inference)
}

/// [`generate`] for a gradient program, whose outputs are written as `layout` says.
pub fn generate_gradient(
    p: &Program,
    target: &Target,
    emulator_lib: &str,
    layout: &GradientLayout,
) -> Result<Generated, CodegenError> {
    if layout.files.len() != p.outputs.len() {
        return Err(CodegenError::Internal {
            kernel: p.name.clone(),
            reason: format!("{} output files for {} outputs", layout.files.len(), p.outputs.len()),
        });
    }
    generate_with(p, target, emulator_lib, Main::Gradient(layout))
}

/// [`generate`] for a training step: the program's updates (`Program::updates`) should pair
/// each parameter and state input with its output, so that the memory plan can store them in
/// place; the first output is the loss.
pub fn generate_training(
    p: &Program,
    target: &Target,
    emulator_lib: &str,
    spec: &TrainingSpec,
) -> Result<Generated, CodegenError> {
    generate_with(p, target, emulator_lib, Main::Training(spec))
}

fn generate_with(p: &Program, target: &Target, emulator_lib: &str, main: Main) -> Result<Generated, CodegenError> {
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
    let ldm_bytes = target.ldm_budget();
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
        let program = cpe::build(p, k, fields, target)?;
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
        let ldm = json!({
            "func": func, "members": cpe::print_ldm_members(&program), "replies": program.replies,
            "guard": format!("{}_LDM_H", func.to_ascii_uppercase()),
            "ldm_bytes": ldm_bytes, "target": target_name,
        });
        files.insert(format!("include/{func}_ldm.h"), t.render("kernel_ldm_h", &ldm)?);
        ldm_kernels.push(json!({"func": func}));
        kernels.push(func);
    }
    let ldm = json!({"model": model, "kernels": ldm_kernels});
    files.insert("include/swflow_ldm.h".into(), t.render("ldm_h", &ldm)?);
    files.insert("slave/swflow_ldm.c".into(), t.render("ldm_c", &ldm)?);
    let (main, params_bin) = match main {
        Main::Inference => {
            let (main, bin) = main_data(p, target, &plan, &kernels, &model, &[])?;
            (t.render("main", &main)?, bin)
        }
        Main::Gradient(layout) => {
            let (mut main, bin) = main_data(p, target, &plan, &kernels, &model, &layout.params)?;
            for (row, file) in main["outputs"].as_array_mut().into_iter().flatten().zip(&layout.files) {
                row["file"] = json!(c_string(file));
            }
            main["index"] = json!(c_string(&layout.index));
            (t.render("main", &main)?, bin)
        }
        Main::Training(spec) => {
            let (main, bin) = training_data(p, target, &plan, &kernels, &model, spec)?;
            (t.render("train", &main)?, bin)
        }
    };
    files.insert("host/main.c".into(), main);
    files.insert("params.bin".into(), params_bin);
    let make = json!({
        "model": model, "target": target_name, "emulator_lib": emulator_lib,
        "crts": crts, "api": if crts { "CRTS" } else { "athread" },
        "kernels": kernels, "vector": vector_type(target),
        "not_sw": !matches!(target.f32_vector_lanes, 1 | 4),
        "not_swpro": !matches!(target.f32_vector_lanes, 1 | 8),
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

/// The C type of the target's f32 vectors (none without vectors): SW26010's `floatv4` or
/// SW26010-Pro's `floatv8`, which tie the CPE code to that machine.
fn vector_type(target: &Target) -> Option<String> {
    (target.f32_vector_lanes > 1).then(|| format!("floatv{}", target.f32_vector_lanes))
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
/// (clock, peak and timing parameters as TOML) that times the run; and `SWFLOW_F32_LANES`,
/// the f32 lanes of the CPEs' vectors, which runtime-c's CPE helpers use on every build.
/// Programs written by hand for the emulator use it too.
pub fn machine_header(target: &Target) -> String {
    let spec = toml::to_string(&target.machine_spec()).expect("a machine description serialises");
    format!(
        "/* The machine the swflow emulator models for {name}, generated by swflow from the\n \
         * target's description (parameters and their sources: the target file). */\n\
         #ifndef SWFLOW_MACHINE_H\n#define SWFLOW_MACHINE_H\n\n\
         #define SWFLOW_CPES {cpes}\n#define SWFLOW_LDM_BYTES {ldm}\n#define SWFLOW_F32_LANES {lanes}\n\
         #define SWFLOW_MACHINE {text}\n\n#endif\n",
        name = comment(&target.name),
        cpes = target.cpes,
        lanes = target.f32_vector_lanes,
        ldm = target.ldm_budget(),
        text = c_string(&spec)
    )
}

/// A row of a `swflow_tensor_desc` table for tensor `id` under `name`; a non-scalar's shape
/// becomes the array `<key>_shape`, added to `shapes`.
fn tensor_row(p: &Program, shapes: &mut Vec<Value>, key: &str, id: TensorId, name: &str) -> Value {
    let ty = &p.tensor(id).ty;
    let shape = if ty.shape.is_empty() {
        "NULL".to_string()
    } else {
        let n = format!("{key}_shape");
        let dims: Vec<String> = ty.shape.iter().map(|d| d.to_string()).collect();
        shapes.push(json!({"name": n, "count": dims.len(), "dims": dims.join(", ")}));
        n
    };
    json!({"name": c_string(name), "dtype": dtype_enum(ty.dtype), "rank": ty.shape.len(), "shape": shape})
}

/// The data of `host/main.c` and the parameter file.
fn main_data(
    p: &Program,
    target: &Target,
    plan: &MemoryPlan,
    kernels: &[String],
    model: &str,
    preset: &[(String, Arc<Tensor>)],
) -> Result<(Value, Vec<u8>), CodegenError> {
    let offset = |id: TensorId| plan.offsets[p.storage(id).index()];
    let is_preset = |id: TensorId| preset.iter().any(|(n, _)| *n == p.tensor(id).name);
    let mut shapes = Vec::new();
    let mut describe = |kind: &str, i: usize, id: TensorId, name: &str| -> Value {
        let mut v = tensor_row(p, &mut shapes, &format!("{kind}{i}"), id, name);
        v["offset"] = json!(offset(id).unwrap_or(0));
        v
    };
    let inputs: Vec<Value> = p
        .inputs
        .iter()
        .zip(&p.index_extents)
        .filter(|&(&id, _)| !is_preset(id))
        .enumerate()
        .map(|(i, (&id, extent))| {
            let mut row = describe("input", i, id, &p.tensor(id).name);
            row["index_extent"] = json!(extent.unwrap_or(0));
            row
        })
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
    for (name, value) in preset {
        let id = p.inputs.iter().copied().find(|&t| p.tensor(t).name == *name);
        let off = id.and_then(offset).ok_or_else(|| CodegenError::Internal {
            kernel: name.clone(),
            reason: "a preset input has no place in the arena".into(),
        })?;
        records.push((name.clone(), off, params::tensor_bytes(value)));
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
        "n_inputs": inputs.len(), "n_outputs": p.outputs.len(), "n_params": records.len(),
    });
    Ok((data, bin))
}

/// The data of a training program's `host/main.c` and its parameter file: [`main_data`]'s,
/// with the initial parameters among the records and the tables of `templates/train.c.hbs`.
fn training_data(
    p: &Program,
    target: &Target,
    plan: &MemoryPlan,
    kernels: &[String],
    model: &str,
    spec: &TrainingSpec,
) -> Result<(Value, Vec<u8>), CodegenError> {
    let fail = |name: &str, reason: &str| CodegenError::Internal {
        kernel: name.to_string(),
        reason: reason.to_string(),
    };
    let input = |name: &str| {
        p.inputs
            .iter()
            .copied()
            .find(|&t| p.tensor(t).name == name)
            .ok_or_else(|| fail(name, "is not an input of the training step"))
    };
    let output = |name: &str| {
        p.outputs
            .iter()
            .find(|(n, _)| n == name)
            .map(|&(_, t)| t)
            .ok_or_else(|| fail(name, "is not an output of the training step"))
    };
    let offset = |id: TensorId| {
        plan.offsets[p.storage(id).index()].ok_or_else(|| fail(&p.tensor(id).name, "has no place in the arena"))
    };
    let initial: Vec<(String, Arc<Tensor>)> = spec.params.iter().map(|(n, _, v)| (n.clone(), v.clone())).collect();
    let (mut data, bin) = main_data(p, target, plan, kernels, model, &initial)?;
    // The training main declares only its own tables' shapes (an unused one would be an
    // unused-variable error).
    let mut shapes: Vec<Value> = Vec::new();
    let mut describe =
        |kind: &str, i: usize, id: TensorId| tensor_row(p, &mut shapes, &format!("{kind}{i}"), id, &p.tensor(id).name);
    let mut batched = Vec::new();
    for (i, name) in spec.batched.iter().enumerate() {
        let id = input(name)?;
        let mut v = describe("batched", i, id);
        v["offset"] = json!(offset(id)?);
        batched.push(v);
    }
    let updates =
        |kind: &str, pairs: Vec<(&String, &String)>, describe: &mut dyn FnMut(&str, usize, TensorId) -> Value| {
            let files = swflow_frontend::npy::output_file_names(pairs.iter().map(|(i, _)| i.as_str()));
            pairs
                .iter()
                .zip(&files)
                .enumerate()
                .map(|(i, ((inp, out), file))| {
                    let id = input(inp)?;
                    let mut v = describe(kind, i, id);
                    v["file"] = json!(c_string(file));
                    v["offset"] = json!(offset(id)?);
                    v["next"] = json!(offset(output(out)?)?);
                    Ok(v)
                })
                .collect::<Result<Vec<Value>, CodegenError>>()
        };
    let weights = updates(
        "weight",
        spec.params.iter().map(|(i, o, _)| (i, o)).collect(),
        &mut describe,
    )?;
    let state = updates("state", spec.state.iter().map(|(i, o)| (i, o)).collect(), &mut describe)?;
    let mut scheduled = Vec::new();
    for (name, kind, a, b) in &spec.scheduled {
        let id = input(name)?;
        scheduled.push(json!({
            "name": c_string(name), "dtype": dtype_enum(p.tensor(id).ty.dtype), "offset": offset(id)?,
            "kind": kind, "a": format!("{a:?}"), "b": format!("{b:?}"),
        }));
    }
    let mut noise = Vec::new();
    for (name, stream) in &spec.noise {
        let id = input(name)?;
        noise.push(json!({
            "name": c_string(name), "count": p.tensor(id).ty.numel(), "stream": stream, "offset": offset(id)?,
        }));
    }
    let (_, loss) = p.outputs.first().ok_or_else(|| fail(&p.name, "has no loss output"))?;
    let labels = match &spec.labels {
        Some(l) => spec
            .batched
            .iter()
            .position(|b| b == l)
            .ok_or_else(|| fail(l, "is not a batched input"))? as i64,
        None => -1,
    };
    data["shapes"] = json!(shapes);
    data["batched"] = json!(batched);
    data["n_batched"] = json!(spec.batched.len());
    data["labels"] = json!(labels);
    data["classes"] = json!(spec.classes);
    data["weights"] = json!(weights);
    data["n_weights"] = json!(spec.params.len());
    data["state"] = json!(state);
    data["n_state"] = json!(spec.state.len());
    data["scheduled"] = json!(scheduled);
    data["n_scheduled"] = json!(spec.scheduled.len());
    data["noise"] = json!(noise);
    data["n_noise"] = json!(spec.noise.len());
    data["loss_dtype"] = json!(dtype_enum(p.tensor(*loss).ty.dtype));
    data["loss_offset"] = json!(offset(*loss)?);
    Ok((data, bin))
}
