//! The contract between the orchestrator, the backends, the shim and the driver: serde types with
//! no I/O. The scenario parses into them, the driver reads only them, records store them, and a
//! cell's outcome crosses a process (or machine) boundary as them. Their stored JSON shapes are
//! pinned by tests/stored_shapes.rs, so a change here cannot change record format 3 unnoticed.
//! See docs/ARCHITECTURE.md for where they travel.

pub mod cell;

pub mod outcome;
pub mod series;
pub mod service;
pub mod source;
pub mod wire;

pub mod workload;

pub use cell::*;

pub use outcome::*;
pub use series::*;
pub use service::*;
pub use source::*;
pub use wire::*;

pub use workload::*;
