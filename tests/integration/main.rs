//! Integration tests: record real fixture programs (compiled at test time
//! from `fixtures/`) and assert exact attribution in `report.json`; check the
//! CLI's errors and exit codes.

mod cli;
mod diff;
mod dwarf;
mod hostile;
mod html;
mod layout;
mod live;
mod loud;
mod names;
mod perf_compat;
mod perf_import;
mod pictures;
mod pprof;
mod processes;
mod record;
mod resident;
mod safety;
mod startup;
mod symbols;
mod symnames;
mod top;
mod util;
