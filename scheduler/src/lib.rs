//! swflow scheduler: lowers graph-IR nodes to loop nests ([`loops`]) and schedules them for
//! the compute cores of a core group described by a [`target::Target`].

pub mod elide;
pub mod exec;
pub mod loops;
pub mod lower;
pub mod memplan;
pub mod pipeline;
pub mod schedule;
pub mod tape;
pub mod target;
