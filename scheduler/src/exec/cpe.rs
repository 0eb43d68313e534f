//! Scheduled execution on the compute cores (per-CPE LDM buffers and DMA).
