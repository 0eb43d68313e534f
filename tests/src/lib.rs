//! Shared helpers of the end-to-end suites under `tests/tests/`.
