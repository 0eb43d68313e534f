//! The gradient tape of a training program: the forward values the backward pass reads, and
//! how they travel.
//!
//! A program computing a loss and its gradients splits into the forward pass, the kernels
//! the loss depends on, and the backward pass, every other kernel ([`passes`]). A tensor a
//! forward kernel writes and a backward kernel reads is *saved*: it stays in main memory from
//! its forward producer to its last backward reader. A saved tensor that a later forward
//! kernel also reads, or that is an output, lives in main memory anyway; one that only the
//! backward reads (a pre-activation that a fused kernel keeps, for example) exists for the
//! tape alone and is *tape-only*.
//!
//! The tape travels in one of three ways ([`TapeMode`]):
//! - `per-tensor`: every saved tensor is read back in each backward kernel's own tiling;
//! - `regions`: a tape-only tensor whose backward readers can all *mirror* its producer (take
//!   the producer's partition and tiles over the tensor's dimensions, [`mirror`], so that each
//!   reads back exactly the boxes the producer wrote, CPE by CPE, in the same order) is stored
//!   as *records* ([`Record`]): each CPE's boxes packed one after another, in the order it
//!   writes them, so each box moves in one contiguous transfer each way. Every other saved
//!   tensor travels as in `per-tensor`.
//! - `stream`: as `regions`, but a tape-only tensor with one reader that can mirror its
//!   producer beside a tape arena in LDM is *streamed* ([`stream`]): its boxes gather in the
//!   arena and leave in layers, one contiguous transfer each, pushed on a per-CPE stack that
//!   the reader, walking backwards, pops. The others are stored as records where they can be.
//!
//! [`TapeOptions::travel`] can hold a tape-only tensor to a plainer way than its mode's: in
//! records rather than streamed, or whole (swflow's `--tape-travel timed` chooses these holds
//! by modelled time).
//!
//! Every mode computes the same values bit for bit: tiling changes which boxes move, never
//! the order in which a reduction folds its values.

mod mirror;
pub mod stream;

use std::collections::BTreeMap;
use std::fmt::Write;

use swflow_frontend::ir::{DType, TensorType};

use crate::loops::{Kernel, Program, TensorId, TensorInfo, TensorKind};
use crate::schedule::{accesses, is_written, Schedule};
use crate::target::Target;

pub use mirror::{mirror_schedule, MirrorError};
pub use stream::{Stream, StreamError, StreamTape};

/// How the tape travels (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TapeMode {
    PerTensor,
    Regions,
    #[default]
    Stream,
}

impl TapeMode {
    pub fn name(self) -> &'static str {
        match self {
            TapeMode::PerTensor => "per-tensor",
            TapeMode::Regions => "regions",
            TapeMode::Stream => "stream",
        }
    }

    /// The mode named `name` (as [`TapeMode::name`] writes it).
    pub fn parse(name: &str) -> Option<TapeMode> {
        [TapeMode::PerTensor, TapeMode::Regions, TapeMode::Stream]
            .into_iter()
            .find(|m| m.name() == name)
    }
}

/// The tape options of a gradient program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TapeOptions {
    /// The program output holding the loss: the forward pass is what it depends on.
    pub loss: String,
    pub mode: TapeMode,
    /// Bytes of each CPE's tape arena in `stream` mode ([`stream::default_arena_bytes`] when
    /// none is given).
    pub arena_bytes: Option<usize>,
    /// Tape-only tensors, by name, held to a plainer way to travel than the mode's (a choice
    /// by modelled time makes this map: mirroring fixes a reader's tiles, and some readers
    /// run faster in their own). Names that are not tape-only tensors of the program are
    /// ignored.
    pub travel: BTreeMap<String, Travel>,
}

/// The plainest way a tape-only tensor may travel ([`TapeOptions::travel`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Travel {
    /// Whole, as in `per-tensor`: each reader reads it in its own tiling, and the producer
    /// keeps its own schedule.
    Whole,
    /// In records where its readers can mirror, never streamed.
    Records,
    /// Streamed where the mode streams and the tensor can be: no hold at all.
    Stream,
}

impl Travel {
    pub fn name(self) -> &'static str {
        match self {
            Travel::Whole => "whole",
            Travel::Records => "records",
            Travel::Stream => "stream",
        }
    }
}

impl TapeOptions {
    /// The options for gradient or training program `g`, whose first output is the loss (none
    /// when it has no output).
    pub fn for_gradient(g: &swflow_frontend::ir::Graph, mode: TapeMode) -> Option<TapeOptions> {
        let loss = g.outputs.first()?.name.clone();
        Some(TapeOptions {
            loss,
            mode,
            arena_bytes: None,
            travel: BTreeMap::new(),
        })
    }
}

/// Which pass a kernel belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    Forward,
    Backward,
}

/// A saved tensor: written by a forward kernel, read by backward ones.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Saved {
    pub tensor: TensorId,
    /// The (last) forward kernel that writes it.
    pub producer: usize,
    /// How many forward kernels write it: only a tensor with one producer can be mirrored.
    pub writers: usize,
    /// The backward kernels that read it, in program order.
    pub readers: Vec<usize>,
    /// No forward kernel after its producer reads it and it is not an output.
    pub tape_only: bool,
    pub bytes: usize,
}

/// A backward kernel that reads a tape-only tensor in its producer's partition and tiling.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mirrored {
    pub tensor: TensorId,
    pub producer: usize,
    pub reader: usize,
}

/// A tape-only tensor's reader that cannot mirror its producer, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FellBack {
    pub tensor: TensorId,
    pub reader: usize,
    pub reason: MirrorError,
}

/// A tape-only tensor stored as records: CPE `c`'s boxes, packed and in the order its
/// producer writes them (and its readers read them), from element `c * per_cpe` of the
/// tensor's storage on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub tensor: TensorId,
    pub producer: usize,
    /// Elements of the largest share of one CPE.
    pub per_cpe: usize,
    /// Elements of the storage: every CPE's share at its largest.
    pub elements: usize,
}

/// The tape of a scheduled gradient program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TapePlan {
    pub mode: TapeMode,
    /// The pass of every kernel.
    pub passes: Vec<Pass>,
    pub saved: Vec<Saved>,
    /// Readers that mirror their producer (in `regions` and `stream` mode).
    pub mirrored: Vec<Mirrored>,
    /// Readers of tape-only tensors that read in their own tiling instead.
    pub fell_back: Vec<FellBack>,
    /// Tape-only tensors stored as records (every reader mirrors).
    pub records: Vec<Record>,
    /// The most bytes of each CPE's LDM a stream's arena may take (each takes what it needs
    /// up to this, [`stream::arena_for`]).
    pub arena_bytes: usize,
    /// Tape-only tensors streamed through the arena (in `stream` mode), in producer order.
    pub streams: Vec<Stream>,
    /// Tape-only tensors that could not stream, and why.
    pub not_streamed: Vec<(TensorId, StreamError)>,
    /// The tensors holding the streamed tape, when anything streams.
    pub stream_tape: Option<StreamTape>,
}

/// The storage tensor of access `i` (in [`accesses`] order) of kernel `k`, and whether the
/// access writes it.
fn storage_of(p: &Program, k: usize, i: usize) -> (TensorId, bool) {
    let kernel = &p.kernels[k];
    (
        p.storage(kernel.operands[accesses(kernel)[i].operand]),
        is_written(kernel, i),
    )
}

/// Storage tensors kernel `k` writes: its target, and its kept value.
fn writes(p: &Program, k: &Kernel) -> Vec<TensorId> {
    accesses(k)
        .iter()
        .enumerate()
        .filter(|&(i, _)| is_written(k, i))
        .map(|(_, a)| p.storage(k.operands[a.operand]))
        .collect()
}

/// Storage tensors kernel `k` reads.
fn reads(p: &Program, k: &Kernel) -> Vec<TensorId> {
    k.stmt
        .read_accesses()
        .iter()
        .map(|a| p.storage(k.operands[a.operand]))
        .collect()
}

/// The pass of every kernel: forward when the tensor `loss` depends on what it writes.
pub fn passes(p: &Program, loss: TensorId) -> Vec<Pass> {
    let mut needed = vec![false; p.tensors.len()];
    needed[p.storage(loss).index()] = true;
    let mut out = vec![Pass::Backward; p.kernels.len()];
    for (i, k) in p.kernels.iter().enumerate().rev() {
        if writes(p, k).iter().any(|t| needed[t.index()]) {
            out[i] = Pass::Forward;
            for t in reads(p, k) {
                needed[t.index()] = true;
            }
        }
    }
    out
}

/// The saved tensors of a program whose kernels belong to `passes`, in the order of their
/// (last) producers.
pub fn saved(p: &Program, passes: &[Pass]) -> Vec<Saved> {
    let outputs: Vec<TensorId> = p.outputs.iter().map(|&(_, t)| p.storage(t)).collect();
    let mut out: Vec<Saved> = Vec::new();
    for (f, k) in p.kernels.iter().enumerate() {
        if passes[f] != Pass::Forward {
            continue;
        }
        for t in writes(p, k) {
            let later = || p.kernels.iter().enumerate().skip(f + 1);
            let readers: Vec<usize> = later()
                .filter(|&(i, r)| passes[i] == Pass::Backward && reads(p, r).contains(&t))
                .map(|(i, _)| i)
                .collect();
            if readers.is_empty() {
                continue;
            }
            let forward_read = later().any(|(i, r)| passes[i] == Pass::Forward && reads(p, r).contains(&t));
            // A tensor several forward kernels write (the parts of a concatenation) is
            // saved once, from its last producer.
            let writers = 1 + out.iter().filter(|s| s.tensor == t).map(|s| s.writers).sum::<usize>();
            out.retain(|s| s.tensor != t);
            out.push(Saved {
                tensor: t,
                producer: f,
                writers,
                readers,
                tape_only: !forward_read && !outputs.contains(&t),
                bytes: p.tensor(t).ty.size_bytes(),
            });
        }
    }
    out
}

/// Plans the tape of scheduled program `p`. In `regions` mode it stores as records every
/// tape-only tensor whose readers can all mirror its producer, giving them the mirrored
/// schedules; tensors are taken largest first, and a reader mirrors one producer at most.
/// (Mirroring a reader of a tensor that stays whole would only constrain its tiles.) In
/// `stream` mode it first tries to stream each tensor ([`stream`]), then stores it as records.
/// The tensors of `options.travel` travel no further than it says.
pub fn plan_tape(p: &mut Program, target: &Target, options: &TapeOptions) -> Result<TapePlan, String> {
    let loss = p
        .outputs
        .iter()
        .find(|(n, _)| *n == options.loss)
        .map(|&(_, t)| t)
        .ok_or_else(|| format!("the loss '{}' is not an output of the program", options.loss))?;
    let passes = passes(p, loss);
    let saved = saved(p, &passes);
    let mut plan = TapePlan {
        mode: options.mode,
        passes,
        saved,
        mirrored: Vec::new(),
        fell_back: Vec::new(),
        records: Vec::new(),
        arena_bytes: options
            .arena_bytes
            .unwrap_or_else(|| stream::default_arena_bytes(target)),
        streams: Vec::new(),
        not_streamed: Vec::new(),
        stream_tape: None,
    };
    if options.mode == TapeMode::PerTensor {
        return Ok(plan);
    }
    let mut candidates: Vec<Saved> = plan.saved.iter().filter(|s| s.tape_only).cloned().collect();
    candidates.sort_by_key(|s| (std::cmp::Reverse(s.bytes), s.tensor));
    let mut taken: Vec<usize> = Vec::new();
    for s in candidates {
        let travel = options.travel.get(&p.tensor(s.tensor).name).copied();
        if travel == Some(Travel::Whole) {
            plan.fell_back.extend(s.readers.iter().map(|&reader| FellBack {
                tensor: s.tensor,
                reader,
                reason: MirrorError::KeptWhole,
            }));
            continue;
        }
        if options.mode == TapeMode::Stream && travel == Some(Travel::Records) {
            plan.not_streamed.push((s.tensor, StreamError::KeptInRecords));
        } else if options.mode == TapeMode::Stream {
            match try_stream(p, &plan, &s, &taken, target) {
                Ok(stream) => {
                    taken.push(stream.reader);
                    plan.mirrored.push(Mirrored {
                        tensor: s.tensor,
                        producer: s.producer,
                        reader: stream.reader,
                    });
                    plan.streams.push(stream);
                    continue;
                }
                Err(e) => plan.not_streamed.push((s.tensor, e)),
            }
        }
        // Each reader's mirrored schedule, or why it cannot mirror.
        let mirrored: Vec<Result<Schedule, MirrorError>> = s
            .readers
            .iter()
            .map(|&r| {
                if s.writers > 1 {
                    Err(MirrorError::ProducerLayout)
                } else if taken.contains(&r) {
                    Err(MirrorError::ReaderTaken)
                } else {
                    mirror_schedule(p, s.producer, s.tensor, r, target)
                }
            })
            .collect();
        if mirrored.iter().any(Result::is_err) {
            // The tensor stays whole: every reader keeps its own tiles.
            for (&r, m) in s.readers.iter().zip(mirrored) {
                plan.fell_back.push(FellBack {
                    tensor: s.tensor,
                    reader: r,
                    reason: m.err().unwrap_or(MirrorError::OtherReader),
                });
            }
            continue;
        }
        let schedules = mirrored.into_iter().map(|m| m.expect("checked above"));
        for (&r, schedule) in s.readers.iter().zip(schedules) {
            taken.push(r);
            p.kernels[r].schedule = Some(schedule);
            plan.mirrored.push(Mirrored {
                tensor: s.tensor,
                producer: s.producer,
                reader: r,
            });
        }
        let per_cpe = per_cpe_elements(p, s.producer, s.tensor, target.cpes);
        plan.records.push(Record {
            tensor: s.tensor,
            producer: s.producer,
            per_cpe,
            elements: per_cpe * target.cpes,
        });
    }
    finish_streams(p, &mut plan, target.cpes);
    Ok(plan)
}

/// Streams saved tensor `s` if it can (see [`stream::stream_schedules`]), giving its producer
/// and reader their schedules; `taken` readers already mirror another producer.
fn try_stream(
    p: &mut Program,
    plan: &TapePlan,
    s: &Saved,
    taken: &[usize],
    target: &Target,
) -> Result<Stream, StreamError> {
    let busy = |k: usize| {
        taken.contains(&k)
            || plan.streams.iter().any(|x| x.producer == k)
            || plan.records.iter().any(|r| r.producer == k)
    };
    if s.writers > 1 {
        return Err(StreamError::Mirror(MirrorError::ProducerLayout));
    }
    if s.readers.iter().any(|&r| busy(r)) || busy(s.producer) {
        return Err(StreamError::KernelTaken);
    }
    if let [reader] = s.readers[..] {
        if let Some(x) = plan
            .streams
            .iter()
            .find(|x| !stream::nests(s.producer, reader, x.producer, x.reader))
        {
            return Err(StreamError::NotLifo(p.tensor(x.tensor).name.clone()));
        }
    }
    let elem_bytes = p.tensor(s.tensor).ty.dtype.size_bytes();
    let share = per_cpe_elements(p, s.producer, s.tensor, target.cpes);
    let arena_bytes = stream::arena_for(share, elem_bytes, plan.arena_bytes);
    let (fs, rs) = stream::stream_schedules(p, s, target, arena_bytes)?;
    let reader = s.readers[0];
    p.kernels[s.producer].schedule = Some(fs);
    p.kernels[reader].schedule = Some(rs);
    Ok(Stream {
        tensor: s.tensor,
        producer: s.producer,
        reader,
        index: 0,
        arena_bytes,
        half: arena_bytes / 2 / elem_bytes,
        elements: Vec::new(),
        layers: Vec::new(),
    })
}

/// Orders the streams by producer, counts their layers, and adds the tensors holding the
/// streamed tape to the program, as operands of every streaming kernel.
fn finish_streams(p: &mut Program, plan: &mut TapePlan, cpes: usize) {
    if plan.streams.is_empty() {
        return;
    }
    plan.streams.sort_by_key(|x| x.producer);
    for (index, x) in plan.streams.iter_mut().enumerate() {
        let (elements, layers) = stream::layers(p, x.producer, x.tensor, x.half, cpes);
        x.index = index;
        x.elements = elements;
        x.layers = layers;
    }
    let per_cpe = |f: &dyn Fn(&Stream) -> &Vec<usize>| {
        (0..cpes)
            .map(|c| plan.streams.iter().map(|x| f(x)[c]).sum::<usize>())
            .max()
            .unwrap_or(0)
    };
    let share = per_cpe(&|x| &x.elements).max(1);
    let layers = per_cpe(&|x| &x.layers);
    let mut tape = StreamTape {
        values: TensorId(0),
        stack: TensorId(0),
        share,
        slots: 0,
        streams: plan.streams.len(),
    };
    tape.slots = tape.layer_slot(layers);
    let mut add = |name: &str, dtype: DType, elements: usize| {
        let mut unique = name.to_string();
        while p.tensors.iter().any(|t| t.name == unique) {
            unique.push('_');
        }
        p.tensors.push(TensorInfo {
            name: unique,
            ty: TensorType {
                dtype,
                shape: vec![elements],
            },
            kind: TensorKind::Temp,
        });
        TensorId(p.tensors.len() as u32 - 1)
    };
    tape.values = add("tape/values", DType::F32, share * cpes);
    tape.stack = add("tape/stack", DType::I64, tape.slots * cpes);
    for x in &plan.streams {
        for k in [x.producer, x.reader] {
            p.kernels[k].operands.extend([tape.values, tape.stack]);
        }
    }
    plan.stream_tape = Some(tape);
}

/// The most elements of `tensor` that one CPE of kernel `producer` writes.
fn per_cpe_elements(p: &Program, producer: usize, tensor: TensorId, cpes: usize) -> usize {
    let k = &p.kernels[producer];
    let s = k.schedule.as_ref().expect("a mirrored producer is scheduled");
    let i = stream::written_access(p, k, tensor).expect("the producer writes its tensor");
    (0..cpes)
        .map(|cpe| {
            let mut n = 0;
            let walked = crate::exec::walk::walk(k, &crate::exec::walk::shapes(p, k), s, cpe, &mut |e| {
                if let crate::exec::walk::Event::WriteBack { access, extent, .. } = e {
                    if access == i {
                        n += extent.iter().product::<usize>();
                    }
                }
                Ok(())
            });
            walked.expect("counting callbacks never fail");
            n
        })
        .max()
        .unwrap_or(0)
}

impl TapePlan {
    /// Bytes of all saved tensors.
    pub fn saved_bytes(&self) -> usize {
        self.saved.iter().map(|s| s.bytes).sum()
    }

    /// Bytes of the tape-only tensors.
    pub fn tape_only_bytes(&self) -> usize {
        self.saved.iter().filter(|s| s.tape_only).map(|s| s.bytes).sum()
    }

    /// Whether the transfers of access `i` (in [`accesses`] order) of kernel `k` carry tape:
    /// a backward kernel's reads of a saved tensor, and a forward kernel's writes of a
    /// tape-only one.
    pub fn carries(&self, p: &Program, k: usize, i: usize) -> bool {
        let (t, written) = storage_of(p, k, i);
        self.saved.iter().any(|s| {
            s.tensor == t
                && match self.passes[k] {
                    Pass::Backward => !written && s.readers.contains(&k),
                    Pass::Forward => written && s.producer == k && s.tape_only,
                }
        })
    }

    /// The record that access `i` (in [`accesses`] order) of kernel `k` moves, if it moves one:
    /// the producer's write of a recorded tensor, or a mirrored reader's read of it.
    pub fn record_of(&self, p: &Program, k: usize, i: usize) -> Option<&Record> {
        let (t, written) = storage_of(p, k, i);
        self.records
            .iter()
            .find(|r| r.tensor == t && if written { r.producer == k } else { self.mirrors(k, t) })
    }

    /// Bytes of the storage of `t`: its records' when it is stored as records, none when it is
    /// streamed (its values travel in the streamed tape).
    pub fn storage_bytes(&self, p: &Program, t: TensorId) -> usize {
        let ty = &p.tensor(t).ty;
        if self.streams.iter().any(|x| x.tensor == t) {
            return 0;
        }
        match self.records.iter().find(|r| r.tensor == t) {
            Some(r) => r.elements * ty.dtype.size_bytes(),
            None => ty.size_bytes(),
        }
    }

    /// The stream that access `i` (in [`accesses`] order) of kernel `k` pushes or pops, if any.
    pub fn stream_of(&self, p: &Program, k: usize, i: usize) -> Option<&Stream> {
        let (t, written) = storage_of(p, k, i);
        self.streams
            .iter()
            .find(|x| x.tensor == t && if written { x.producer == k } else { x.reader == k })
    }

    /// Bytes of the tape arena kernel `k` keeps in each CPE's LDM: its stream's arena when it
    /// pushes or pops one, else none.
    pub fn arena_of(&self, k: usize) -> usize {
        self.streams
            .iter()
            .find(|x| x.producer == k || x.reader == k)
            .map_or(0, |x| x.arena_bytes)
    }

    /// Bytes of the LDM buffers of kernel `k` that its tape arena replaces: the boxes of the
    /// tensors it streams, which the schedule still counts (see [`stream::stream_schedules`]).
    pub fn replaced_by_arena(&self, p: &Program, k: usize) -> usize {
        let kernel = &p.kernels[k];
        let Some(s) = kernel.schedule.as_ref() else { return 0 };
        (0..s.buffers.len())
            .filter(|&i| self.stream_of(p, k, i).is_some())
            .map(|i| s.buffers[i].ldm_bytes())
            .sum()
    }

    /// How saved tensor `t` travels: streamed, in records, or whole.
    pub fn travel_of(&self, t: TensorId) -> Travel {
        if self.streams.iter().any(|x| x.tensor == t) {
            Travel::Stream
        } else if self.records.iter().any(|r| r.tensor == t) {
            Travel::Records
        } else {
            Travel::Whole
        }
    }

    /// Whether backward kernel `reader` mirrors the producer of `tensor`.
    pub fn mirrors(&self, reader: usize, tensor: TensorId) -> bool {
        self.mirrored.iter().any(|m| m.reader == reader && m.tensor == tensor)
    }

    /// The plan as text: the passes' kernel counts, then one line per saved tensor.
    pub fn describe(&self, p: &Program) -> String {
        let forward = self.passes.iter().filter(|&&x| x == Pass::Forward).count();
        let arena = match self.mode {
            TapeMode::Stream => format!(" (arenas up to {} B)", self.arena_bytes),
            _ => String::new(),
        };
        let mut s = format!(
            "tape {}{arena}: {forward} forward kernels, {} backward; {} saved tensors, {} bytes ({} tape-only)\n",
            self.mode.name(),
            self.passes.len() - forward,
            self.saved.len(),
            self.saved_bytes(),
            self.tape_only_bytes(),
        );
        for sv in &self.saved {
            let readers: Vec<String> = sv
                .readers
                .iter()
                .map(|&r| {
                    let how = if self.mirrors(r, sv.tensor) {
                        " (mirrored)".to_string()
                    } else if let Some(f) = self.fell_back.iter().find(|f| f.reader == r && f.tensor == sv.tensor) {
                        format!(" (own tiling: {})", f.reason)
                    } else {
                        String::new()
                    };
                    format!("{}{how}", p.kernels[r].name)
                })
                .collect();
            let streamed = self.streams.iter().find(|x| x.tensor == sv.tensor);
            let kind = match (
                sv.tape_only,
                self.records.iter().any(|r| r.tensor == sv.tensor),
                streamed,
            ) {
                (true, _, Some(x)) => format!(
                    " tape-only, streamed in up to {} layers per CPE",
                    x.layers.iter().max().unwrap_or(&0)
                ),
                (true, true, None) => " tape-only, in records".to_string(),
                (true, false, None) => " tape-only".to_string(),
                _ => String::new(),
            };
            let not_streamed = match self.not_streamed.iter().find(|(t, _)| *t == sv.tensor) {
                Some((_, e)) => format!(" (not streamed: {e})"),
                None => String::new(),
            };
            let _ = writeln!(
                s,
                "  {} {} B{kind}{not_streamed} from {} to {}",
                crate::loops::quoted_name(&p.tensor(sv.tensor).name),
                sv.bytes,
                p.kernels[sv.producer].name,
                readers.join(", ")
            );
        }
        s
    }
}
