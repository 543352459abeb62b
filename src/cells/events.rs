//! What happened in a store: an event is appended in the transaction of the change it reports,
//! so it exists exactly when the change committed. Events are read back by `GET S/events` (for
//! reconciliation and replay) and sent to webhook subscriptions, whose senders walk them in id
//! order from their cursor (ids grow in commit order: [`Tx::commit_id`]). Kept 30 days.

use redb::{Database, ReadTransaction, ReadableDatabase, ReadableTable};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::time::rfc3339;
use crate::error::{ApiError, ApiResult};
use crate::storage::codec::decode;
use crate::storage::keys::Key;
use crate::storage::read;
use crate::storage::record::{self, Filter, FilterValue, List, Range, Record, Sort};
use crate::storage::tables::{EVENT_ORDER, EVENTS, STORE_STATE, StoreState, StoreTable};
use crate::storage::tx::Tx;
use crate::storage::writer::Writer;

/// Every topic, with what its `data` is (`docs/webhooks.md` lists the same, checked by a test).
pub const TOPICS: &[(&str, &str)] = &[
    ("product.created", "the product as `GET S/products/{id}` answers it"),
    ("product.updated", "the product as `GET S/products/{id}` answers it"),
    ("product.deleted", "`{id}` of the deleted product"),
    ("inventory.updated", "one level as `GET S/inventory-levels` answers it"),
    ("checkout.created", "the checkout as `GET S/checkouts/{id}` answers it"),
    ("checkout.abandoned", "the checkout as `GET S/checkouts/{id}` answers it"),
    ("order.created", "the order as `GET S/orders/{id}` answers it"),
    ("order.paid", "the order as `GET S/orders/{id}` answers it"),
    ("order.partially_fulfilled", "the order as `GET S/orders/{id}` answers it"),
    ("order.fulfilled", "the order as `GET S/orders/{id}` answers it"),
    ("location.created", "the location as `GET S/locations/{id}` answers it"),
    ("location.updated", "the location as `GET S/locations/{id}` answers it"),
    ("fulfillment_order.held", "the fulfillment order as its order's list answers it"),
    ("fulfillment_order.released", "the fulfillment order as its order's list answers it"),
    ("fulfillment_order.moved", "`{original, moved}`: the fulfillment order before and the one now holding the lines"),
    ("fulfillment_order.cancelled", "the fulfillment order as its order's list answers it"),
    ("fulfillment_order.opened", "the fulfillment order as its order's list answers it (a scheduled one reached its time)"),
    ("fulfillment.created", "the fulfillment as its order's list answers it"),
    ("fulfillment.updated", "the fulfillment as its order's list answers it"),
];

/// The topic of a subscription's test delivery: never stored, never subscribed to.
pub const PING: &str = "webhook.ping";

/// How long events are kept.
pub const KEPT_MS: i64 = 30 * 24 * 3600 * 1000;

/// The topic's one static name, when it is one.
pub fn topic(name: &str) -> Option<&'static str> {
    TOPICS.iter().map(|(t, _)| *t).find(|t| *t == name)
}

/// A stored event.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Event {
    pub id: Uuid,
    pub topic: String,
    pub created_at: i64,
    /// The resource as the API shows it, JSON (kept compressed: events are most of a selling
    /// store's rows by size).
    #[serde(with = "crate::storage::codec::lz4_text")]
    pub data: String,
}

impl Record for Event {
    const TABLE: StoreTable = EVENTS;
    const NAME: &'static str = "events";
    const LIST: List<Self> = List {
        order: Some(EVENT_ORDER),
        // Ids grow in commit order: the list reads in the order the events happened.
        sorts: &[Sort { name: "created_at", tag: 0, key: |_, k| k }],
        default_sort: "created_at",
        summaries: "created_at",
        own_order: true,
        filters: &[Filter::names(
            "topic",
            TOPIC_NAMES,
            |e| topic(&e.topic).map(FilterValue::Enum),
            "Only events of these topics (comma-separated)",
        )],
        ranges: &[Range { from: "since", to: "until", value: |e| e.created_at }],
        search: None,
    };

    fn id(&self) -> Uuid {
        self.id
    }
}

/// The topics' names, for the filter (in [`TOPICS`] order; a test keeps them in step): the
/// webhook domain's, which states them in the document.
pub use crate::domain::webhook::TOPIC_NAMES;

/// An event as the API shows it and as webhooks deliver it.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventView {
    pub id: Uuid,
    /// The topic.
    #[serde(rename = "type")]
    pub kind: String,
    pub store_id: Uuid,
    pub timestamp: String,
    /// The resource as the API shows it.
    pub data: serde_json::Value,
}

impl Event {
    pub fn view(&self, store: Uuid) -> EventView {
        EventView {
            id: self.id,
            kind: self.topic.clone(),
            store_id: store,
            timestamp: rfc3339(self.created_at),
            data: serde_json::from_str(&self.data).unwrap_or(serde_json::Value::Null),
        }
    }

    /// The body a webhook delivery carries: the event as `GET S/events` shows it.
    pub fn body(&self, store: Uuid) -> ApiResult<Vec<u8>> {
        serde_json::to_vec(&self.view(store)).map_err(ApiError::internal)
    }
}

/// Appends an event of `topic` about `data` (JSON) to `store`, in the write under way.
pub fn append(tx: &mut Tx, store: Uuid, topic: &'static str, data: Vec<u8>, now: i64) -> ApiResult<()> {
    let event = Event {
        id: tx.commit_id(now),
        topic: topic.to_string(),
        created_at: now,
        // JSON is UTF-8: kept without a copy (an order's is a few KB, in the single writer).
        data: String::from_utf8(data).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
    };
    record::write(tx, store, None, Some(&event))?;
    tx.event_appended(store);
    Ok(())
}

/// Appends an event whose data is `value` serialized.
pub fn append_json<T: Serialize>(tx: &mut Tx, store: Uuid, topic: &'static str, value: &T, now: i64) -> ApiResult<()> {
    append(tx, store, topic, serde_json::to_vec(value).map_err(ApiError::internal)?, now)
}

/// The latest event id of any store of the cell: the writer gives ids after it, whatever its
/// clock says (a store may have come from a cell whose clock ran ahead).
pub fn latest_id(db: &Database) -> ApiResult<Option<Uuid>> {
    let txn = db.begin_read()?;
    let events = txn.open_table(EVENTS.def)?;
    let mut latest = None;
    for item in txn.open_table(STORE_STATE)?.iter()? {
        let (k, _) = item?;
        let prefix = Key::store(Uuid::from_u128(k.value())).into_vec();
        let (start, end) = crate::storage::keys::prefix_range(&prefix);
        let last = match &end {
            Some(end) => events.range(start.as_slice()..end.as_slice())?.next_back(),
            None => events.range(start.as_slice()..)?.next_back(),
        };
        if let Some(row) = last {
            let id = crate::storage::keys::trailing_id(row?.0.value());
            latest = latest.max(id);
        }
    }
    Ok(latest)
}

/// Rows removed per store and sweep: a sweep never holds the writer long.
const PURGE_BATCH: usize = 1000;

/// Removes events older than [`KEPT_MS`] from every store the cell serves, at most
/// [`PURGE_BATCH`] per store and sweep (the oldest first: a store's events are kept in time
/// order). Answers how many went.
pub async fn purge(db: &Database, writer: &Writer, now: i64) -> ApiResult<usize> {
    let cutoff = now.saturating_sub(KEPT_MS);
    let stale = oldest_rows(db, EVENTS, PURGE_BATCH, |v| Ok(decode::<Event>(v)?.created_at < cutoff))?;
    Ok(delete_records::<Event>(writer, stale).await)
}

/// Deletes the records of `R` at `keys`, one write per store, each with its list rows and
/// counters; answers how many went. A store in the last step of a move refuses writes: the
/// target deletes its rows.
pub async fn delete_records<R: Record>(writer: &Writer, stale: Vec<(Uuid, Vec<Vec<u8>>)>) -> usize {
    let mut gone = 0;
    for (store, keys) in stale {
        let deleted = writer
            .write(Some(store), move |tx| {
                let mut n = 0;
                for k in &keys {
                    let Some(old) = tx.get(R::TABLE, k)?.map(|b| decode::<R>(&b)).transpose()? else { continue };
                    record::write(tx, store, Some(&old), None)?;
                    n += 1;
                }
                Ok(n)
            })
            .await;
        gone += deleted.unwrap_or(0);
    }
    gone
}

/// Per store the cell serves, the keys of the first rows of `table` (in key order) for which
/// `stale` holds, up to `batch`: the walk of each store stops at the first row that is not.
pub fn oldest_rows(
    db: &Database,
    table: StoreTable,
    batch: usize,
    stale: impl Fn(&[u8]) -> ApiResult<bool>,
) -> ApiResult<Vec<(Uuid, Vec<Vec<u8>>)>> {
    oldest_rows_under(db, table, batch, |_, store| Ok(vec![Key::store(store).into_vec()]), stale)
}

/// [`oldest_rows`] walking each of the prefixes `prefixes` gives for a store (a subscription's
/// deliveries), the batch shared among them.
pub fn oldest_rows_under(
    db: &Database,
    table: StoreTable,
    batch: usize,
    prefixes: impl Fn(&ReadTransaction, Uuid) -> ApiResult<Vec<Vec<u8>>>,
    stale: impl Fn(&[u8]) -> ApiResult<bool>,
) -> ApiResult<Vec<(Uuid, Vec<Vec<u8>>)>> {
    let txn = db.begin_read()?;
    let mut out = Vec::new();
    for item in txn.open_table(STORE_STATE)?.iter()? {
        let (k, v) = item?;
        if v.value() != StoreState::Active as u8 {
            continue;
        }
        let store = Uuid::from_u128(k.value());
        let mut keys = Vec::new();
        for prefix in prefixes(&txn, store)? {
            read::walk(&txn, table, &prefix, false, |k, v| {
                if keys.len() >= batch || !stale(v)? {
                    return Ok(false);
                }
                keys.push(k.to_vec());
                Ok(true)
            })?;
        }
        if !keys.is_empty() {
            out.push((store, keys));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn after_a_restart_on_a_clock_behind_new_events_still_sort_last() {
        let dir = tempfile::tempdir().unwrap();
        let memory = crate::memory::Shares::of_one_cell(64 << 20).cell;
        let open = |clock| crate::cells::Cell::open("test", dir.path(), clock, &memory).unwrap();
        let store = Uuid::now_v7();
        let activate = |cell: &crate::cells::Cell| {
            let txn = redb::Database::begin_write(&cell.db).unwrap();
            txn.open_table(STORE_STATE).unwrap().insert(store.as_u128(), StoreState::Active as u8).unwrap();
            txn.commit().unwrap();
        };
        let append_one = |cell: &crate::cells::Cell| {
            let (now, writer) = (cell.clock.now_ms(), cell.writer.clone());
            async move {
                writer
                    .write(Some(store), move |tx| {
                        append(tx, store, "product.created", b"{}".to_vec(), now)?;
                        Ok(tx.commit_id(now))
                    })
                    .await
            }
        };
        // A day ahead (a cell whose clock ran ahead, or a store moved from one)…
        let ahead = crate::clock::Clock::system();
        ahead.advance(std::time::Duration::from_secs(86_400));
        let cell = open(ahead);
        activate(&cell);
        let first = append_one(&cell).await.unwrap();
        cell.close();
        drop(cell);
        // …then on the real time: the next event still sorts after the first.
        let cell = open(crate::clock::Clock::system());
        let second = append_one(&cell).await.unwrap();
        assert!(second > first, "{second} after {first}");
        let q = crate::storage::list::ListQuery { sort: "created_at", limit: 10, ..Default::default() };
        let listed = cell.list::<Event>(store, &q).await.unwrap();
        assert_eq!(listed.total, 2);
        let (a, b) = (&listed.items[0], &listed.items[1]);
        assert!(a.id < b.id && a.created_at > b.created_at, "listed in the order written, whatever the clock said");
        cell.close();
    }

    #[test]
    fn the_documentation_lists_every_topic() {
        let doc = include_str!("../../docs/webhooks.md");
        let listed: Vec<&str> = doc
            .lines()
            .filter_map(|l| l.strip_prefix("| `"))
            .filter_map(|l| l.split('`').next())
            .filter(|t| t.contains('.') && !t.starts_with("webhook"))
            .collect();
        assert_eq!(listed, TOPIC_NAMES);
    }

    #[test]
    fn the_filter_names_every_topic_in_order() {
        assert_eq!(TOPIC_NAMES, TOPICS.iter().map(|(t, _)| *t).collect::<Vec<_>>());
    }
}
