//! Target descriptions: the numbers of a scratchpad many-core machine, as data.
//!
//! Built-in targets live in `scheduler/targets/*.toml`; users pass their own TOML file with
//! the same fields. Passes read every hardware number from a [`Target`], never from literals.

use std::path::Path;

use serde::Deserialize;
use swflow_emulator::timing::{Spec, Timing};

/// Which runtime API generated code uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// SW26010: `athread_*`.
    Athread,
    /// SW26010-Pro: `CRTS_*`.
    Crts,
}

/// DMA engine parameters besides its timing (`[timing.dma]`, [`Target::timing`]).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dma {
    /// LDM bytes of one reply counter.
    pub reply_bytes: usize,
}

/// One core group of a scratchpad many-core processor.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    pub name: String,
    pub description: String,
    pub api: Api,
    /// Compute cores per core group.
    pub cpes: usize,
    /// Rows and columns of the CPE mesh.
    pub mesh: [usize; 2],
    /// Scratchpad bytes per CPE.
    pub ldm_bytes: usize,
    /// LDM bytes kept free for the stack, locals and the parameter struct.
    pub stack_reserve_bytes: usize,
    pub clock_hz: f64,
    /// Peak floating-point operations per cycle of one CPE.
    pub flops_per_cycle: f64,
    /// f32 values one vector register of a CPE holds; 1 (the default) for scalar code only.
    #[serde(default = "scalar_lanes")]
    pub f32_vector_lanes: usize,
    /// Alignment of tensors in the main-memory arena, bytes (a power of two).
    pub memory_alignment_bytes: usize,
    /// Theoretical main-memory bandwidth of the core group, bytes per second.
    pub memory_bandwidth_bytes_per_s: f64,
    /// The scheduler's own DMA cost estimate.
    pub dma: Dma,
    /// The emulator's timing model (its parameters and their sources are in the file).
    pub timing: Timing,
}

#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("unknown target '{0}' (built in: sw26010, sw26010pro; or a path to a .toml file)")]
    Unknown(String),
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
}

fn scalar_lanes() -> usize {
    1
}

/// Largest CPE count a target may declare (the executor models every CPE).
pub const MAX_CPES: usize = 4096;
/// Largest scratchpad a target may declare, per CPE (the executor allocates it).
pub const MAX_LDM_BYTES: usize = 1 << 30;

const BUILT_IN: [(&str, &str); 2] = [
    ("sw26010", include_str!("../targets/sw26010.toml")),
    ("sw26010pro", include_str!("../targets/sw26010pro.toml")),
];

impl Target {
    /// A built-in target by name, or a target file when `spec` names one (ends in `.toml`).
    pub fn resolve(spec: &str) -> Result<Target, TargetError> {
        if let Some((_, text)) = BUILT_IN.iter().find(|(n, _)| *n == spec) {
            return Target::parse(text, spec);
        }
        if spec.ends_with(".toml") {
            let text = std::fs::read_to_string(Path::new(spec)).map_err(|source| TargetError::Io {
                path: spec.into(),
                source,
            })?;
            return Target::parse(&text, spec);
        }
        Err(TargetError::Unknown(spec.into()))
    }

    pub fn sw26010() -> Target {
        Target::resolve("sw26010").expect("the built-in target parses")
    }

    pub fn sw26010pro() -> Target {
        Target::resolve("sw26010pro").expect("the built-in target parses")
    }

    /// Parses and checks a target description; `path` names it in errors.
    pub fn parse(text: &str, path: &str) -> Result<Target, TargetError> {
        let invalid = |message: String| TargetError::Invalid {
            path: path.into(),
            message,
        };
        let t: Target = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
        if t.cpes == 0 || t.mesh[0].checked_mul(t.mesh[1]) != Some(t.cpes) {
            return Err(invalid(format!("mesh {:?} must hold exactly {} CPEs", t.mesh, t.cpes)));
        }
        if !t.memory_alignment_bytes.is_power_of_two() {
            return Err(invalid("memory_alignment_bytes must be a power of two".into()));
        }
        if t.cpes > MAX_CPES || t.ldm_bytes > MAX_LDM_BYTES {
            return Err(invalid(format!(
                "at most {MAX_CPES} CPEs and {MAX_LDM_BYTES} LDM bytes per CPE are supported"
            )));
        }
        if t.dma.reply_bytes == 0 || t.dma.reply_bytes > t.ldm_bytes {
            return Err(invalid("dma.reply_bytes must be between 1 and ldm_bytes".into()));
        }
        if !matches!(t.f32_vector_lanes, 1 | 4 | 8) {
            return Err(invalid("f32_vector_lanes must be 1, 4 or 8".into()));
        }
        if t.stack_reserve_bytes >= t.ldm_bytes {
            return Err(invalid("stack_reserve_bytes must be smaller than ldm_bytes".into()));
        }
        let positive = [t.clock_hz, t.flops_per_cycle, t.memory_bandwidth_bytes_per_s];
        if positive.iter().any(|&v| v.is_nan() || v <= 0.0) {
            return Err(invalid("clock, flops, bandwidths must be positive".into()));
        }
        t.machine_spec().check().map_err(invalid)?;
        Ok(t)
    }

    /// What the emulator needs to time programs for this target.
    pub fn machine_spec(&self) -> Spec {
        Spec {
            clock_hz: self.clock_hz,
            flops_per_cycle: self.flops_per_cycle,
            timing: self.timing.clone(),
        }
    }

    /// LDM bytes per CPE left to buffers and reply counters once the stack reserve is kept.
    pub fn ldm_budget(&self) -> usize {
        self.ldm_bytes - self.stack_reserve_bytes
    }

    /// Peak floating-point operations per second of the CPEs.
    pub fn peak_flops(&self) -> f64 {
        self.cpes as f64 * self.flops_per_cycle * self.clock_hz
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_targets_match_the_hardware_facts() {
        let a = Target::sw26010();
        assert_eq!((a.cpes, a.ldm_bytes, a.api), (64, 64 * 1024, Api::Athread));
        // 64 CPEs x 8 flops x 1.45 GHz = 742.4 GFLOPS (the CG's 765.6 includes the MPE).
        assert!((a.peak_flops() - 742.4e9).abs() < 1e3);
        let p = Target::sw26010pro();
        assert_eq!((p.ldm_bytes, p.flops_per_cycle, p.api), (256 * 1024, 16.0, Api::Crts));
    }

    /// Mutated target files parse or are rejected; none panics.
    #[test]
    fn mutated_target_files_never_panic() {
        let good = include_str!("../targets/sw26010.toml");
        let values = [
            "0",
            "-1",
            "1",
            "3",
            "18446744073709551615",
            "1e308",
            "nan",
            "[0, 0]",
            "[4294967296, 4294967296]",
            "\"x\"",
        ];
        for line in good.lines().filter(|l| l.contains(" = ")) {
            for v in values {
                let key = line.split(" = ").next().unwrap_or_default();
                let text = good.replace(line, &format!("{key} = {v}"));
                if let Ok(t) = Target::parse(&text, "t.toml") {
                    assert!(t.cpes <= MAX_CPES && t.ldm_budget() <= t.ldm_bytes);
                }
            }
        }
    }

    #[test]
    fn bad_target_files_are_rejected() {
        let good = include_str!("../targets/sw26010.toml");
        assert!(Target::parse(&good.replace("cpes = 64", "cpes = 63"), "t.toml").is_err());
        assert!(Target::parse(&good.replace("ldm_bytes = 65536", "ldm_bytes = 100"), "t.toml").is_err());
        assert!(Target::parse(&format!("{good}\nbogus = 1\n"), "t.toml").is_err());
        assert!(matches!(Target::resolve("sw9"), Err(TargetError::Unknown(_))));
    }
}
