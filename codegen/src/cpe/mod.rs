//! The CPE program of a scheduled kernel: what every CPE runs, as data.
//!
//! [`build`] turns a scheduled loop-IR kernel into a [`Func`]: the parameter struct fetched
//! by DMA, this CPE's chunk of the partition, the tile walk, box DMA with reply counters, the
//! compute loops over LDM buffers and direct accesses, and the operation counts the timing
//! model is charged with. Both back ends start from it, so they run the same program and
//! report the same counts: [`print`] writes it as the C of `slave/<k>_slave.c`, and the JIT
//! compiles it with Cranelift.
//!
//! It is a small structured language: integer variables and arrays (C `long`), counted loops
//! whose bounds the body does not change, conditionals, and statements for the hardware (DMA,
//! waits, charges). Element values are typed by the loop IR's [`DType`].

mod build;
mod print;

pub use build::{build, Fields};
pub use print::{print_body, print_ldm_members};
pub use swflow_emulator::timing::Ops;
pub use swflow_emulator::DmaClass;

use swflow_frontend::ir::{BinaryOp, DType, ReduceKind, UnaryOp};
use swflow_scheduler::loops::Scalar;
use swflow_scheduler::schedule::share::MeshLine;

/// An integer variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Var(pub u32);

/// An integer array (box starts and extents, tensor shapes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Array(pub u32);

/// An LDM buffer (a tile of one access).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Buf(pub u32);

/// A vector register holding [`Func::lanes`] f32 values (`floatv4` on SW26010, `floatv8` on
/// SW26010-Pro).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VReg(pub u32);

/// A field of the parameter struct: the main-memory address of one tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Field(pub u32);

pub struct VarDecl {
    /// A C identifier, unique in the function.
    pub name: String,
    /// Its value at entry, when it has one.
    pub init: Option<i64>,
}

pub struct ArrayDecl {
    pub name: String,
    /// Dimensions (`[2][rank]` for the halves of a double buffer); row-major.
    pub dims: Vec<usize>,
    /// Constant contents (a tensor's shape), or none for an array the body sets.
    pub values: Option<Vec<i64>>,
}

impl ArrayDecl {
    pub fn len(&self) -> usize {
        self.dims.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An LDM buffer of the kernel.
pub struct BufDecl {
    /// The identifier (also the name the emulator reports the buffer by).
    pub name: String,
    pub dtype: DType,
    /// Elements of one half.
    pub elements: usize,
    /// Tiles' spaces it holds: 1, 2 (double-buffered), or 3 (posted a tile ahead).
    pub halves: usize,
    /// What it holds, for the reader: the tensor and the tile.
    pub note: String,
}

impl BufDecl {
    pub fn bytes(&self) -> usize {
        self.halves * self.elements * self.dtype.size_bytes()
    }
}

/// A field of the parameter struct.
pub struct FieldDecl {
    pub name: String,
    pub dtype: DType,
}

/// A whole CPE program.
pub struct Func {
    pub vars: Vec<VarDecl>,
    pub arrays: Vec<ArrayDecl>,
    /// Declared together on one line each, in this order (C reads best that way).
    pub decl_lines: Vec<Vec<Local>>,
    pub bufs: Vec<BufDecl>,
    pub fields: Vec<FieldDecl>,
    /// Reply counters; counter 0 is the parameter struct's.
    pub replies: usize,
    /// f32 lanes of a vector register (1 when the target has no vector unit).
    pub lanes: usize,
    /// Names of the vector registers.
    pub vregs: Vec<String>,
    pub body: Vec<Stmt>,
}

impl Func {
    /// Whether the program posts broadcasts ([`Stmt::Post`]), whose reply counters other CPEs
    /// write: the counters then form a declared LDM buffer.
    pub fn posts(&self) -> bool {
        fn any(stmts: &[Stmt]) -> bool {
            stmts.iter().any(|s| match s {
                Stmt::Post { .. } => true,
                Stmt::For { body, .. } => any(body),
                Stmt::If { then, otherwise, .. } => any(then) || any(otherwise),
                _ => false,
            })
        }
        any(&self.body)
    }

    /// Whether the program broadcasts to other CPEs ([`Stmt::Broadcast`]), so that each of
    /// its CPEs must run on a thread of its own.
    pub fn communicates(&self) -> bool {
        fn any(stmts: &[Stmt]) -> bool {
            stmts.iter().any(|s| match s {
                Stmt::Broadcast { .. } | Stmt::Post { .. } | Stmt::ArrivalWait { .. } | Stmt::Sync { .. } => true,
                Stmt::For { body, .. } => any(body),
                Stmt::If { then, otherwise, .. } => any(then) || any(otherwise),
                _ => false,
            })
        }
        any(&self.body)
    }

    pub fn var(&self, v: Var) -> &VarDecl {
        &self.vars[v.0 as usize]
    }

    pub fn array(&self, a: Array) -> &ArrayDecl {
        &self.arrays[a.0 as usize]
    }

    pub fn buf(&self, b: Buf) -> &BufDecl {
        &self.bufs[b.0 as usize]
    }

    pub fn field(&self, f: Field) -> &FieldDecl {
        &self.fields[f.0 as usize]
    }

    pub fn vreg(&self, r: VReg) -> &str {
        &self.vregs[r.0 as usize]
    }

    /// The C type of a vector register.
    pub fn vector_type(&self) -> String {
        format!("floatv{}", self.lanes)
    }
}

/// A local of [`Func::decl_lines`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Local {
    Var(Var),
    Array(Array),
}

/// An integer expression (64-bit, wrapping never happens for verified kernels).
#[derive(Clone, Debug, PartialEq)]
pub enum Int {
    Const(i64),
    Var(Var),
    /// This CPE's id.
    Cpe,
    /// An element of an array, one index per dimension.
    Elem(Array, Vec<Int>),
    Add(Box<Int>, Box<Int>),
    Sub(Box<Int>, Box<Int>),
    Mul(Box<Int>, Box<Int>),
    /// Quotient and remainder of non-negative operands by a positive divisor.
    Div(Box<Int>, Box<Int>),
    Rem(Box<Int>, Box<Int>),
    /// The smaller of the two.
    Min(Box<Int>, Box<Int>),
    /// A position read from a tensor (an i64 element value): counted from the end when
    /// negative; outside `0..extent` the kernel fails.
    Gather(Box<Value>, usize),
}

impl Int {
    pub fn min(a: Int, b: Int) -> Int {
        Int::Min(Box::new(a), Box::new(b))
    }

    /// The product of `factors` (1 when there are none).
    pub fn product(factors: Vec<Int>) -> Int {
        factors.into_iter().reduce(|a, b| a * b).unwrap_or(Int::Const(1))
    }

    /// The sum of `terms` (0 when there are none).
    pub fn sum(terms: Vec<Int>) -> Int {
        terms.into_iter().reduce(|a, b| a + b).unwrap_or(Int::Const(0))
    }
}

macro_rules! int_operator {
    ($trait:ident, $method:ident, $variant:ident) => {
        impl std::ops::$trait for Int {
            type Output = Int;

            fn $method(self, b: Int) -> Int {
                Int::$variant(Box::new(self), Box::new(b))
            }
        }
    };
}

int_operator!(Add, add, Add);
int_operator!(Sub, sub, Sub);
int_operator!(Mul, mul, Mul);
int_operator!(Div, div, Div);
int_operator!(Rem, rem, Rem);

/// A condition.
#[derive(Clone, Debug, PartialEq)]
pub enum Cond {
    Lt(Int, Int),
    Eq(Int, Int),
    /// All of them (none: true).
    All(Vec<Cond>),
}

/// Which half of a double-buffered LDM buffer an access uses.
#[derive(Clone, Debug, PartialEq)]
pub enum Half {
    /// A single buffer.
    Single,
    /// The half that [`Stmt::SelectHalf`] chose for the tile being computed.
    Current,
    /// The half at this index (0 or 1).
    At(Int),
}

/// An element in memory.
#[derive(Clone, Debug, PartialEq)]
pub enum Place {
    /// Element `index` of an LDM buffer.
    Ldm { buf: Buf, half: Half, index: Int },
    /// Element `index` of a tensor in main memory, accessed directly. `write` marks the
    /// accesses of the target (checked as writes, in the C as `SWFLOW_GSTORE`).
    Main { field: Field, index: Int, write: bool },
}

/// An element value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Load(Place),
    Const(Scalar),
    /// `op` on operands of type `DType`.
    Unary(UnaryOp, DType, Box<Value>),
    Binary(BinaryOp, DType, Box<Value>, Box<Value>),
    Select(Box<Value>, Box<Value>, Box<Value>),
    /// From the first type to the second.
    Cast(DType, DType, Box<Value>),
    /// An integer expression's value, as an i64 element (a tape stack's entry).
    Index(Int),
}

/// A box of a tensor moved between main memory and an LDM buffer (runtime-c's
/// `swflow_dma_box`, or `swflow_dma_box_padded` for a guarded read): one row of each of the
/// `start` and `extent` arrays (`row` selects it in a `[2][rank]` array). Its transfers carry
/// `class`: a box of another class than [`DmaClass::Data`] sets its CPE's class before it and
/// sets data again after it.
#[derive(Clone, Debug, PartialEq)]
pub struct BoxDma {
    pub put: bool,
    /// A guarded read's get, whose box may leave the tensor (it brings the part inside).
    pub padded: bool,
    pub buf: Buf,
    pub half: Half,
    pub field: Field,
    pub shape: Array,
    pub start: Array,
    pub extent: Array,
    pub row: Option<Int>,
    /// Where the box lies in the buffer (or its half), in elements from its start: a slice of
    /// a split shared box; none for a box at the start.
    pub offset: Option<Int>,
    /// The variable counting transfers issued on the reply counter.
    pub issued: Var,
    pub reply: usize,
    pub class: DmaClass,
}

/// Finishing a guarded read's box once its get is complete (runtime-c's `swflow_pad_box`):
/// packed rows moved to their places, every element outside the tensor set to `pad`.
#[derive(Clone, Debug, PartialEq)]
pub struct BoxPad {
    pub buf: Buf,
    pub half: Half,
    pub shape: Array,
    pub start: Array,
    pub extent: Array,
    pub row: Option<Int>,
    /// As [`BoxDma::offset`].
    pub offset: Option<Int>,
    pub pad: Scalar,
}

/// A statement.
#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    /// Text for the reader of the C.
    Comment(String),
    Set(Var, Int),
    /// `array[index...] = value`.
    SetElem(Array, Vec<Int>, Int),
    /// `for (var = from; var < to; var += step)`: `to` is evaluated before each iteration and
    /// `step` after it, as in C.
    For {
        var: Var,
        from: Int,
        to: Int,
        step: Int,
        body: Vec<Stmt>,
    },
    If {
        cond: Cond,
        then: Vec<Stmt>,
        otherwise: Vec<Stmt>,
    },
    /// `count` executions of code doing `ops`, for the timing model (nothing when `count`
    /// is not positive).
    Charge {
        ops: Ops,
        count: Int,
    },
    /// Zeroes the reply counters and fetches the parameter struct by DMA on counter 0. (Every
    /// program declares its LDM buffers, and the copy of the parameter struct, at entry.)
    FetchParams,
    /// Issues the box DMA; adds the transfers to its `issued` variable.
    Dma(BoxDma),
    /// Finishes a guarded read's box after the wait for its get.
    Pad(BoxPad),
    /// Waits until reply counter `reply` reaches `count`.
    Wait {
        reply: usize,
        count: Int,
    },
    /// A broadcast along this CPE's mesh row or column (register communication on SW26010,
    /// remote LDM access on SW26010-Pro) from the CPE at position `root` of the line: with
    /// `send` (on that CPE), `bytes` (a multiple of 32) of the buffer (or its half), from
    /// `offset` elements into it (none: from its start), go to every other CPE of the line
    /// (`SWFLOW_SHARE_SEND`); without, this CPE takes as many from the line into the same
    /// place (`SWFLOW_SHARE_RECV`).
    Broadcast {
        line: MeshLine,
        send: bool,
        root: Int,
        buf: Buf,
        half: Half,
        offset: Option<Int>,
        bytes: Int,
    },
    /// A posted broadcast along this CPE's mesh row or column (remote LDM access only): the
    /// `bytes` (a multiple of 32) of the buffer's `half`, from `offset` elements into it,
    /// land in the same place of every CPE of the line, this one included, without waiting
    /// (`SWFLOW_SHARE_POST`); reply counter `sent` counts this CPE's sends, and each CPE counts
    /// the arrival in its reply counter `reply`.
    Post {
        line: MeshLine,
        buf: Buf,
        half: Half,
        offset: Option<Int>,
        bytes: Int,
        sent: usize,
        reply: Int,
    },
    /// Waits until reply counter `reply` holds at least `count`, the blocks posted along
    /// `line` landing meanwhile (`SWFLOW_SHARE_WAIT`).
    ArrivalWait {
        line: MeshLine,
        reply: Int,
        count: Int,
    },
    /// Meets the CPEs of this CPE's mesh row or column, or with [`MeshLine::Mesh`] all the
    /// CPEs (`SWFLOW_SYNC_LINE`, `SWFLOW_SYNC_ALL`).
    Sync {
        line: MeshLine,
    },
    /// Chooses the current half of a double buffer (half `var`) for the compute loops, which
    /// write it when `write` (the target's) and only read it otherwise.
    SelectHalf {
        buf: Buf,
        var: Var,
        write: bool,
    },
    Store {
        place: Place,
        value: Value,
    },
    /// `reg` = the [`Func::lanes`] f32 elements from `place` on (`simd_loadu`; with `aligned`,
    /// `simd_load`), or with `broadcast` the one at `place` in every lane (`simd_loade`). LDM
    /// places only. `aligned` promises that the place's index, counted from its buffer's
    /// half, is a multiple of the lanes (so its address is a multiple of a vector's bytes:
    /// see [`swflow_scheduler::schedule::LDM_BUFFER_ALIGN`]); both engines check it.
    VLoad {
        reg: VReg,
        place: Place,
        broadcast: bool,
        aligned: bool,
    },
    /// The lanes of `reg` to the elements from `place` on (`simd_storeu`; with `aligned`, as
    /// for [`Stmt::VLoad`], `simd_store`). LDM places only.
    VStore {
        reg: VReg,
        place: Place,
        aligned: bool,
    },
    /// Lanes `first..first + count` of `reg` (`count` from 1, `first + count` at most
    /// [`Func::lanes`]) to the `count` elements from `place` on: the register goes to a local
    /// array, and those lanes are copied one by one (`SWFLOW_VSTORE_LANES`). A tail stores a
    /// vector's last lanes, a head its first. LDM places only.
    VStoreLanes {
        reg: VReg,
        place: Place,
        first: Int,
        count: Int,
    },
    /// `reg` = the [`Func::lanes`] f32 elements from `place` on, `stride` elements apart
    /// (`SWFLOW_VLOAD_STRIDED`, `simd_set_floatv4` or `simd_set_floatv8` of them). LDM places
    /// only.
    VLoadStrided {
        reg: VReg,
        place: Place,
        stride: i64,
    },
    /// `reg` = `value` in every lane (`SWFLOW_VSPLAT`: a broadcast load of it).
    VSplat {
        reg: VReg,
        value: f32,
    },
    /// `dst = op(a, b)` lane by lane, each lane as the scalar operation computes it: `+ - *
    /// /` of the vector type, or `SWFLOW_VMAX`/`SWFLOW_VMIN`, which pick NaN operands as
    /// `swflow_max_f32`/`swflow_min_f32` do. Only those six operators.
    VBinary {
        op: BinaryOp,
        dst: VReg,
        a: VReg,
        b: VReg,
    },
    /// `dst = op(a)` lane by lane, each lane as the scalar operation computes it: the square
    /// root (`simd_vsqrts`), correctly rounded. Only that operator.
    VUnary {
        op: UnaryOp,
        dst: VReg,
        a: VReg,
    },
    /// `acc = a * b + acc` lane by lane, each rounded once (`simd_vmas`).
    VFma {
        acc: VReg,
        a: VReg,
        b: VReg,
    },
    /// `place = fold(place, value)`. A float sum of a product (see [`fused_product`]) is one
    /// fused multiply-add, `place = fma(a, b, place)`, rounded once: what the vector code's
    /// `simd_vmas` computes, so that blocked, vector and scalar code give every element the
    /// same value.
    Fold {
        kind: ReduceKind,
        dtype: DType,
        place: Place,
        value: Value,
    },
}

/// The factors of a fold that is one fused multiply-add: a float [`ReduceKind::Sum`] of a
/// product.
pub fn fused_product(kind: ReduceKind, dtype: DType, value: &Value) -> Option<(&Value, &Value)> {
    match value {
        Value::Binary(BinaryOp::Mul, d, a, b)
            if kind == ReduceKind::Sum && matches!(dtype, DType::F32 | DType::F64) && *d == dtype =>
        {
            Some((a, b))
        }
        _ => None,
    }
}
