//! benchlab: a reproducible benchmark lab for MCP servers. The modules follow DESIGN.md's rooms;
//! side effects live in `backend`, `lock`, `shim`, `driver` and `record::store`, the rest is pure.
//! docs/ARCHITECTURE.md maps the rooms and follows one cell from scenario line to hashed record.

pub mod attest;
pub mod backend;
pub mod claims;
pub mod cli;
pub mod driver;
pub mod hash;
pub mod host;
pub mod http1;
pub mod lock;
pub mod mcp;
pub mod measure;
pub mod nullserver;
pub mod orchestrate;
pub mod par;
pub mod placement;
pub mod reading;
pub mod recipe;
pub mod record;
pub mod report;
pub mod scenario;
pub mod services;
pub mod shim;
pub mod site;
pub mod source;
pub mod spec;
pub mod stats;
pub mod text;
