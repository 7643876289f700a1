//! Exit codes: the one policy every command follows. Reports say which code they end with
//! (`exit()` beside each report type); the CLI only returns it.
//! May not touch: anything else (it names outcomes; it decides none).

/// How a command ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// 0: everything held.
    Ok,
    /// 1: a run failed, outputs mismatched, or a campaign found a failure.
    Failed,
    /// 2: rejected input (a file the loader or a check refuses) or bad arguments.
    Rejected,
    /// 3: a backend the program needs is not available here.
    Unavailable,
    /// 4: a campaign's case ran past `--case-timeout` (the process ends there, without a report).
    Hung,
}

impl Exit {
    /// The exit status.
    pub fn number(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::Failed => 1,
            Exit::Rejected => 2,
            Exit::Unavailable => 3,
            Exit::Hung => 4,
        }
    }

    /// The worse of two outcomes.
    pub fn max(self, other: Exit) -> Exit {
        let rank = |e: Exit| match e {
            Exit::Ok => 0,
            Exit::Unavailable => 1,
            Exit::Failed => 2,
            Exit::Rejected => 3,
            Exit::Hung => 4,
        };
        if rank(other) > rank(self) { other } else { self }
    }

    /// [`Exit::Failed`] when `failed`, else [`Exit::Ok`].
    pub fn failed_if(failed: bool) -> Exit {
        if failed { Exit::Failed } else { Exit::Ok }
    }
}
