//! The kinds of jobs a cell runs, and what follows from committed events: after each commit
//! that appended events, the subscriptions of those stores have their senders poked (the
//! fan-out), so the write itself pays for its event row alone. The first pass after a start
//! pokes every subscription, catching up whatever a crash left between a commit and its poke.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use redb::{ReadableDatabase, ReadableTable};
use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::abandoned::{self, ABANDONED};
use crate::cells::checkouts;
use crate::cells::fulfillment;
use crate::cells::webhooks::notice::{self, DISABLED};
use crate::cells::webhooks::send::{RETRY, SEND, Sender};
use crate::cells::webhooks::{Webhook, sender_id};
use crate::error::ApiResult;
use crate::jobs::runner::{Handler, Outcome};
use crate::jobs::{self, Job, Kind};
use crate::mail::job::{LETTER, MAIL};
use crate::storage::keys::{Key, leading_store};
use crate::storage::read;
use crate::storage::record::Record;
use crate::storage::tables::WEBHOOKS;
use crate::storage::writer::Writer;

/// Every kind a cell runs.
const KINDS: &[&Kind] = &[&SEND, &RETRY, &ABANDONED, &LETTER, &MAIL, &DISABLED, &fulfillment::OPEN];

/// The handler of a cell's runner. It holds the cell weakly: the cell owns the runner.
pub struct CellJobs {
    cell: Weak<Cell>,
    /// Whether the catch-up of the first pass is done.
    caught_up: AtomicBool,
}

impl Handler for CellJobs {
    fn kind(&self, name: &str) -> Option<&'static Kind> {
        KINDS.iter().find(|k| k.name == name).copied()
    }

    fn run(&self, store: Uuid, job: Job) -> Pin<Box<dyn Future<Output = Outcome> + Send + 'static>> {
        let cell = self.cell.upgrade();
        Box::pin(async move {
            // The cell is closing: the job runs at the next start.
            let Some(cell) = cell else { return Outcome::Again(job.due_at, None) };
            match job.kind.as_str() {
                k if k == SEND.name => Sender::of(&cell).run_send(store, job).await,
                k if k == RETRY.name => Sender::of(&cell).run_retry(store, job).await,
                k if k == ABANDONED.name => abandoned::run(&cell, store, job, checkouts::shown).await,
                k if k == LETTER.name || k == MAIL.name => crate::mail::job::run(&cell.mailer, &job).await,
                k if k == DISABLED.name => notice::run(&cell, store, job).await,
                k if k == fulfillment::OPEN.name => fulfillment::run_open(&cell, store, job).await,
                _ => Outcome::Done(None),
            }
        })
    }

    fn tick(&self) -> Pin<Box<dyn Future<Output = ()> + Send + 'static>> {
        let Some(cell) = self.cell.upgrade() else { return Box::pin(async {}) };
        let mut stores = cell.writer.appended.take();
        if !self.caught_up.swap(true, Ordering::SeqCst) {
            match stores_with_webhooks(&cell.db) {
                Ok(all) => stores.extend(all),
                Err(e) => {
                    tracing::warn!(error = %e, "listing the stores with webhooks failed; their senders wait for new events")
                }
            }
        }
        Box::pin(async move {
            for store in stores {
                if let Err(e) = poke_senders(&cell.db, &cell.writer, store, cell.clock.now_ms()).await {
                    tracing::debug!(%store, error = %e, "webhook senders not poked; the next event or start pokes them");
                }
            }
        })
    }
}

/// Pokes the sender of every enabled subscription of `store`.
async fn poke_senders(db: &redb::Database, writer: &Writer, store: Uuid, now: i64) -> ApiResult<()> {
    let mut ids = Vec::new();
    read::walk(&db.begin_read()?, WEBHOOKS, Key::store(store).bytes(), false, |_, v| {
        let w: Webhook = crate::storage::codec::decode(v)?;
        if w.enabled {
            ids.push(w.id);
        }
        Ok(true)
    })?;
    if ids.is_empty() {
        return Ok(());
    }
    writer
        .write(Some(store), move |tx| {
            for id in &ids {
                jobs::put(tx, store, &SEND, sender_id(*id), id.as_bytes().to_vec(), now, now)?;
            }
            Ok(())
        })
        .await
}

/// Every store of the cell with a subscription.
fn stores_with_webhooks(db: &redb::Database) -> ApiResult<HashSet<Uuid>> {
    let txn = db.begin_read()?;
    let mut stores = HashSet::new();
    for item in txn.open_table(Webhook::TABLE.def)?.iter()? {
        let (k, _) = item?;
        stores.extend(leading_store(k.value()));
    }
    Ok(stores)
}

/// Starts the runner of `cell`'s jobs.
pub fn start(cell: &Arc<Cell>) -> std::io::Result<crate::jobs::runner::Runner> {
    let handler = Arc::new(CellJobs { cell: Arc::downgrade(cell), caught_up: AtomicBool::new(false) });
    crate::jobs::runner::Runner::start(cell.db.clone(), cell.writer.clone(), cell.clock.clone(), handler, &cell.name)
}
