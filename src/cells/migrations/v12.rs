//! Format 12: an event's data, its resource's JSON, is kept LZ4-compressed in its row
//! (`storage::codec::lz4_text`), so a leaf holds several events where it held one or two. Every
//! event is written again, in key order into a new table that then takes the old one's name: its
//! leaves fill as a restore's do, where rewriting the rows in place would leave the old tree's
//! leaves, smaller rows in as many pages. Keys, order rows and counters are unchanged. The rows
//! are read as `Event` itself: its data reads in either form, and earlier steps of the same run
//! may have written events already compressed.

use redb::{ReadableTable, TableDefinition, WriteTransaction};

use crate::cells::events::Event;
use crate::storage::codec::{decode, encode};
use crate::storage::tables::EVENTS;

/// Where the step writes the events before the table takes the old one's name.
const REWRITTEN: TableDefinition<&[u8], &[u8]> = TableDefinition::new("events_v12");

pub(super) fn event_data_compressed(txn: &WriteTransaction) -> Result<(), redb::Error> {
    let corrupt = |e: crate::error::ApiError| redb::Error::Corrupted(format!("events: {e}"));
    {
        let old = txn.open_table(EVENTS.def)?;
        let mut new = txn.open_table(REWRITTEN)?;
        for item in old.iter()? {
            let (k, v) = item?;
            let event: Event = decode(v.value()).map_err(corrupt)?;
            new.insert(k.value(), encode(&event).map_err(corrupt)?.as_slice())?;
        }
    }
    txn.delete_table(EVENTS.def)?;
    txn.rename_table(REWRITTEN, EVENTS.def)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use redb::{ReadableDatabase, ReadableTableMetadata, TableHandle};
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
        // Each event's data an order-like document (long enough to be compressed: a short one
        // is kept as it is).
        let lines = (1..=20).map(|q| format!(r#"{{"title":"Linen shirt","quantity":{q}}}"#)).collect::<Vec<_>>().join(",");
        let events: Vec<PlainEvent> = (0..5_000u128)
            .map(|i| PlainEvent {
                id: Uuid::from_u128(1000 + i),
                topic: "order.created".into(),
                created_at: 1_795_000_000_000 + i as i64,
                data: format!(r#"{{"id":"{i}","lineItems":[{lines}]}}"#),
            })
            .collect();
        assert!(events[0].data.len() >= crate::storage::codec::lz4_text::PLAIN_BELOW);
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
        let tables: Vec<String> = txn.list_tables().unwrap().map(|t| t.name().to_string()).collect();
        assert!(tables.contains(&"events".to_string()) && !tables.contains(&"events_v12".to_string()), "{tables:?}");
    }
}
