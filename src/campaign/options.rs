//! What decides each case of a campaign: the settings, the campaign's identity shared by its
//! shards, each case's generator configuration and input bytes (case `i` of seed `S` is fully
//! determined by `(S, i)`: a swarm configuration from one ChaCha stream, the bytes from
//! another), the options it is checked with, and the command that replays it.
//! May not touch: checking (`oracle`), running cases.

use crate::fault::Fault;
use crate::generator::GenConfig;
use crate::oracle::CheckOptions;
use arbitrary::Unstructured;
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use serde::{Deserialize, Serialize};

/// Campaign settings.
#[derive(Clone, Debug)]
pub struct CampaignOptions {
    /// Cases to run (before sharding).
    pub cases: u64,
    /// Campaign seed.
    pub seed: u64,
    /// Base generator configuration (swarm draws below it).
    pub config: GenConfig,
    /// Where the configuration came from (`--config FILE`), for the replay command.
    pub config_path: Option<String>,
    /// This shard's index and the shard count.
    pub shard: (u64, u64),
    /// Swarm testing: each case switches a random subset of the base features on.
    pub swarm: bool,
    /// A seeded bug (mutation testing).
    pub fault: Option<Fault>,
    /// Run only this case index.
    pub only_case: Option<u64>,
    /// Stop at the first failing case.
    pub stop_on_failure: bool,
    /// Shrink the first failure.
    pub shrink: bool,
    /// Most shrink attempts.
    pub shrink_budget: usize,
    /// Worker threads (0: one per core). The report does not depend on it.
    pub jobs: usize,
    /// Every negative corruption through the whole runtime ([`CheckOptions::negative_end_to_end`]).
    pub negative_end_to_end: bool,
}

impl Default for CampaignOptions {
    fn default() -> Self {
        CampaignOptions {
            cases: 10_000,
            seed: 0,
            config: GenConfig::default(),
            config_path: None,
            shard: (0, 1),
            swarm: true,
            fault: None,
            only_case: None,
            stop_on_failure: true,
            shrink: true,
            shrink_budget: 400,
            jobs: 0,
            negative_end_to_end: false,
        }
    }
}

/// What makes shard reports parts of one campaign: the cases they split, and everything that
/// decides what case `i` is and how it is checked. Shards of one campaign report equal ones.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CampaignId {
    /// Campaign seed.
    pub seed: u64,
    /// Cases of the whole campaign, before sharding.
    pub cases: u64,
    /// Shards the campaign is split into.
    pub shards: u64,
    /// Swarm testing on.
    pub swarm: bool,
    /// Base generator configuration.
    pub config: GenConfig,
    /// The seeded bug exhibited, by name.
    pub fault: Option<String>,
    /// Every negative corruption sent end to end.
    pub negative_end_to_end: bool,
    /// The one case run (`--case`), if only one was.
    pub only_case: Option<u64>,
}

impl CampaignId {
    /// The identity of the campaign `opts` runs a shard of.
    pub fn of(opts: &CampaignOptions) -> CampaignId {
        CampaignId {
            seed: opts.seed,
            cases: opts.cases,
            shards: opts.shard.1.max(1),
            swarm: opts.swarm,
            config: opts.config.clone(),
            fault: opts.fault.map(|f| f.name().to_string()),
            negative_end_to_end: opts.negative_end_to_end,
            only_case: opts.only_case,
        }
    }
}

fn rng(seed: u64, case: u64, stream: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(seed ^ case.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    r.set_stream(stream);
    r
}

/// The generator configuration of case `case`: the base configuration, or under swarm testing
/// a draw below it from the case's own random stream.
pub fn case_config(opts: &CampaignOptions, case: u64) -> GenConfig {
    if !opts.swarm {
        return opts.config.clone();
    }
    let mut bytes = [0u8; 64];
    rng(opts.seed, case, 1).fill_bytes(&mut bytes);
    opts.config.swarm(&mut Unstructured::new(&bytes))
}

/// The generator input bytes of case `case`.
pub fn case_input(seed: u64, case: u64) -> Vec<u8> {
    let mut r = rng(seed, case, 2);
    let len = 256 + (r.next_u32() % 1792) as usize;
    let mut v = vec![0u8; len];
    r.fill_bytes(&mut v);
    v
}

/// The options case `case` is checked with.
pub fn check_options(opts: &CampaignOptions, case: u64) -> CheckOptions {
    CheckOptions {
        fault: opts.fault,
        inject_seed: case.wrapping_mul(31).wrapping_add(opts.seed),
        negative: true,
        negative_end_to_end: opts.negative_end_to_end,
        allow_while: true,
        instruction_budget: 1_000_000,
    }
}

/// The command that replays case `case` of this campaign.
pub fn replay_command(opts: &CampaignOptions, case: u64) -> String {
    let mut command = format!("ptecheck campaign --seed {} --case {case}", opts.seed);
    for flag in case_flags(opts) {
        command.push(' ');
        command.push_str(&flag);
    }
    command
}

/// The `campaign` arguments besides seed, cases and shard that decide what each case checks
/// (configuration file, swarm, fault, negative mode), as the CLI spells them.
pub fn case_flags(opts: &CampaignOptions) -> Vec<String> {
    let mut flags = Vec::new();
    if let Some(p) = &opts.config_path {
        flags.extend(["--config".to_string(), p.clone()]);
    }
    if !opts.swarm {
        flags.push("--no-swarm".into());
    }
    if let Some(f) = opts.fault {
        flags.extend(["--fault".to_string(), f.name().to_string()]);
    }
    if opts.negative_end_to_end {
        flags.push("--negative-end-to-end".into());
    }
    flags
}

/// `--shard I/N`: shard `I` of `N`, `0 <= I < N`.
pub fn parse_shard(s: &str) -> Result<(u64, u64), String> {
    let (i, n) = s.split_once('/').ok_or("shard must be I/N")?;
    let (i, n): (u64, u64) = (i.parse().map_err(|_| "bad shard index")?, n.parse().map_err(|_| "bad shard count")?);
    if n == 0 || i >= n {
        return Err(format!("shard {i}/{n}: need 0 <= I < N"));
    }
    Ok((i, n))
}

/// Longest wait a timeout may name: one day.
pub const MAX_WAIT_SECS: f64 = 86_400.0;

/// A timeout in seconds: a finite number from 0.001 to [`MAX_WAIT_SECS`].
pub fn parse_seconds(s: &str) -> Result<std::time::Duration, String> {
    let secs: f64 = s.trim().parse().map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !(0.001..=MAX_WAIT_SECS).contains(&secs) {
        return Err(format!("{s} seconds: need a number from 0.001 to {MAX_WAIT_SECS}"));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}
