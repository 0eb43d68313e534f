//! What the CPEs of a launch do to each other: register communication on SW26010's 8 x 8 mesh
//! and barriers, with the checks that turn what would hang the hardware into violations.
//!
//! CPE `id` sits at row `id / 8`, column `id % 8`. A put (`simd_putr`, `simd_putc`) sends one
//! register of at most 32 bytes along the sender's row or column, either to one index of it
//! (0 to 7: the column index for a row, the row index for a column) or to every other CPE of
//! it (index 8); a get (`simd_getr`, `simd_getc`) takes the oldest message in the receiver's
//! row or column buffer, waiting until one arrives. A message to a CPE comes after every
//! message put to it before (a broadcast reaches all its receivers at once), so programs that
//! order their puts through their gets, as SUMMA's steps do, receive in program order. Every
//! message of a launch must be received in it; a get must ask for as many bytes as were put.
//! A block ([`Mesh::put_block`]) is one message of many registers to every other CPE of the
//! line, which the receivers take whole: what a loop of register broadcasts and the matching
//! loops of gets move on SW26010, or a collective remote-LDM broadcast on SW26010-Pro.
//! A posted block ([`Mesh::post`]) is remote LDM access's broadcast that only its sender
//! calls: it lands in the same place of every other CPE of the line, each of which counts its
//! arrival in a word of its LDM and waits for the count it expects. Here a posted block waits
//! in the receiver's buffer like any message and lands when the receiver waits for its count
//! ([`Mesh::take`]), which the hardware's earlier landing cannot tell apart from a program
//! that leaves the place alone until then. Line syncs ([`Mesh::sync_line`]) meet the CPEs of
//! one row or column, as barriers meet the launch's.
//!
//! The mesh knows what each CPE of the running launch is doing: running, waiting for a
//! message, waiting at a barrier, or returned. When no CPE runs and some still wait, none of
//! them will ever move on: the launch is stuck, a violation naming the kernel and the lowest
//! waiting CPE, which every waiting CPE gets instead of hanging.
//!
//! The receive buffers are unbounded here. The hardware's hold a few messages and stall a put
//! into a full one; no public source gives their depth, so a program whose puts run far ahead
//! of its gets may stall on the hardware where it runs here.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};

use crate::machine::Violation;

/// CPEs in a row of the mesh, and rows.
pub const MESH_SIDE: usize = 8;
/// The most bytes one message carries: one 256-bit register.
pub const MESSAGE_BYTES: usize = 32;
/// The destination index that sends to every other CPE of the line.
pub const BROADCAST: u32 = 8;

/// The line of the mesh a message travels along.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Line {
    Row,
    Column,
}

impl Line {
    /// From the C ABI's code: 0 row, 1 column.
    pub fn from_code(code: i32) -> Option<Line> {
        match code {
            0 => Some(Line::Row),
            1 => Some(Line::Column),
            _ => None,
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    /// The SDK's name of a put along it.
    pub(crate) fn put_name(self) -> &'static str {
        match self {
            Line::Row => "putr",
            Line::Column => "putc",
        }
    }

    /// The SDK's name of a posted remote-LDM broadcast along it.
    pub(crate) fn post_name(self) -> &'static str {
        match self {
            Line::Row => "rma_row_ibcast",
            Line::Column => "rma_col_ibcast",
        }
    }

    /// The SDK's name of a sync of its CPEs.
    pub(crate) fn sync_name(self) -> &'static str {
        match self {
            Line::Row => "ssync_row",
            Line::Column => "ssync_col",
        }
    }

    /// The SDK's name of a get along it.
    pub(crate) fn get_name(self) -> &'static str {
        match self {
            Line::Row => "getr",
            Line::Column => "getc",
        }
    }

    pub(crate) fn noun(self) -> &'static str {
        match self {
            Line::Row => "row",
            Line::Column => "column",
        }
    }

    /// The CPE at `index` of the line through `cpe`.
    fn member(self, cpe: usize, index: usize) -> usize {
        match self {
            Line::Row => cpe / MESH_SIDE * MESH_SIDE + index,
            Line::Column => index * MESH_SIDE + cpe % MESH_SIDE,
        }
    }

    /// `cpe`'s own index along the line.
    fn position(self, cpe: usize) -> usize {
        match self {
            Line::Row => cpe % MESH_SIDE,
            Line::Column => cpe / MESH_SIDE,
        }
    }

    /// Which line of its kind `cpe` is on: its row's index, or its column's.
    pub(crate) fn which(self, cpe: usize) -> usize {
        match self {
            Line::Row => cpe / MESH_SIDE,
            Line::Column => cpe % MESH_SIDE,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Running,
    Receiving(Line),
    AtBarrier,
    AtLineSync(Line),
    Returned,
}

/// Where a posted block lands on each receiver: a declared LDM buffer (by its place among
/// the kernel's declarations, which every CPE makes in the same order, and its name) and the
/// offset in it, and the word that counts its arrival (a buffer's place and an offset).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Landing {
    pub buffer: usize,
    pub name: String,
    pub offset: usize,
    pub counter: (usize, usize),
}

/// A register, or a block of registers sent in one go ([`Mesh::put_block`]), or a posted
/// block with where it lands ([`Mesh::post`]).
pub(crate) struct Message {
    pub from: usize,
    pub bytes: Vec<u8>,
    pub landing: Option<Landing>,
}

struct State {
    kernel: String,
    status: Vec<Status>,
    /// Per CPE, its row and column receive buffers.
    inbox: Vec<[VecDeque<Message>; 2]>,
    barrier_generation: u64,
    /// Per line (row, column) and index of it, the syncs it has completed.
    line_generation: [[u64; MESH_SIDE]; 2],
    /// Why the launch cannot go on, once it cannot.
    stuck: Option<Violation>,
}

impl State {
    fn violation(&self, cpe: usize, message: String) -> Violation {
        Violation {
            kernel: self.kernel.clone(),
            cpes: vec![cpe],
            message,
        }
    }

    /// Whether CPE `c` waits with nothing that could wake it but another CPE's progress.
    fn blocked(&self, c: usize) -> bool {
        match self.status[c] {
            Status::Receiving(l) => self.inbox[c][l.index()].is_empty(),
            Status::AtBarrier | Status::AtLineSync(_) => true,
            Status::Running | Status::Returned => false,
        }
    }

    /// Finds whether the launch is stuck: no CPE runs (or has a message to take) and some
    /// wait. The violation names the lowest CPE waiting for a message, else the lowest
    /// waiting at a barrier.
    fn check_stuck(&mut self) {
        if self.stuck.is_some() {
            return;
        }
        let n = self.status.len();
        if (0..n).any(|c| self.status[c] != Status::Returned && !self.blocked(c)) {
            return;
        }
        let receiving = |c: &usize| matches!(self.status[*c], Status::Receiving(_));
        let Some(first) = (0..n).find(receiving).or_else(|| (0..n).find(|&c| self.blocked(c))) else {
            return;
        };
        let count = |f: fn(&Status) -> bool| self.status.iter().filter(|s| f(s)).count();
        let receiving = count(|s| matches!(s, Status::Receiving(_)));
        let at_barrier = count(|s| *s == Status::AtBarrier);
        let at_sync = count(|s| matches!(s, Status::AtLineSync(_)));
        let returned = count(|s| *s == Status::Returned);
        let syncing = match at_sync {
            0 => String::new(),
            n => format!(", {n} at a line sync"),
        };
        let others = format!(
            "every CPE of the launch waits or has returned ({receiving} in a receive, {at_barrier} at a barrier{syncing}, {returned} returned)"
        );
        let message = match self.status[first] {
            Status::Receiving(l) => format!(
                "{} waits for a message that no CPE of its {} will send: {others}",
                l.get_name(),
                l.noun()
            ),
            Status::AtLineSync(l) => format!(
                "waits at a {} sync that not every CPE of its {} will reach: {others}",
                l.noun(),
                l.noun()
            ),
            _ => format!("waits at a barrier that not every CPE will reach: {others}"),
        };
        self.stuck = Some(self.violation(first, message));
    }
}

/// The running launch's register communication and barriers.
pub(crate) struct Mesh {
    cpes: usize,
    state: Mutex<State>,
    /// Per CPE, signalled when something it may wait for happens.
    wake: Vec<Condvar>,
}

impl Mesh {
    pub fn new(cpes: usize) -> Mesh {
        Mesh {
            cpes,
            state: Mutex::new(State {
                kernel: String::new(),
                status: vec![Status::Running; cpes],
                inbox: (0..cpes).map(|_| Default::default()).collect(),
                barrier_generation: 0,
                line_generation: [[0; MESH_SIDE]; 2],
                stuck: None,
            }),
            wake: (0..cpes).map(|_| Condvar::new()).collect(),
        }
    }

    fn wake_all(&self) {
        for w in &self.wake {
            w.notify_all();
        }
    }

    /// Waits on CPE `cpe`'s signal.
    fn wait<'a>(&self, cpe: usize, st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.wake[cpe].wait(st).unwrap_or_else(|e| e.into_inner())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Readies the mesh for a launch of `kernel` (every CPE running, every buffer empty).
    pub fn start(&self, kernel: &str) {
        let mut st = self.lock();
        st.kernel = kernel.to_string();
        st.status.fill(Status::Running);
        for b in &mut st.inbox {
            b[0].clear();
            b[1].clear();
        }
        st.stuck = None;
    }

    /// CPE `cpe` returned from its kernel.
    pub fn returned(&self, cpe: usize) {
        let mut st = self.lock();
        st.status[cpe] = Status::Returned;
        st.check_stuck();
        if st.stuck.is_some() {
            self.wake_all();
        }
    }

    /// Sends the `data` bytes from `from` along `line` to index `dst` of it, or to its other
    /// CPEs when `dst` is [`BROADCAST`]; returns the receivers as a bit set of CPE ids.
    pub fn put(&self, from: usize, line: Line, dst: u32, data: &[u8]) -> Result<u64, Violation> {
        let st = self.lock();
        self.check_mesh(&st, from, line)?;
        if data.is_empty() || data.len() > MESSAGE_BYTES {
            return Err(st.violation(
                from,
                format!(
                    "{} sends {} bytes; a message is one register of at most {MESSAGE_BYTES}",
                    line.put_name(),
                    data.len()
                ),
            ));
        }
        let me = line.position(from);
        let to: Vec<usize> = match dst & 0xf {
            BROADCAST => (0..MESH_SIDE)
                .filter(|&i| i != me)
                .map(|i| line.member(from, i))
                .collect(),
            d if (d as usize) < MESH_SIDE && d as usize != me => vec![line.member(from, d as usize)],
            d if (d as usize) < MESH_SIDE => {
                return Err(st.violation(
                    from,
                    format!(
                        "{} to index {d}, its own place in its {}: a CPE does not receive its own messages",
                        line.put_name(),
                        line.noun()
                    ),
                ))
            }
            d => {
                return Err(st.violation(
                    from,
                    format!(
                        "{} to index {d}: only 0 to 7 (one CPE of the {}) or 8 (all the others) exist",
                        line.put_name(),
                        line.noun()
                    ),
                ))
            }
        };
        Ok(self.deliver(st, from, line, &to, data, None))
    }

    /// Sends the `data` bytes from `from` to every other CPE of its `line` as one block of
    /// registers (the hardware's loop of broadcasts, which a block get of as many bytes
    /// takes whole); returns the receivers as a bit set of CPE ids.
    pub fn put_block(&self, from: usize, line: Line, data: &[u8]) -> Result<u64, Violation> {
        self.to_the_others(from, line, data, None)
    }

    /// Posts the `data` bytes from `from` to every other CPE of its `line`, to land where
    /// `landing` says when each takes it ([`Mesh::take`]); returns the receivers as a bit set
    /// of CPE ids.
    pub fn post(&self, from: usize, line: Line, data: &[u8], landing: Landing) -> Result<u64, Violation> {
        self.to_the_others(from, line, data, Some(landing))
    }

    /// Sends `data` from `from` to every other CPE of its `line` as one message; returns the
    /// receivers as a bit set of CPE ids.
    fn to_the_others(&self, from: usize, line: Line, data: &[u8], landing: Option<Landing>) -> Result<u64, Violation> {
        let st = self.lock();
        self.check_mesh(&st, from, line)?;
        let me = line.position(from);
        let to: Vec<usize> = (0..MESH_SIDE)
            .filter(|&i| i != me)
            .map(|i| line.member(from, i))
            .collect();
        Ok(self.deliver(st, from, line, &to, data, landing))
    }

    fn check_mesh(&self, st: &State, from: usize, line: Line) -> Result<(), Violation> {
        match self.cpes == MESH_SIDE * MESH_SIDE {
            true => Ok(()),
            false => Err(st.violation(
                from,
                format!(
                    "uses {}, which needs the 8 x 8 mesh of 64 CPEs; this machine has {}",
                    line.put_name(),
                    self.cpes
                ),
            )),
        }
    }

    fn deliver(
        &self,
        mut st: MutexGuard<'_, State>,
        from: usize,
        line: Line,
        to: &[usize],
        data: &[u8],
        landing: Option<Landing>,
    ) -> u64 {
        for &c in to {
            st.inbox[c][line.index()].push_back(Message {
                from,
                bytes: data.to_vec(),
                landing: landing.clone(),
            });
            self.wake[c].notify_all();
        }
        to.iter().fold(0u64, |set, &c| set | 1 << c)
    }

    /// Takes `cpe`'s oldest message along `line` into `out`, waiting for one.
    pub fn get(&self, cpe: usize, line: Line, out: &mut [u8]) -> Result<(), Violation> {
        let m = self.take(cpe, line)?;
        let wrong = match (&m.landing, m.bytes.len() == out.len()) {
            (Some(_), _) => Some(format!("a block of {} bytes that CPE {} posted", m.bytes.len(), m.from)),
            (None, false) => Some(format!("a message of {} bytes that CPE {} put", m.bytes.len(), m.from)),
            (None, true) => None,
        };
        if let Some(what) = wrong {
            let st = self.lock();
            return Err(st.violation(
                cpe,
                format!("{} takes {} bytes from {what}", line.get_name(), out.len()),
            ));
        }
        out.copy_from_slice(&m.bytes);
        Ok(())
    }

    /// Takes `cpe`'s oldest message along `line`, waiting for one.
    pub fn take(&self, cpe: usize, line: Line) -> Result<Message, Violation> {
        let mut st = self.lock();
        loop {
            if let Some(m) = st.inbox[cpe][line.index()].pop_front() {
                st.status[cpe] = Status::Running;
                return Ok(m);
            }
            if let Some(v) = &st.stuck {
                return Err(v.clone());
            }
            if st.status[cpe] != Status::Receiving(line) {
                st.status[cpe] = Status::Receiving(line);
                st.check_stuck();
                if st.stuck.is_some() {
                    self.wake_all();
                    continue;
                }
            }
            st = self.wait(cpe, st);
        }
    }

    /// Waits until every CPE of the launch has arrived.
    pub fn barrier(&self, cpe: usize) -> Result<(), Violation> {
        let mut st = self.lock();
        if let Some(v) = &st.stuck {
            return Err(v.clone());
        }
        st.status[cpe] = Status::AtBarrier;
        if st.status.iter().all(|s| *s == Status::AtBarrier) {
            st.barrier_generation += 1;
            st.status.fill(Status::Running);
            self.wake_all();
            return Ok(());
        }
        st.check_stuck();
        if st.stuck.is_some() {
            self.wake_all();
        }
        let generation = st.barrier_generation;
        loop {
            if st.barrier_generation != generation {
                return Ok(());
            }
            if let Some(v) = &st.stuck {
                return Err(v.clone());
            }
            st = self.wait(cpe, st);
        }
    }

    /// Waits until every CPE of `cpe`'s `line` (its row or its column) has arrived.
    pub fn sync_line(&self, cpe: usize, line: Line) -> Result<(), Violation> {
        let mut st = self.lock();
        self.check_mesh(&st, cpe, line)?;
        if let Some(v) = &st.stuck {
            return Err(v.clone());
        }
        let members: Vec<usize> = (0..MESH_SIDE).map(|i| line.member(cpe, i)).collect();
        let which = line.which(cpe);
        st.status[cpe] = Status::AtLineSync(line);
        if members.iter().all(|&m| st.status[m] == Status::AtLineSync(line)) {
            st.line_generation[line.index()][which] += 1;
            for &m in &members {
                st.status[m] = Status::Running;
            }
            self.wake_all();
            return Ok(());
        }
        st.check_stuck();
        if st.stuck.is_some() {
            self.wake_all();
        }
        let generation = st.line_generation[line.index()][which];
        loop {
            if st.line_generation[line.index()][which] != generation {
                return Ok(());
            }
            if let Some(v) = &st.stuck {
                return Err(v.clone());
            }
            st = self.wait(cpe, st);
        }
    }

    /// After the launch: a message nobody received, as a violation of its receiver.
    pub fn leftovers(&self) -> Option<Violation> {
        let st = self.lock();
        (0..self.cpes).find_map(|c| {
            [Line::Row, Line::Column].into_iter().find_map(|l| {
                let q = &st.inbox[c][l.index()];
                q.front().map(|m| {
                    st.violation(
                        c,
                        format!(
                            "returns with {} message(s) in its {} buffer never taken by {} (the first put by CPE {})",
                            q.len(),
                            l.noun(),
                            l.get_name(),
                            m.from
                        ),
                    )
                })
            })
        })
    }
}
