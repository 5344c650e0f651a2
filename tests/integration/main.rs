//! Integration tests: record real fixture programs (compiled at test time
//! from `fixtures/`) and assert exact attribution in `report.json`; check the
//! CLI's errors and exit codes.

mod cli;
mod dwarf;
mod live;
mod names;
mod record;
mod startup;
mod util;
