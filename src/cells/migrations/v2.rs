//! Format 2: product list orders live in memory.

use redb::{ReadableTable, TableDefinition, WriteTransaction};

use crate::storage::keys::Key;
use crate::storage::tables::{COUNTERS, MOVE_LOG};

/// The product list orders of version 1: store table 2.
const V1_PRODUCT_ORDER: TableDefinition<&[u8], &[u8]> = TableDefinition::new("product_order");

/// Version 2 keeps product list orders in memory: their table and the product counters go, and
/// the store tables after it move down one number, in move-log entries too.
pub(super) fn product_orders_in_memory(txn: &WriteTransaction) -> Result<(), redb::Error> {
    txn.delete_table(V1_PRODUCT_ORDER)?;
    let mut counters = txn.open_table(COUNTERS.def)?;
    // `store ‖ "products" ‖ status bucket`: the key of every product counter, whatever the store.
    let suffix = Key::default().str("products").into_vec();
    counters.retain(|k, _| !(k.len() == 16 + suffix.len() + 1 && k[16..16 + suffix.len()] == suffix[..]))?;
    let mut log = txn.open_table(MOVE_LOG)?;
    let mut entries = Vec::new();
    for item in log.iter()? {
        let (k, v) = item?;
        entries.push((k.value().to_vec(), v.value().to_vec()));
    }
    for (k, mut v) in entries {
        let Some(table) = v.get(..2).map(|b| u16::from_be_bytes([b[0], b[1]])) else { continue };
        if table == 2 {
            log.remove(k.as_slice())?;
        } else if table > 2 {
            v[..2].copy_from_slice(&(table - 1).to_be_bytes());
            log.insert(k.as_slice(), v.as_slice())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::storage::tables::META;
    use redb::ReadableDatabase;

    #[test]
    fn version_one_cells_lose_product_orders_and_counters_and_renumber_move_logs() {
        use crate::storage::tables::{MOVE_LOG, STORE_TABLES};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cell.redb");
        let store = uuid::Uuid::from_u128(7);
        {
            let db = crate::storage::open(&path, crate::cells::DATABASE, crate::storage::ONE_OFF_CACHE).unwrap();
            let txn = db.begin_write().unwrap();
            txn.open_table(V1_PRODUCT_ORDER).unwrap().insert(Key::store(store).u8(0).bytes(), [].as_slice()).unwrap();
            let mut counters = txn.open_table(COUNTERS.def).unwrap();
            for b in 0..4u8 {
                counters.insert(Key::store(store).str("products").u8(b).bytes(), 5u64.to_le_bytes().as_slice()).unwrap();
            }
            counters.insert(Key::store(store).str("order_number").bytes(), 9u64.to_le_bytes().as_slice()).unwrap();
            drop(counters);
            let mut log = txn.open_table(MOVE_LOG).unwrap();
            for (seq, table) in [(1u64, 1u16), (2, 2), (3, 37)] {
                let mut v = table.to_be_bytes().to_vec();
                v.extend_from_slice(b"key");
                log.insert(Key::store(store).u64(seq).bytes(), v.as_slice()).unwrap();
            }
            drop(log);
            txn.open_table(META).unwrap().insert("format_version", 1u32.to_le_bytes().as_slice()).unwrap();
            txn.commit().unwrap();
        }
        let db = crate::storage::open(&path, crate::cells::DATABASE, crate::storage::ONE_OFF_CACHE).unwrap();
        let txn = db.begin_read().unwrap();
        assert!(!crate::storage::table_names(&db).unwrap().iter().any(|n| n == "product_order"));
        let counters = txn.open_table(COUNTERS.def).unwrap();
        let left: Vec<Vec<u8>> = counters.iter().unwrap().map(|r| r.unwrap().0.value().to_vec()).collect();
        assert_eq!(left, vec![Key::store(store).str("order_number").into_vec()], "only product counters go");
        let log = txn.open_table(MOVE_LOG).unwrap();
        let tables: Vec<u16> =
            log.iter().unwrap().map(|r| u16::from_be_bytes(r.unwrap().1.value()[..2].try_into().unwrap())).collect();
        assert_eq!(tables, vec![1, 36], "the product order entry dropped, later tables one down");
        assert_eq!(redb::TableHandle::name(&STORE_TABLES[36].def), "idempotency");
    }
}
