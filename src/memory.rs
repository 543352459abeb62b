//! One memory budget for the process, divided among every cache it keeps.
//!
//! The operator chooses one figure (`--memory SIZE`, environment `SHOPCELL_MEMORY`); by default
//! it is half of what the machine gives the process (the cgroup's limit when there is one, else
//! physical memory). [`Budget::divide`] splits it at start into a share per cache: redb's page
//! cache of each database (fixed when the database opens), the row cache, the list orders, the
//! search word lists and columns, the answer caches, the pricing and settings caches and
//! tantivy's writer of every cell, and the account service's caches. Each cache keeps within
//! its share and counts what it holds in a [`Meter`], which `/metrics` reports: so the figures
//! are the caches' own, and they add up to the process's anonymous memory above idle.
//!
//! How the budget is divided and how to size a cell: `docs/memory.md`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Memory the process needs besides its caches: the runtime, connections, request buffers,
/// tantivy's readers, the allocator's slack.
pub const RESERVE: u64 = 24 << 20;
/// The smallest share a cell runs with (its tantivy writer alone needs 17 MiB).
pub const CELL_MIN: u64 = 40 << 20;
/// The smallest share of tantivy's writer: the indexing buffer tantivy refuses to go below
/// (15,000,000 bytes a thread) and the queue it holds besides (`search::writer_queue`).
pub const SEARCH_WRITER_MIN: u64 = 15_000_000 + (5 << 19);
/// The share of the machine's memory taken when `--memory` is not given.
pub const DEFAULT_SHARE_PERCENT: u64 = 50;

/// What one cache holds and how it fares, as `/metrics` shows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// The share of the budget the cache keeps within.
    pub budget: u64,
    pub bytes: u64,
    pub entries: u64,
    pub hits: u64,
    pub misses: u64,
}

/// The counters a cache keeps about itself: its budget, what it holds, hits and misses.
/// Updated by the cache as it changes (relaxed atomics: figures, not synchronisation).
#[derive(Debug, Default)]
pub struct Meter {
    budget: AtomicU64,
    bytes: AtomicU64,
    entries: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl Meter {
    pub fn new(budget: u64) -> Meter {
        Meter { budget: AtomicU64::new(budget), ..Meter::default() }
    }

    pub fn budget(&self) -> u64 {
        self.budget.load(Ordering::Relaxed)
    }

    /// The bytes held now.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    pub fn hit(&self) {
        self.hits.fetch_add(1, Ordering::Relaxed);
    }

    pub fn miss(&self) {
        self.misses.fetch_add(1, Ordering::Relaxed);
    }

    /// What the cache holds changed by `bytes` and `entries` (either may be negative).
    pub fn change(&self, bytes: i64, entries: i64) {
        self.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        self.entries.fetch_add(entries as u64, Ordering::Relaxed);
    }

    /// What the cache holds now.
    pub fn holds(&self, bytes: u64, entries: u64) {
        self.bytes.store(bytes, Ordering::Relaxed);
        self.entries.store(entries, Ordering::Relaxed);
    }

    pub fn stats(&self) -> CacheStats {
        CacheStats {
            budget: self.budget(),
            bytes: self.bytes.load(Ordering::Relaxed),
            entries: self.entries.load(Ordering::Relaxed),
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
        }
    }
}

/// redb's smallest page; its larger pages are this times a power of two.
const REDB_PAGE: u64 = 4096;
/// What redb keeps for each cached page besides its bytes: the entry of its hash map and of its
/// queue of least recent use (about 32 and 16 bytes, the map's empty slots and the queue's stale
/// entries about as much again).
const REDB_PAGE_ENTRY: u64 = 96;

/// What a cached page of `REDB_PAGE` bytes takes from the allocator: redb allocates each page as
/// an `Arc<[u8]>` (its two counts in front), and the allocator serves that from the next size class
/// (4,112 bytes from a block of 5,120), plus the page's cache entries.
fn redb_page_cost() -> u64 {
    shared_bytes(REDB_PAGE as usize) as u64 + REDB_PAGE_ENTRY
}

/// What a request of `bytes` takes from the allocator: its size class, up to a quarter more
/// (jemalloc's classes: four to each doubling).
pub fn allocated(bytes: usize) -> usize {
    if bytes == 0 {
        return 0;
    }
    // SAFETY: `nallocx` only computes the size class of a request (a size of 0 is excluded
    // above, as it asks); it touches no memory.
    unsafe { tikv_jemalloc_sys::nallocx(bytes, 0) }.max(bytes)
}

/// What an `Arc<[u8]>` of `len` bytes takes from the allocator: its two counts in front.
pub fn shared_bytes(len: usize) -> usize {
    allocated(len + 2 * size_of::<usize>())
}

/// What a hash map (hashbrown's layout, std's too) of `capacity` takes from the allocator: a
/// slot of `(K, V)` and a control byte per bucket, a group of control bytes more, the buckets a
/// power of two of which seven eighths are usable. Maps keep their capacity when entries go,
/// so a cache counts its maps by capacity.
pub fn map_bytes<K, V>(capacity: usize) -> usize {
    const GROUP: usize = 16;
    let buckets = match capacity {
        0 => return 0,
        1..=7 => capacity + 1,
        _ => capacity / 7 * 8,
    };
    let slots = (buckets * size_of::<(K, V)>()).next_multiple_of(GROUP);
    allocated(slots + buckets + GROUP)
}

/// The cache size to give redb (it counts pages' bytes alone) so that the cache as allocated,
/// pages and entries, stays within `share`.
pub fn redb_cache_size(share: u64) -> u64 {
    share / redb_page_cost() * REDB_PAGE
}

/// What redb's page cache of the database in `file` holds, at most, as allocated: its pages (the
/// whole file when it is smaller than the cache, else the cache size given for `budget`) at
/// what each costs the allocator, so a full cache reports its share. redb counts its hits and
/// misses only with its `cache_metrics` feature, whose shared counters, bumped on every page
/// read from every thread, cost a fifth of the throughput of searches that read many rows; so
/// they are not counted, and the bytes are this bound.
pub fn redb_stats(file: &std::path::Path, budget: u64) -> CacheStats {
    let size = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
    let pages = size.min(redb_cache_size(budget)) / REDB_PAGE;
    CacheStats { budget, bytes: pages * redb_page_cost(), ..CacheStats::default() }
}

/// The process's memory budget and where its figure came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    pub bytes: u64,
    /// How the figure was chosen, for the start-up line.
    pub origin: String,
}

/// The shares of one cell's caches, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CellShares {
    /// redb's page cache of `cell.redb`.
    pub redb: u64,
    /// Rendered product views (`storage::row_cache`).
    pub rows: u64,
    /// Each store's active locations (`cells::stock::locations`, in a `storage::row_cache`).
    pub locations: u64,
    /// Variants' levels as their views' JSON (`cells::stock::variant_page`, in a `storage::row_cache`).
    pub levels: u64,
    /// List orders (`storage::list_orders`).
    pub lists: u64,
    /// Search word lists (`search::words`).
    pub words: u64,
    /// Search sort columns (`search::query::ColumnCache`).
    pub columns: u64,
    /// Search answers and product list pages (`search::cache`), each.
    pub answers: u64,
    /// Pricing inputs and store settings of recent requests.
    pub pricing: u64,
    /// tantivy's indexing writer.
    pub search_writer: u64,
}

impl CellShares {
    pub fn total(&self) -> u64 {
        self.redb
            + self.rows
            + self.locations
            + self.levels
            + self.lists
            + self.words
            + self.columns
            + 2 * self.answers
            + self.pricing
            + self.search_writer
    }
}

/// The shares of the account service's caches, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccountShares {
    /// redb's page cache of `account.redb`.
    pub redb: u64,
    /// Verified tokens, publishable keys, admission and session-touch entries together.
    pub entries: u64,
}

impl AccountShares {
    pub fn total(&self) -> u64 {
        self.redb + self.entries
    }
}

/// The budget divided: what every cache of the process may hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shares {
    pub account: AccountShares,
    pub cell: CellShares,
}

impl Budget {
    /// The budget `--memory` names, or the machine's default.
    pub fn choose(flag: Option<&str>) -> Result<Budget, String> {
        match flag {
            Some(raw) => {
                let bytes = parse_size(raw)?;
                Ok(Budget { bytes, origin: "--memory".into() })
            }
            None => Ok(machine_default()),
        }
    }

    /// The smallest budget that runs `cells` cells (none: the account service alone).
    pub fn smallest(cells: usize) -> u64 {
        RESERVE + account_share(RESERVE + CELL_MIN) + CELL_MIN * cells as u64
    }

    /// Divides the budget among the account service and `cells` cells (every cell alike);
    /// refused, naming the smallest that works, when it is too small to run them.
    pub fn divide(&self, cells: usize) -> Result<Shares, String> {
        let smallest = Budget::smallest(cells);
        if self.bytes < smallest {
            return Err(format!(
                "a memory budget of {} is too small to run {} cell(s); the smallest that works is {}",
                human(self.bytes),
                cells,
                human(smallest)
            ));
        }
        Ok(self.split(cells))
    }

    /// The division itself, for a budget known to be large enough.
    fn split(&self, cells: usize) -> Shares {
        // Without cells (the account service alone) the directory takes all but the reserve.
        let account = if cells == 0 { self.bytes - RESERVE } else { account_share(self.bytes) };
        let per_cell = if cells == 0 { 0 } else { (self.bytes - RESERVE - account) / cells as u64 };
        let part = |percent: u64| per_cell * percent / 100;
        let search_writer = if cells == 0 { 0 } else { part(6).max(SEARCH_WRITER_MIN) };
        let rest = per_cell - search_writer;
        // What remains after the writer, by percent of the rest.
        let of_rest = |percent: u64| rest * percent / 100;
        let cell = CellShares {
            redb: of_rest(32),
            rows: of_rest(19),
            // 16 bytes a location: 1 % of a 1 GB budget holds the active locations of 10,000
            // stores of 50.
            locations: of_rest(1),
            // 12 KB a variant at 50 locations: 2 % of a 1 GB budget holds about 1,500 pages.
            levels: of_rest(2),
            lists: of_rest(24),
            words: of_rest(9),
            columns: of_rest(5),
            answers: of_rest(3),
            pricing: of_rest(2),
            search_writer,
        };
        Shares { account: AccountShares { redb: account * 3 / 4, entries: account / 4 }, cell }
    }
}

impl Shares {
    /// The shares of a process of one cell with a budget of `bytes` (raised to the smallest
    /// that works): tests and tools that open a cell or a directory outside `serve`.
    pub fn of_one_cell(bytes: u64) -> Shares {
        Budget { bytes: bytes.max(Budget::smallest(1)), origin: String::new() }.split(1)
    }
}

/// The account service's part: 4 % of the budget, at least 4 MiB.
fn account_share(total: u64) -> u64 {
    (total * 4 / 100).max(4 << 20)
}

/// Half of the cgroup's limit, or of physical memory when the process has no limit.
fn machine_default() -> Budget {
    let physical = meminfo_total();
    let limit = cgroup_limit().filter(|l| physical.is_none_or(|p| *l < p));
    let (base, what) = match (limit, physical) {
        (Some(l), _) => (l, "the cgroup's memory limit"),
        (None, Some(p)) => (p, "physical memory"),
        (None, None) => (2 << 30, "an assumed 2 GiB (the machine's memory could not be read)"),
    };
    let bytes = base * DEFAULT_SHARE_PERCENT / 100;
    Budget { bytes, origin: format!("{DEFAULT_SHARE_PERCENT} % of {what}, {}", human(base)) }
}

fn cgroup_limit() -> Option<u64> {
    let v2 = std::fs::read_to_string("/sys/fs/cgroup/memory.max").ok();
    let v1 = || std::fs::read_to_string("/sys/fs/cgroup/memory/memory.limit_in_bytes").ok();
    let raw = v2.or_else(v1)?;
    // "max" (v2) or a figure near u64::MAX (v1) mean no limit.
    raw.trim().parse::<u64>().ok().filter(|l| *l < 1 << 60)
}

fn meminfo_total() -> Option<u64> {
    proc_field("/proc/meminfo", "MemTotal:")
}

/// A `kB` field of a `/proc` file, in bytes.
pub(crate) fn proc_field(path: &str, name: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    let line = text.lines().find(|l| l.starts_with(name))?;
    let kb: u64 = line[name.len()..].trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kb * 1024)
}

/// The process's anonymous resident memory and its peak, in bytes (Linux; `None` elsewhere).
/// The peak is the highest figure any call has seen: the kernel reports a peak of all resident
/// memory only, which counts the mapped files too.
pub fn anonymous() -> Option<(u64, u64)> {
    static PEAK: AtomicU64 = AtomicU64::new(0);
    let now = proc_field("/proc/self/status", "RssAnon:")?;
    let peak = PEAK.fetch_max(now, Ordering::Relaxed).max(now);
    Some((now, peak))
}

/// Set by the binary, whose global allocator is jemalloc: its statistics then describe the
/// process's heap (a test or another program linking this library allocates elsewhere).
pub static ALLOCATOR_STATS: AtomicBool = AtomicBool::new(false);

/// The heap as the allocator sees it: bytes in live allocations, and what it keeps resident for
/// them (their pages' free space and its own metadata included). `None` unless jemalloc is the
/// process's allocator.
pub fn heap() -> Option<(u64, u64)> {
    if !ALLOCATOR_STATS.load(Ordering::Relaxed) {
        return None;
    }
    // The statistics are a snapshot taken when the epoch advances.
    tikv_jemalloc_ctl::epoch::advance().ok()?;
    let allocated = tikv_jemalloc_ctl::stats::allocated::read().ok()?;
    let resident = tikv_jemalloc_ctl::stats::resident::read().ok()?;
    Some((allocated as u64, resident as u64))
}

/// Parses `512MB`, `2GiB`, `1.5g`, `800m` or a number of bytes. Units are binary (`MB` and
/// `MiB` both mean 2^20 bytes), as memory is.
pub fn parse_size(raw: &str) -> Result<u64, String> {
    let s = raw.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(format!("unknown unit in {raw:?}: use B, KB, MB, GB or TB")),
    };
    let value: f64 = number.parse().map_err(|_| format!("{raw:?} is not a size such as 512MB or 2GB"))?;
    let bytes = value * (1u64 << shift) as f64;
    if !bytes.is_finite() || bytes < 1.0 || bytes > (1u64 << 50) as f64 {
        return Err(format!("{raw:?} is not a size between 1 byte and 1 PB"));
    }
    Ok(bytes as u64)
}

/// `bytes` for people: `1.5 GiB`, `300 MiB`.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 || value >= 100.0 || value.fract() < 0.05 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_in_binary_units() {
        assert_eq!(parse_size("512MB"), Ok(512 << 20));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("1.5g"), Ok(3 << 29));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size(" 800 m "), Ok(800 << 20));
        for bad in ["", "MB", "12XB", "-1GB", "0", "1e3MB", "9999999TB"] {
            assert!(parse_size(bad).is_err(), "{bad:?} is refused");
        }
    }

    #[test]
    fn shares_stay_inside_the_budget_and_small_budgets_are_refused() {
        for (total, cells) in [(64u64 << 20, 1usize), (1 << 30, 1), (1 << 30, 4), (16 << 30, 2)] {
            let budget = Budget { bytes: total, origin: "test".into() };
            let Ok(shares) = budget.divide(cells) else { continue };
            let used = RESERVE + shares.account.total() + shares.cell.total() * cells as u64;
            assert!(used <= total, "{used} of {total} with {cells} cells");
            assert!(used >= total * 95 / 100, "the budget is used: {used} of {total}");
            assert!(shares.cell.search_writer >= SEARCH_WRITER_MIN);
        }
        let err = Budget { bytes: 1 << 20, origin: "test".into() }.divide(1).unwrap_err();
        assert!(err.contains(&human(Budget::smallest(1))), "{err}");
        assert!(Budget { bytes: Budget::smallest(3), origin: "test".into() }.divide(3).is_ok());
        let alone = Budget { bytes: 256 << 20, origin: "test".into() }.divide(0).unwrap();
        assert_eq!((alone.account.total(), alone.cell.total()), ((256 << 20) - RESERVE, 0), "the directory alone takes it all");
    }

    #[test]
    fn a_map_is_counted_by_its_buckets() {
        use std::collections::HashMap;
        assert_eq!(map_bytes::<u64, u64>(HashMap::<u64, u64>::new().capacity()), 0, "an empty map allocates nothing");
        // (requested capacity, buckets the map takes)
        for (asked, buckets) in [(3, 4), (5, 8), (1000, 2048), (1800, 4096)] {
            let mut m: HashMap<u64, u64> = HashMap::with_capacity(asked);
            m.extend((0..asked as u64).map(|k| (k, k)));
            assert_eq!(map_bytes::<u64, u64>(m.capacity()), allocated(buckets * 16 + buckets + 16), "{asked} entries");
        }
    }

    #[test]
    fn redb_gets_the_pages_its_share_holds_as_allocated() {
        assert_eq!((allocated(0), allocated(4096), allocated(4112), allocated(100)), (0, 4096, 5120, 112), "size classes");
        // A page of 4,096 bytes behind its `Arc` counts comes from a larger size class.
        assert!(redb_page_cost() >= REDB_PAGE + 16 + REDB_PAGE_ENTRY, "{}", redb_page_cost());
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cell.redb");
        for share in [16u64 << 20, 100 << 20, 3 << 30] {
            let size = redb_cache_size(share);
            assert_eq!(size % REDB_PAGE, 0);
            let held = size / REDB_PAGE * redb_page_cost();
            assert!(held <= share && share - held < redb_page_cost(), "{held} of {share}");
            std::fs::write(&file, vec![0u8; 8 * REDB_PAGE as usize]).unwrap();
            assert_eq!(redb_stats(&file, share).bytes, 8 * redb_page_cost(), "a small file is cached whole");
            let big = std::fs::File::options().write(true).open(&file).unwrap();
            big.set_len(share * 2).unwrap();
            assert_eq!(redb_stats(&file, share).bytes, held, "a full cache reports its share, as allocated");
        }
    }

    #[test]
    fn the_heap_figures_are_jemallocs_own_count() {
        use std::alloc::{GlobalAlloc, Layout};
        // This test binary allocates through the system's allocator: no figures unless the
        // process says jemalloc is its allocator, as the binary does.
        assert_eq!(heap(), None);
        ALLOCATOR_STATS.store(true, Ordering::Relaxed);
        let (before, _) = heap().expect("jemalloc's statistics are built in");
        let layout = Layout::from_size_align(8 << 20, 8).unwrap();
        // SAFETY: a non-zero layout, freed below with the same allocator and layout.
        let block = unsafe { tikv_jemallocator::Jemalloc.alloc(layout) };
        assert!(!block.is_null());
        let (during, resident) = heap().unwrap();
        // SAFETY: allocated above by this allocator with this layout.
        unsafe { tikv_jemallocator::Jemalloc.dealloc(block, layout) };
        // Other threads' small blocks come and go in the same count (a thread cache flushed
        // between the two readings moved it by 28 KiB once): the 8 MiB block shows, give or
        // take far less than itself.
        assert!(during + (1 << 20) >= before + (8 << 20), "{before} → {during}");
        assert!(resident > 0);
        assert!(heap().unwrap().0 < during, "freed");
    }

    #[test]
    fn meters_report_what_caches_tell_them() {
        let m = Meter::new(100);
        m.hit();
        m.hit();
        m.miss();
        m.holds(40, 2);
        assert_eq!(m.stats(), CacheStats { budget: 100, bytes: 40, entries: 2, hits: 2, misses: 1 });
        m.change(-30, -1);
        m.change(5, 1);
        assert_eq!((m.stats().bytes, m.stats().entries), (15, 2));
    }

    #[test]
    fn sizes_read_for_people() {
        assert_eq!(human(300 << 20), "300 MiB");
        assert_eq!(human(3 << 29), "1.5 GiB");
        assert_eq!(human(512), "512 B");
    }
}
