//! Figures of the process itself: resident and anonymous memory, open file descriptors, when it
//! started and for how long it has run, and the memory budget its caches share.

use crate::clock::Clock;
use crate::metrics::{Exposition, Source};

pub struct ProcessSource {
    clock: Clock,
    /// When the process started serving, by its clock (Unix milliseconds).
    started_ms: i64,
    /// The `--memory` budget (none for a router, which keeps no cache).
    budget: Option<u64>,
}

impl ProcessSource {
    pub fn new(clock: Clock, budget: Option<u64>) -> ProcessSource {
        ProcessSource { started_ms: clock.now_ms(), clock, budget }
    }
}

/// Open file descriptors (Linux; `None` elsewhere).
fn open_fds() -> Option<u64> {
    std::fs::read_dir("/proc/self/fd").ok().map(|d| d.count() as u64)
}

impl Source for ProcessSource {
    fn collect(&self, out: &mut Exposition) {
        if let Some(rss) = crate::memory::proc_field("/proc/self/status", "VmRSS:") {
            out.gauge("process_resident_memory_bytes", "Resident memory of the process.", &[], rss);
        }
        if let Some((now, peak)) = crate::memory::anonymous() {
            out.gauge(
                "shopcell_process_anonymous_bytes",
                "Anonymous resident memory of the process (RssAnon); mapped files are the page cache's.",
                &[],
                now,
            );
            out.gauge("shopcell_process_anonymous_peak_bytes", "The highest anonymous memory seen.", &[], peak);
        }
        if let Some((allocated, resident)) = crate::memory::heap() {
            out.gauge(
                "shopcell_heap_allocated_bytes",
                "Bytes in live allocations, by the allocator's count: the caches' entries and everything else the process holds.",
                &[],
                allocated,
            );
            out.gauge(
                "shopcell_heap_resident_bytes",
                "Memory the allocator keeps resident: live allocations, the free space of their pages, its own metadata.",
                &[],
                resident,
            );
        }
        if let Some(fds) = open_fds() {
            out.gauge("process_open_fds", "Open file descriptors (connections, databases, index files).", &[], fds);
        }
        out.gauge(
            "process_start_time_seconds",
            "When the process started, in Unix seconds.",
            &[],
            self.started_ms.div_euclid(1000),
        );
        out.gauge(
            "shopcell_uptime_seconds",
            "Seconds since the process started.",
            &[],
            (self.clock.now_ms() - self.started_ms).max(0) as f64 / 1000.0,
        );
        if let Some(bytes) = self.budget {
            out.gauge("shopcell_memory_budget_bytes", "The memory budget the caches share (--memory).", &[], bytes);
        }
    }
}
