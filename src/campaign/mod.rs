//! The drivers: what takes cases through the judges of `oracle`. The campaign over generated
//! cases (sequential, or in parallel on a worker pool, or as shard processes), their reports and
//! merging, shrinking, the watchdog of hung cases, mutants, the conformance corpus, the
//! differential campaign and one file against a runner, the replay of recordings, and the fuzz
//! entry points.
//! May not touch: what an invariant holds (`oracle` decides), the runner's process
//! (`runner::client` owns it).

pub mod case_files;
pub mod conformance;
pub mod diff_report;
pub mod differential;
pub mod export;
pub mod export_report;
pub mod fuzz;
pub mod methods;
pub mod mutants;
pub mod options;
pub mod pool;
pub mod processes;
pub mod replay;
pub mod reports;
pub mod resident;
pub mod result;
pub mod run;
pub mod shrink;
pub mod versus;
pub mod watchdog;

pub use options::{CampaignId, CampaignOptions, case_config, case_flags, case_input, check_options, replay_command};
pub use pool::{BLOCK, MAX_JOBS, effective_jobs};
pub use result::{CampaignResult, FailingCase, MAX_LISTED_FAILURES, Reproduction};
pub use run::{Progress, Watch, run, run_watched, run_with};
pub use shrink::{run_input, shrink, shrink_bytes};
