//! This process's resident memory as the system reports it (`/proc/self/status`, Linux; `None`
//! elsewhere or when it cannot be read). Owns nothing but the reading; it may not touch the
//! campaign or the allocator.

/// A KiB figure of `/proc/self/status` by its key (`VmHWM`, `RssAnon`, …).
pub fn status_kib(key: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        let kib = value.trim().strip_suffix("kB")?.trim();
        (name == key).then(|| kib.parse().ok()).flatten()
    })
}

/// The most memory this process has held resident so far, in KiB (`VmHWM`).
pub fn peak_kib() -> Option<u64> {
    status_kib("VmHWM")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn the_peak_is_at_least_what_is_resident_now() {
        let now = status_kib("VmRSS").expect("VmRSS on Linux");
        let peak = peak_kib().expect("VmHWM on Linux");
        assert!(now > 0 && peak >= now, "peak {peak} KiB, now {now} KiB");
        assert_eq!(status_kib("NoSuchKey"), None);
        // A key is matched whole: `Vm` names no figure.
        assert_eq!(status_kib("Vm"), None);
    }
}
