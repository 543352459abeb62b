//! The sources of the areas built before the registry: each cell and the account service (their
//! caches, writer, job runner, search backlog, payment outcomes), the open connections and the
//! log writer. [`register`] adds them, with the request metrics and the process's figures, to a
//! node's registry when it starts serving.

use std::sync::Arc;

use crate::account::AccountService;
use crate::cells::Cell;
use crate::http::connections::OpenConnections;
use crate::jobs::runner::RunnerSlot;
use crate::memory::CacheStats;
use crate::metrics::process::ProcessSource;
use crate::metrics::{Exposition, Source};
use crate::node::Node;
use crate::storage::usage::DatabaseUsage;
use crate::storage::writer::WriterStats;

/// Registers every source of `node`.
pub fn register(node: &Node) {
    let r = &node.metrics;
    r.register(node.requests.clone());
    r.register(node.open_connections.clone());
    r.register(Arc::new(crate::logs::DroppedLines));
    if let Some(a) = &node.account {
        r.register(Arc::new(AccountSource(a.clone())));
        let file = a.dir().join("account.redb");
        r.register(DatabaseUsage::start(ACCOUNT, file, Arc::downgrade(&a.db), node.clock.clone()));
    }
    for (name, cell) in &node.cells {
        r.register(Arc::new(CellSource { name: name.clone(), cell: cell.clone() }));
        r.register(DatabaseUsage::start(name, cell.file(), Arc::downgrade(&cell.db), node.clock.clone()));
    }
    r.register(Arc::new(ProcessSource::new(node.clock.clone(), node.memory.as_ref().map(|b| b.bytes))));
}

/// The owner label of the account service's figures (cells use their names).
const ACCOUNT: &str = "account";

struct AccountSource(Arc<AccountService>);

struct CellSource {
    name: String,
    cell: Arc<Cell>,
}

impl Source for AccountSource {
    fn collect(&self, out: &mut Exposition) {
        caches(out, ACCOUNT, &self.0.caches());
        writer(out, ACCOUNT, &self.0.writer.stats);
        jobs(out, ACCOUNT, &self.0.jobs);
    }
}

impl Source for CellSource {
    fn collect(&self, out: &mut Exposition) {
        let (owner, cell) = (self.name.as_str(), &self.cell);
        out.gauge("shopcell_cell_stores", "Stores served by each cell of this process.", &[("cell", owner)], cell.store_count());
        caches(out, owner, &cell.caches());
        writer(out, owner, &cell.writer.stats);
        jobs(out, owner, &cell.jobs);
        if let Some(n) = crate::search::indexer::backlog(&cell.db) {
            out.gauge(
                "shopcell_search_outbox_entries",
                "Changes committed and not yet in the search index (the indexer's lag).",
                &[("cell", owner)],
                n,
            );
        }
        cell.payment_outcomes().collect(out, owner);
    }
}

/// What each cache holds and how it fares.
fn caches(out: &mut Exposition, owner: &str, caches: &[(&'static str, CacheStats)]) {
    /// A family: name, whether a counter, help, and the figure it reads.
    type Family = (&'static str, bool, &'static str, fn(&CacheStats) -> u64);
    const FAMILIES: [Family; 5] = [
        ("shopcell_cache_budget_bytes", false, "The cache's share of the memory budget.", |s| s.budget),
        ("shopcell_cache_bytes", false, "Bytes the cache holds.", |s| s.bytes),
        ("shopcell_cache_entries", false, "Entries the cache holds.", |s| s.entries),
        ("shopcell_cache_hits_total", true, "Lookups the cache answered.", |s| s.hits),
        ("shopcell_cache_misses_total", true, "Lookups the cache could not answer.", |s| s.misses),
    ];
    for (name, counter, help, value) in FAMILIES {
        for (cache, stats) in caches {
            let labels = [("owner", owner), ("cache", *cache)];
            if counter {
                out.counter(name, help, &labels, value(stats));
            } else {
                out.gauge(name, help, &labels, value(stats));
            }
        }
    }
}

/// How the database's writer batches, how long its commits take and its fsyncs beside them.
fn writer(out: &mut Exposition, owner: &str, stats: &WriterStats) {
    let labels = [("owner", owner)];
    out.histogram("shopcell_writer_batch_size", "Write requests committed in one transaction.", &labels, &stats.batch);
    out.histogram(
        "shopcell_writer_commit_seconds",
        "Time to commit one batch's transaction: the previous batch's fsync awaited, the pages written.",
        &labels,
        &stats.commit,
    );
    if let Some(syncs) = &stats.syncs {
        out.histogram(
            "shopcell_writer_fsync_seconds",
            "Time of one fsync of the database, made while the writer runs the next batch.",
            &labels,
            &syncs.durations,
        );
    }
    out.counter(
        "shopcell_writer_unsynced_commits_total",
        "Commits made without an fsync: background changes a restart makes again (search outbox, job claims).",
        &labels,
        stats.unsynced.load(std::sync::atomic::Ordering::Relaxed),
    );
}

/// How background jobs ended (deliveries, mail, scheduled checks), per runner and outcome; a
/// dead job is also logged with its last error.
fn jobs(out: &mut Exposition, owner: &str, slot: &RunnerSlot) {
    const HELP: &str = "Background job runs, by runner and outcome.";
    out.declare("shopcell_jobs_total", super::Kind::Counter, HELP);
    for (outcome, n) in slot.counts().into_iter().flatten() {
        out.counter("shopcell_jobs_total", HELP, &[("owner", owner), ("outcome", outcome)], n);
    }
}

impl Source for OpenConnections {
    fn collect(&self, out: &mut Exposition) {
        out.gauge("shopcell_connections_open", "Connections open on the API port.", &[], self.total());
        out.counter(
            "shopcell_connections_refused_total",
            "Connections refused past --max-connections or --max-connections-per-address.",
            &[],
            self.refused(),
        );
    }
}
