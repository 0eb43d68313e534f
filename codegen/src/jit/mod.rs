//! The Cranelift JIT: a scheduled program compiled in-process and run on the emulator.
//!
//! [`compile`] verifies the program (the loop-IR verifier and each kernel's schedule), turns
//! every kernel into its CPE program (the same one the C is printed from) and compiles that
//! with Cranelift into a kernel function. [`JitProgram::run`] plays the host: it lays out the
//! arena as the generated `main.c` does, loads constants and inputs, starts a machine of the
//! target, launches the kernels in order with their parameter structs, and reads the outputs.
//! The kernels call the emulator only through its hooks, so a run gives the same counters and
//! modelled time as the C of the same schedule, and a violation comes back as an error naming
//! the kernel and the CPE. `SWFLOW_DUMP=jit` prints each kernel's machine code to stderr.

mod arena;
mod lower;
mod runtime;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};

use cranelift_codegen::ir::{types, AbiParam, UserFuncName};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::Context;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, FuncId, Linkage, Module};
use swflow_emulator::report::Report;
use swflow_emulator::trace::TraceWriter;
use swflow_emulator::{KernelFn, KernelStats, Machine, Violation};
use swflow_frontend::ir::{DType, Data, Tensor};
use swflow_scheduler::loops::{verify_program, LoopVerifyError, Program, TensorId, TensorKind};
use swflow_scheduler::memplan;
use swflow_scheduler::schedule::verify_schedule;
use swflow_scheduler::target::{Api, Target};

use crate::cpe::{self, Fields, Func};
use crate::{kernel_function_names, params, CodegenError};
use arena::Arena;
use runtime::{Callee, Pool};

/// Why a program cannot be compiled or run by the JIT.
#[derive(Debug, thiserror::Error)]
pub enum JitError {
    #[error(transparent)]
    Verify(#[from] LoopVerifyError),
    #[error("kernel '{kernel}': its schedule is invalid: {reason}")]
    Schedule { kernel: String, reason: String },
    #[error(transparent)]
    Codegen(#[from] CodegenError),
    #[error("kernel '{kernel}': {reason}")]
    Compile { kernel: String, reason: String },
    #[error("program expects {expected} inputs, {given} were given")]
    Inputs { expected: usize, given: usize },
    #[error("input '{name}' must be {expected}, got {given}")]
    InputType {
        name: String,
        expected: String,
        given: String,
    },
    /// The machine stopped a kernel (its message names the kernel and CPE).
    #[error("{0}")]
    Run(Violation),
    #[error("writing the trace {path}: {source}")]
    Trace { path: String, source: std::io::Error },
}

/// A kernel compiled to native code.
struct JitKernel {
    /// The name the emulator reports it by: its C function's name.
    name: String,
    entry: KernelFn,
    /// The tensor of each parameter-struct field.
    fields: Vec<TensorId>,
    /// Its CPEs exchange registers, so each runs on a thread of its own.
    communicates: bool,
}

/// A program's kernels, compiled. Their code lives as long as this value.
pub struct JitProgram {
    module: Option<JITModule>,
    kernels: Vec<JitKernel>,
    /// Constants the code points to.
    _pool: Pool,
}

impl Drop for JitProgram {
    fn drop(&mut self) {
        if let Some(m) = self.module.take() {
            // SAFETY: the kernels' function pointers die with `self`; no launch is running,
            // since `run` joins every launch before it returns.
            unsafe { m.free_memory() };
        }
    }
}

/// What a run produced.
pub struct JitRun {
    pub outputs: Vec<Tensor>,
    /// Counters and modelled time per kernel, by kernel name.
    pub stats: BTreeMap<String, KernelStats>,
    /// The emulator's report of the run, as a C program writes it with `SWFLOW_STATS`.
    pub report: Report,
    /// Modelled time of the whole run, seconds: the report's total, as `SWFLOW_STATS` and
    /// `swflow bench` give it.
    pub modelled_seconds: f64,
}

fn compile_error(kernel: &str, reason: impl ToString) -> JitError {
    JitError::Compile {
        kernel: kernel.to_string(),
        reason: reason.to_string(),
    }
}

/// Verifies and compiles every kernel of `p`, scheduled for `target`.
pub fn compile(p: &Program, target: &Target) -> Result<JitProgram, JitError> {
    compile_edited(p, target, &mut |_, _| {})
}

/// [`compile`], with `edit` applied to each kernel's CPE program (named by its kernel's
/// function name) before it is compiled: how tests break a kernel on purpose, as they edit
/// generated C.
pub fn compile_edited(
    p: &Program,
    target: &Target,
    edit: &mut dyn FnMut(&str, &mut Func),
) -> Result<JitProgram, JitError> {
    verify_program(p)?;
    let mut flags = settings::builder();
    let set = |flags: &mut settings::Builder, k: &str, v: &str| flags.set(k, v).map_err(|e| compile_error("(all)", e));
    set(&mut flags, "use_colocated_libcalls", "false")?;
    set(&mut flags, "is_pic", "false")?;
    set(&mut flags, "opt_level", "speed")?;
    // Cranelift's own IR verifier checks what the lowering builds in debug builds; release
    // builds skip it, for compile time.
    set(
        &mut flags,
        "enable_verifier",
        if cfg!(debug_assertions) { "true" } else { "false" },
    )?;
    let isa = cranelift_native::builder()
        .map_err(|e| compile_error("(all)", format!("this host is not supported: {e}")))?
        .finish(settings::Flags::new(flags))
        .map_err(|e| compile_error("(all)", e))?;
    let mut jb = JITBuilder::with_isa(isa, default_libcall_names());
    for c in Callee::all() {
        jb.symbol(c.symbol(), c.address());
    }
    let mut module = JITModule::new(jb);
    let call_conv = module.isa().default_call_conv();
    let mut imports: Vec<(Callee, FuncId)> = Vec::new();
    for c in Callee::all() {
        let id = module
            .declare_function(&c.symbol(), Linkage::Import, &c.signature(call_conv))
            .map_err(|e| compile_error("(all)", e))?;
        imports.push((c, id));
    }
    let mut pool = Pool::default();
    let mut ctx = Context::new();
    let mut fctx = FunctionBuilderContext::new();
    let exact_wait = target.api == Api::Athread;
    let names = kernel_function_names(p);
    let mut ids = Vec::new();
    let mut kernels = Vec::new();
    for (k, name) in p.kernels.iter().zip(&names) {
        let s = k
            .schedule
            .as_ref()
            .ok_or_else(|| compile_error(&k.name, "the kernel is not scheduled"))?;
        verify_schedule(k, p, s, target).map_err(|reason| JitError::Schedule {
            kernel: k.name.clone(),
            reason,
        })?;
        let fields = Fields::of(p, k);
        let tensors = fields.tensors.clone();
        let mut program = cpe::build(p, k, fields, target)?;
        edit(name, &mut program);
        let layout = lower::Layout::of(&program);
        if layout.bytes > target.ldm_budget() {
            return Err(compile_error(
                &k.name,
                format!(
                    "its LDM layout takes {} bytes; {} has {} for data",
                    layout.bytes,
                    target.name,
                    target.ldm_budget()
                ),
            ));
        }
        let mut sig = module.make_signature();
        sig.params.push(AbiParam::new(types::I64));
        let id = module
            .declare_function(name, Linkage::Local, &sig)
            .map_err(|e| compile_error(&k.name, e))?;
        ctx.func.signature = sig;
        ctx.func.name = UserFuncName::user(0, id.as_u32());
        {
            let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
            let funcs: HashMap<Callee, _> = imports
                .iter()
                .map(|&(c, fid)| (c, module.declare_func_in_func(fid, b.func)))
                .collect();
            lower::lower(&mut b, &program, &layout, &funcs, &mut pool, exact_wait);
            b.finalize(module.target_config());
        }
        let dump = std::env::var("SWFLOW_DUMP").is_ok_and(|v| v == "jit" || v == "all");
        ctx.set_disasm(dump);
        module
            .define_function(id, &mut ctx)
            .map_err(|e| compile_error(&k.name, format!("Cranelift: {e:?}")))?;
        if let Some(code) = ctx.compiled_code().filter(|_| dump) {
            eprintln!("=== jit: {name} ===\n{}", code.vcode.as_deref().unwrap_or(""));
        }
        module.clear_context(&mut ctx);
        ids.push(id);
        kernels.push((name.clone(), tensors, program.communicates()));
    }
    module.finalize_definitions().map_err(|e| compile_error("(all)", e))?;
    let kernels = kernels
        .into_iter()
        .zip(ids)
        .map(|((name, fields, communicates), id)| {
            let code = module.get_finalized_function(id);
            // SAFETY: the function was built with the signature `fn(i64)`, which is how the
            // platform passes a pointer argument; it returns nothing.
            let entry = unsafe { std::mem::transmute::<*const u8, KernelFn>(code) };
            JitKernel {
                name,
                entry,
                fields,
                communicates,
            }
        })
        .collect();
    Ok(JitProgram {
        module: Some(module),
        kernels,
        _pool: pool,
    })
}

impl JitProgram {
    /// Runs the program on a new machine of `target`: `p` and `target` must be those it was
    /// compiled from.
    pub fn run(&self, p: &Program, target: &Target, inputs: &[Tensor]) -> Result<JitRun, JitError> {
        self.run_traced(p, target, inputs, None)
    }

    /// [`JitProgram::run`], writing a Chrome trace of the modelled run to `trace` when given.
    pub fn run_traced(
        &self,
        p: &Program,
        target: &Target,
        inputs: &[Tensor],
        trace: Option<&Path>,
    ) -> Result<JitRun, JitError> {
        if inputs.len() != p.inputs.len() {
            return Err(JitError::Inputs {
                expected: p.inputs.len(),
                given: inputs.len(),
            });
        }
        let plan = memplan::plan(p, target);
        let offset = |id: TensorId| plan.offsets[p.storage(id).index()];
        let mut arena = Arena::new(plan.arena_bytes, target.memory_alignment_bytes.max(16));
        for (i, t) in p.tensors.iter().enumerate() {
            if let (TensorKind::Const(c), Some(off)) = (&t.kind, plan.offsets[i]) {
                params::write_tensor_bytes(c, arena.bytes_mut(off, params::byte_len(c)));
            }
        }
        for (&id, t) in p.inputs.iter().zip(inputs) {
            let info = p.tensor(id);
            if t.ty() != info.ty {
                return Err(JitError::InputType {
                    name: info.name.clone(),
                    expected: info.ty.to_string(),
                    given: t.ty().to_string(),
                });
            }
            if let Some(off) = offset(id) {
                params::write_tensor_bytes(t, arena.bytes_mut(off, params::byte_len(t)));
            }
        }
        let spec = target.machine_spec();
        // Most compiled kernels never wait for each other, so the CPEs run as tasks: on a
        // thread per core but one, and on this thread while it joins; those that exchange
        // registers run each CPE on a thread of its own.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let machine = Machine::pooled(target.cpes, target.ldm_budget(), Some(spec.clone()), cores - 1);
        machine.add_region(arena.base() as usize, arena.len(), "arena");
        let trace_error = |path: &Path, source| JitError::Trace {
            path: path.display().to_string(),
            source,
        };
        let tracer = match trace {
            Some(path) => {
                let w = TraceWriter::create(&path.to_string_lossy(), target.cpes, spec.clock_hz)
                    .map_err(|e| trace_error(path, e))?;
                let shared = Arc::new(Mutex::new((w, None::<std::io::Error>)));
                let sink = shared.clone();
                machine.trace_to(Box::new(move |kernel, start, time, spans| {
                    let mut guard = sink.lock().expect("trace");
                    let (w, failed) = &mut *guard;
                    if failed.is_none() {
                        if let Err(e) = w.launch(kernel, start, time, spans) {
                            *failed = Some(e);
                        }
                    }
                }));
                Some((path, shared))
            }
            None => None,
        };
        for k in &self.kernels {
            let mut para: Vec<u64> = k
                .fields
                .iter()
                .map(|&id| arena.base() as u64 + offset(id).unwrap_or(0) as u64)
                .collect();
            let bytes = 8 * para.len();
            match k.communicates {
                true => machine.spawn_threaded(&k.name, k.entry, para.as_mut_ptr().cast(), bytes),
                false => machine.spawn(&k.name, k.entry, para.as_mut_ptr().cast(), bytes),
            }
            machine.try_join().map_err(JitError::Run)?;
        }
        let outputs = p
            .outputs
            .iter()
            .map(|&(_, id)| {
                let ty = &p.tensor(id).ty;
                let bytes = ty.numel() * ty.dtype.size_bytes();
                let raw = arena.bytes_mut(offset(id).unwrap_or(0), bytes);
                let data = from_le_bytes(ty.dtype, raw);
                Tensor::new(ty.shape.clone(), data).expect("the arena holds the whole tensor")
            })
            .collect();
        if let Some((path, shared)) = tracer {
            let mut guard = shared.lock().expect("trace");
            let (w, failed) = &mut *guard;
            if let Some(e) = failed.take() {
                return Err(trace_error(path, e));
            }
            w.finish().map_err(|e| trace_error(path, e))?;
        }
        let stats = machine.stats();
        let report = Report::new(target.cpes, target.ldm_budget(), Some(&spec), &stats);
        let modelled_seconds = report
            .total_modelled_seconds
            .expect("a report made with the machine's timing has a total");
        Ok(JitRun {
            outputs,
            report,
            stats,
            modelled_seconds,
        })
    }
}

/// Elements of `dtype` from their little-endian bytes (as the arena holds them).
fn from_le_bytes(dtype: DType, raw: &[u8]) -> Data {
    match dtype {
        DType::F32 => Data::F32(
            raw.chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
                .collect(),
        ),
        DType::F64 => Data::F64(
            raw.chunks_exact(8)
                .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")))
                .collect(),
        ),
        DType::I64 => Data::I64(
            raw.chunks_exact(8)
                .map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes")))
                .collect(),
        ),
        DType::Bool => Data::Bool(raw.iter().map(|&b| b != 0).collect()),
    }
}
