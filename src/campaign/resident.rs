//! This process's resident memory as the system reports it (`/proc/self/status`, Linux; `None`
//! elsewhere or when it cannot be read). Owns nothing but the reading; it may not touch the
//! campaign or the allocator.

/// A KiB figure of `/proc/self/status` by its key, without the colon (`VmHWM`, `RssAnon`, …).
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
    fn the_peak_is_the_most_held_resident_not_what_is_held_now_nor_what_was_mapped() {
        let before = status_kib("VmRSS").expect("VmRSS on Linux");
        // 128 MiB written (so resident) and let go: what is resident drops, the peak stays.
        let touched = vec![1u8; 128 << 20];
        assert_eq!(touched.iter().step_by(4096).map(|b| u64::from(*b)).sum::<u64>(), 32 << 10);
        drop(touched);
        let peak = peak_kib().expect("VmHWM on Linux");
        assert!(peak >= before + (100 << 10), "peak {peak} KiB after 128 MiB held from {before} KiB");
        // 1 GiB mapped and never touched: it counts in the virtual peak, not in the resident one.
        let mapped: Vec<u8> = Vec::with_capacity(1 << 30);
        let virtual_peak = status_kib("VmPeak").expect("VmPeak on Linux");
        drop(mapped);
        assert!(peak_kib().is_some_and(|p| p + (512 << 10) < virtual_peak), "VmHWM read as VmPeak?");
        assert_eq!(status_kib("NoSuchKey"), None);
        // A key is matched whole: `Vm` names no figure.
        assert_eq!(status_kib("Vm"), None);
    }
}
