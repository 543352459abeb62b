//! Cells: each holds the complete data of some stores in one `cell.redb`. This module opens a
//! cell and keeps the set of stores it serves; `products` and `moves` work on its records,
//! `link` and `forward` reach a cell in this process or over HTTP.

pub mod abandoned;
pub mod calculate;
pub mod carts;
pub mod catalogs;
pub mod checkouts;
pub mod collections;
pub mod completion;
pub mod discount_comments;
pub mod discounts;
pub mod events;
pub mod fulfillment;
pub mod gift_cards;
pub mod handles;
pub mod jobs;
pub mod kinds;
pub mod link;
pub mod markets;
pub mod migrations;
pub mod moves;
pub mod order_mail;
pub mod orders;
pub mod payments;
pub mod portable;
pub mod pricing_version;
pub mod product_search;
pub mod products;
pub mod publisher;
pub mod rebuilt;
pub mod recount;
pub mod shipping;
pub mod stock;
pub mod storefront;
pub mod stores;
pub mod taxes;
mod warm;
pub mod webhooks;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use redb::{Database, ReadableDatabase, ReadableTable};
use uuid::Uuid;

use crate::clock::Clock;
use crate::error::ApiResult;
use crate::memory::{CacheStats, CellShares};
use crate::storage::list::{self, ListQuery, Listed};
use crate::storage::record::{self, Record};
use crate::storage::tables::{MOVE_LOG, STORE_STATE, StoreState};
use crate::storage::writer::{Writer, WriterThread};
use crate::storage::{self, DbKind};

/// Rows of an interrupted move's copy deleted per transaction at start.
const STALE_BATCH: usize = 50_000;

/// A cell's database: its tables and the steps from older formats.
pub const DATABASE: DbKind = DbKind { name: "cell", steps: migrations::STEPS, tables: storage::tables::cell_tables };

pub struct Cell {
    pub name: String,
    /// The process's clock: record times, new ids, what is due and what has expired.
    pub clock: Clock,
    pub db: Arc<Database>,
    pub writer: Writer,
    thread: Mutex<Option<WriterThread>>,
    /// The product index of the cell's stores (`<dir>/search/`), kept in step by its indexer.
    pub search: Arc<crate::search::Search>,
    /// Publishes scheduled collections when they fall due.
    pub publisher: publisher::Publisher,
    /// The payment providers intents are created at and confirmed through (`payments.rs`).
    payments: crate::payments::Providers,
    /// Every call out to a party a merchant names (webhook deliveries).
    pub outbound: crate::outbound::Outbound,
    /// Store mail (order confirmations), sent by the cell's jobs.
    pub mailer: crate::mail::Mailer,
    /// Who the store's notices go to, set once the process is up (`node::owners`).
    pub owners: std::sync::OnceLock<Arc<dyn webhooks::notice::Owners>>,
    /// The base of links in the cell's mail (`--public-url`, else the URL the process prints).
    pub public_url: std::sync::OnceLock<String>,
    /// How long after its last change a checkout with an email and no order is abandoned.
    pub abandoned_after_ms: i64,
    /// The runner of the cell's jobs, once started ([`Cell::start_jobs`]).
    pub jobs: crate::jobs::runner::RunnerSlot,
    /// Recent product list pages, rendered (see `search::cache`).
    pub pages: crate::search::cache::AnswerCache,
    /// Store settings of recent requests, current while their store's generation is.
    pub settings: stores::SettingsCache,
    /// Variants, tax rates, zones and discounts of recent calculations, current while their store's generation is.
    pub pricing: calculate::PricingCache,
    states: RwLock<HashMap<Uuid, StoreState>>,
    /// The shares of the memory budget its caches keep within.
    memory: CellShares,
    /// Where the cell keeps its files.
    dir: PathBuf,
    /// The lists to warm after this start (see `warm`), taken by the first `warm`.
    warm_hint: Mutex<Vec<crate::storage::list_orders::ListId>>,
    /// Reads back the lists saved at the last clean stop, if there were any (see `warm`).
    lists_loader: Option<storage::list_snapshot::Loader>,
    /// This cell's parts of online backups (see `backup`).
    pub backups: crate::backup::snapshot::Sessions,
    /// The portable exports of its stores under way (see `portable`).
    pub exports: portable::ExportSessions,
}

impl Cell {
    /// Opens the cell in `dir` (`cell.redb`). Leftovers of an interrupted move are discarded: an
    /// incoming copy that never completed, and the move log of an unfinished hand-over (the
    /// move is started again from the beginning). Every "now" of the cell is read from `clock`.
    /// Its caches keep within `memory`.
    pub fn open(
        name: &str,
        dir: &Path,
        clock: Clock,
        memory: &CellShares,
    ) -> Result<Cell, Box<dyn std::error::Error + Send + Sync>> {
        std::fs::create_dir_all(dir)?;
        let storage::Opened { db, syncs, lists_token } = storage::open_with(&dir.join("cell.redb"), DATABASE, memory.redb)?;
        let db = Arc::new(db);
        let mut states = HashMap::new();
        let mut stale = Vec::new();
        {
            let txn = db.begin_read()?;
            for item in txn.open_table(STORE_STATE)?.iter()? {
                let (k, v) = item?;
                let id = Uuid::from_u128(k.value());
                match StoreState::from_u8(v.value()) {
                    Some(s @ (StoreState::Active | StoreState::Closed)) => {
                        states.insert(id, s);
                    }
                    _ => stale.push(id),
                }
            }
        }
        // In writes of bounded size, however large the copy.
        for id in &stale {
            loop {
                let txn = db.begin_write()?;
                let gone = moves::delete_store_rows(&txn, *id, STALE_BATCH)?;
                if gone < STALE_BATCH {
                    txn.open_table(STORE_STATE)?.remove(id.as_u128())?;
                }
                txn.commit()?;
                if gone < STALE_BATCH {
                    break;
                }
            }
        }
        let txn = db.begin_write()?;
        txn.open_table(MOVE_LOG)?.retain(|_, _| false)?;
        txn.commit()?;
        let floor = events::latest_id(&db)?;
        let (writer, thread) = Writer::start_after(
            db.clone(),
            Some(syncs),
            name,
            storage::writer::Budgets {
                rows: memory.rows,
                lists: memory.lists,
                locations: memory.locations,
                levels: memory.levels,
            },
            floor,
        )?;
        // Before anything can send the writer a job (the indexer and publisher below can).
        let lists_loader = storage::list_snapshot::Snapshot::open(dir, lists_token.as_deref()).map(|saved| {
            storage::list_snapshot::Loader::start(name, &writer.orders, saved, |(store, _)| states.contains_key(store))
        });
        let search = crate::search::Search::start(&dir.join("search"), db.clone(), writer.clone(), name, memory)?;
        let publisher = publisher::Publisher::start(db.clone(), writer.clone(), name, clock.clone())?;
        Ok(Cell {
            name: name.to_string(),
            clock,
            db,
            writer,
            thread: Mutex::new(Some(thread)),
            search,
            publisher,
            payments: crate::payments::Providers::default(),
            outbound: crate::outbound::Outbound::new(Default::default(), Arc::new(crate::outbound::SystemResolver))?,
            mailer: crate::mail::Mailer::offline(&dir.join("mail"))?,
            jobs: Default::default(),
            abandoned_after_ms: 3_600_000,
            owners: std::sync::OnceLock::new(),
            public_url: std::sync::OnceLock::new(),
            pages: crate::search::cache::AnswerCache::new(memory.answers),
            // Settings are few and small: a quarter of the share is plenty.
            settings: stores::SettingsCache::new(memory.pricing / 4),
            pricing: calculate::PricingCache::new(memory.pricing - memory.pricing / 4),
            states: RwLock::new(states),
            memory: *memory,
            dir: dir.to_path_buf(),
            warm_hint: Mutex::new(warm::read_hint(dir)),
            lists_loader,
            backups: Default::default(),
            exports: Default::default(),
        })
    }

    /// The cell's database file (`cell.redb`).
    pub fn file(&self) -> PathBuf {
        self.dir.join("cell.redb")
    }

    /// Every cache of the cell with its share and what it holds, for `/metrics`.
    pub fn caches(&self) -> Vec<(&'static str, CacheStats)> {
        vec![
            ("redb", crate::memory::redb_stats(&self.file(), self.memory.redb)),
            ("rows", self.writer.rows.meter.stats()),
            ("lists", self.writer.orders.meter.stats()),
            ("pricing", self.pricing.meter.stats()),
            ("settings", self.settings.meter.stats()),
            ("locations", self.writer.locations.meter.stats()),
            ("levels", self.writer.levels.meter.stats()),
            ("pages", self.pages.stats()),
        ]
        .into_iter()
        .chain(self.search.caches())
        .collect()
    }

    /// How payment confirmations of the cell's stores ended, for `/metrics`.
    pub fn payment_outcomes(&self) -> &crate::payments::PaymentOutcomes {
        &self.payments.outcomes
    }

    /// Whether this cell serves `store`.
    pub fn holds(&self, store: Uuid) -> bool {
        self.states.read().map(|s| s.get(&store) == Some(&StoreState::Active)).unwrap_or(false)
    }

    /// Number of stores served (placement, metrics).
    pub fn store_count(&self) -> usize {
        self.states.read().map(|s| s.values().filter(|v| **v == StoreState::Active).count()).unwrap_or(0)
    }

    /// What this cell does with `store` (`None`: it has no rows of it).
    pub fn state_of(&self, store: Uuid) -> Option<StoreState> {
        self.states.read().ok().and_then(|s| s.get(&store).copied())
    }

    fn set_state(&self, store: Uuid, state: Option<StoreState>) {
        if let Ok(mut s) = self.states.write() {
            match state {
                Some(st) => s.insert(store, st),
                None => s.remove(&store),
            };
        }
    }

    /// Record `id` of `store`; a 404 when there is none.
    pub fn get<R: Record>(&self, store: Uuid, id: Uuid) -> ApiResult<R> {
        record::get(&self.read()?, store, id)?.ok_or_else(crate::error::ApiError::not_found)
    }

    /// A page of the records `R` of `store`, as `q` asks (see [`crate::storage::list`]).
    pub async fn list<R: Record>(&self, store: Uuid, q: &ListQuery) -> ApiResult<Listed<R>> {
        list::page(&self.db, &self.writer.orders, store, q, self.clock.now_ms()).await
    }

    /// A read transaction (reads never block the writer).
    pub fn read(&self) -> ApiResult<redb::ReadTransaction> {
        Ok(self.db.begin_read()?)
    }

    /// Calls out through `outbound` and sends mail through `mailer` (built from the operator's
    /// flags).
    pub fn with_outside(mut self, outbound: crate::outbound::Outbound, mailer: crate::mail::Mailer) -> Cell {
        self.outbound = outbound;
        self.mailer = mailer;
        self
    }

    /// Starts running the cell's jobs (deliveries, mail, scheduled checks).
    pub fn start_jobs(self: &Arc<Cell>) -> std::io::Result<()> {
        self.jobs.set(jobs::start(self)?);
        Ok(())
    }

    /// Stops the writer after the queued jobs and waits for it.
    pub fn close(&self) {
        self.save_hottest();
        // Before the writer: the runs under way record their outcomes through it.
        self.jobs.stop();
        // The indexer first: its last pass deletes drained outbox entries through the writer.
        self.search.stop();
        // Before the writer: a publish under way still commits.
        self.publisher.stop();
        self.writer.stop();
        if let Some(t) = self.thread.lock().ok().and_then(|mut t| t.take()) {
            t.join();
        }
        // Nothing writes the database from here: its held lists are the committed state's, and
        // the saved ones not read back yet are loaded now to be saved again.
        if let Some(loader) = &self.lists_loader {
            loader.stop();
        }
        self.save_lists();
    }
}
