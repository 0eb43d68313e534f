//! DMA classes, and the stack discipline of streamed tape.
//!
//! Every DMA carries a [`DmaClass`]: the emulator counts and times tape traffic apart from
//! ordinary data (it is counted in the ordinary totals too), and checks that streamed tape
//! comes back in the reverse order it went out. Which transfers carry tape is the compiler's
//! decision; the generated code states it by setting its CPE's current class before the
//! transfers (`swflow_emu_dma_class`, `swflow_native_dma_class`). Each CPE's class is
//! [`DmaClass::Data`] when a launch starts.
//!
//! Streamed tape is a stack per CPE that outlives launches (the forward kernels push, the
//! backward kernels pop): a [`DmaClass::TapeStream`] put is one contiguous layer that must
//! start where the last layer pushed ends (anywhere when none is outstanding), and a
//! `TapeStream` get must bring back exactly the last layer pushed, which it pops.

use std::fmt;

/// What a DMA carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DmaClass {
    /// Ordinary tensor data.
    #[default]
    Data,
    /// Gradient tape with random access: values the forward pass saves for the backward
    /// pass, read back in any order (per-tensor saved tensors, per-tile records).
    Tape,
    /// Streamed gradient tape: per CPE, pushed out in FIFO order and popped back in LIFO
    /// order, one contiguous transfer per layer.
    TapeStream,
}

impl DmaClass {
    /// The class with C ABI code `code` (0 `Data`, 1 `Tape`, 2 `TapeStream`, as
    /// `swflow_slave.h` numbers them), if any.
    pub fn from_code(code: i64) -> Option<DmaClass> {
        match code {
            0 => Some(DmaClass::Data),
            1 => Some(DmaClass::Tape),
            2 => Some(DmaClass::TapeStream),
            _ => None,
        }
    }

    /// Its C ABI code.
    pub fn code(self) -> i32 {
        match self {
            DmaClass::Data => 0,
            DmaClass::Tape => 1,
            DmaClass::TapeStream => 2,
        }
    }

    /// Whether it carries gradient tape (either tape class).
    pub fn is_tape(self) -> bool {
        self != DmaClass::Data
    }
}

/// A layer of streamed tape still outstanding: the main memory a `TapeStream` put wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Layer {
    pub main: usize,
    pub len: usize,
    /// The kernel that pushed it.
    pub kernel: String,
}

/// One CPE's outstanding layers, the last pushed on top.
#[derive(Debug, Default)]
pub(crate) struct TapeStack {
    layers: Vec<Layer>,
}

/// Why a `TapeStream` transfer breaks the stack discipline; `place` renders a main-memory
/// address for the message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum StackError {
    /// A put that does not start where the top layer ends.
    Gap { main: usize, len: usize, top: Layer },
    /// A get with no layer outstanding.
    Empty { main: usize, len: usize },
    /// A get of something other than the top layer.
    NotTop { main: usize, len: usize, top: Layer },
}

impl StackError {
    /// The violation's message, with main-memory addresses rendered by `place`.
    pub fn message(&self, place: &dyn Fn(usize) -> String) -> String {
        let layer = |l: &Layer| format!("{} bytes at {}, pushed by kernel '{}'", l.len, place(l.main), l.kernel);
        match self {
            StackError::Gap { main, len, top } => format!(
                "tape stream put of {len} bytes at {} does not start where the last pushed layer ({}) ends, at {}",
                place(*main),
                layer(top),
                place(top.main + top.len)
            ),
            StackError::Empty { main, len } => format!(
                "tape stream get of {len} bytes at {} pops no layer: none is outstanding",
                place(*main)
            ),
            StackError::NotTop { main, len, top } => format!(
                "tape stream get of {len} bytes at {} is not the last pushed layer ({})",
                place(*main),
                layer(top)
            ),
        }
    }
}

impl fmt::Display for StackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message(&|a| format!("{a:#x}")))
    }
}

impl TapeStack {
    /// Pushes the layer a put of `len` bytes at `main` writes, if it starts where the top
    /// layer ends.
    pub fn push(&mut self, main: usize, len: usize, kernel: &str) -> Result<(), StackError> {
        if let Some(top) = self.layers.last() {
            if top.main + top.len != main {
                return Err(StackError::Gap {
                    main,
                    len,
                    top: top.clone(),
                });
            }
        }
        self.layers.push(Layer {
            main,
            len,
            kernel: kernel.to_string(),
        });
        Ok(())
    }

    /// Pops the top layer, if a get of `len` bytes at `main` brings exactly it back.
    pub fn pop(&mut self, main: usize, len: usize) -> Result<(), StackError> {
        match self.layers.last() {
            None => Err(StackError::Empty { main, len }),
            Some(top) if top.main != main || top.len != len => Err(StackError::NotTop {
                main,
                len,
                top: top.clone(),
            }),
            Some(_) => {
                self.layers.pop();
                Ok(())
            }
        }
    }

    /// Forgets every outstanding layer.
    pub fn clear(&mut self) {
        self.layers.clear();
    }

    /// How many layers are outstanding.
    pub fn depth(&self) -> usize {
        self.layers.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_codes_round_trip_and_others_are_none() {
        for c in [DmaClass::Data, DmaClass::Tape, DmaClass::TapeStream] {
            assert_eq!(DmaClass::from_code(c.code().into()), Some(c));
        }
        assert_eq!(DmaClass::from_code(3), None);
        assert_eq!(DmaClass::from_code(-1), None);
        assert!(!DmaClass::Data.is_tape() && DmaClass::Tape.is_tape() && DmaClass::TapeStream.is_tape());
    }

    #[test]
    fn layers_pop_in_reverse_order_of_their_pushes() {
        let mut s = TapeStack::default();
        s.push(1000, 64, "f1").unwrap();
        s.push(1064, 32, "f2").unwrap();
        assert_eq!(s.depth(), 2);
        s.pop(1064, 32).unwrap();
        s.pop(1000, 64).unwrap();
        assert_eq!(s.depth(), 0);
        // An empty stack takes a layer anywhere.
        s.push(5000, 8, "f3").unwrap();
    }

    #[test]
    fn breaking_the_discipline_says_what_was_expected() {
        let mut s = TapeStack::default();
        s.push(1000, 64, "f1").unwrap();
        let gap = s.push(1100, 64, "f2").unwrap_err();
        assert_eq!(
            gap.to_string(),
            "tape stream put of 64 bytes at 0x44c does not start where the last pushed layer \
             (64 bytes at 0x3e8, pushed by kernel 'f1') ends, at 0x428"
        );
        s.push(1064, 16, "f2").unwrap();
        let first = s.pop(1000, 64).unwrap_err();
        assert_eq!(
            first.to_string(),
            "tape stream get of 64 bytes at 0x3e8 is not the last pushed layer \
             (16 bytes at 0x428, pushed by kernel 'f2')"
        );
        // A get of the right place but the wrong length is no pop either.
        assert!(matches!(s.pop(1064, 8), Err(StackError::NotTop { .. })));
        assert_eq!(s.depth(), 2);
        s.clear();
        assert_eq!(s.pop(1000, 64), Err(StackError::Empty { main: 1000, len: 64 }));
    }
}
