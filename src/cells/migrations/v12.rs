//! Format 12: an event's data, its resource's JSON, is kept LZ4-compressed in its row
//! (`storage::codec::lz4_text`), so a leaf holds several events instead of one or two: every
//! `events` row is written again. Keys, order rows and counters are unchanged. The rows are read
//! as `Event` itself: its data reads in either form, and earlier steps of the same run may have
//! written events already compressed.

use std::ops::Bound;

use redb::{ReadableTable, WriteTransaction};

use crate::cells::events::Event;
use crate::storage::codec::{decode, encode};
use crate::storage::tables::EVENTS;

/// Rows rewritten per pass: the table is walked in chunks, never held whole in memory.
const CHUNK: usize = 4096;

pub(super) fn event_data_compressed(txn: &WriteTransaction) -> Result<(), redb::Error> {
    let corrupt = |e: crate::error::ApiError| redb::Error::Corrupted(format!("events: {e}"));
    let mut table = txn.open_table(EVENTS.def)?;
    let mut after: Option<Vec<u8>> = None;
    loop {
        let mut chunk = Vec::with_capacity(CHUNK);
        let rows = match &after {
            Some(k) => table.range::<&[u8]>((Bound::Excluded(k.as_slice()), Bound::Unbounded))?,
            None => table.iter()?,
        };
        for item in rows.take(CHUNK) {
            let (k, v) = item?;
            let event: Event = decode(v.value()).map_err(corrupt)?;
            chunk.push((k.value().to_vec(), encode(&event).map_err(corrupt)?));
        }
        let Some((last, _)) = chunk.last() else { return Ok(()) };
        after = Some(last.clone());
        for (k, v) in &chunk {
            table.insert(k.as_slice(), v.as_slice())?;
        }
    }
}

#[cfg(test)]
mod tests {
    use redb::{ReadableDatabase, ReadableTableMetadata};
    use serde::Serialize;
    use uuid::Uuid;

    use super::*;
    use crate::storage::record::row_key;
    use crate::storage::tables::META;
    use crate::storage::{ONE_OFF_CACHE, open};

    /// An event as format 11 kept it: its data as plain JSON.
    #[derive(Serialize)]
    struct PlainEvent {
        id: Uuid,
        topic: String,
        created_at: i64,
        data: String,
    }

    #[test]
    fn every_event_reads_back_the_same_from_a_smaller_row() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cell.redb");
        let store = Uuid::from_u128(1);
        // More than one chunk, each event's data an order-like document.
        let events: Vec<PlainEvent> = (0..CHUNK as u128 + 3)
            .map(|i| PlainEvent {
                id: Uuid::from_u128(1000 + i),
                topic: "order.created".into(),
                created_at: 1_795_000_000_000 + i as i64,
                data: format!(r#"{{"id":"{i}","lineItems":[{{"title":"Linen shirt","quantity":1}},{{"title":"Linen shirt","quantity":2}}]}}"#),
            })
            .collect();
        let plain_bytes: usize = events.iter().map(|e| encode(e).unwrap().len()).sum();
        {
            let db = open(&path, crate::cells::DATABASE, ONE_OFF_CACHE).unwrap();
            let txn = db.begin_write().unwrap();
            let mut t = txn.open_table(EVENTS.def).unwrap();
            for e in &events {
                t.insert(row_key(store, e.id).as_slice(), encode(e).unwrap().as_slice()).unwrap();
            }
            drop(t);
            txn.open_table(META).unwrap().insert("format_version", 11u32.to_le_bytes().as_slice()).unwrap();
            txn.commit().unwrap();
        }
        let db = open(&path, crate::cells::DATABASE, ONE_OFF_CACHE).unwrap();
        let txn = db.begin_read().unwrap();
        let table = txn.open_table(EVENTS.def).unwrap();
        assert_eq!(table.len().unwrap(), events.len() as u64);
        let mut stored_bytes = 0;
        for (item, before) in table.iter().unwrap().zip(&events) {
            let (k, v) = item.unwrap();
            assert_eq!(k.value(), row_key(store, before.id).as_slice());
            let after: Event = decode(v.value()).unwrap();
            assert_eq!(
                (after.id, after.topic.as_str(), after.created_at, after.data.as_str()),
                (before.id, before.topic.as_str(), before.created_at, before.data.as_str())
            );
            stored_bytes += v.value().len();
        }
        assert!(stored_bytes < plain_bytes, "{stored_bytes} bytes stored against {plain_bytes} before");
    }
}
