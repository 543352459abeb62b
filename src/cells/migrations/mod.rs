//! The cell database's format steps: each file names what its version changed. They live with
//! the cells because they rebuild the cells' records through the record layer.

use crate::storage::migrations::Step;

mod v10;
mod v11;
mod v12;
mod v13;
mod v14;
mod v2;
mod v3;
mod v4;
mod v5;
mod v6;
mod v7;
mod v8;

/// Every step, in order: each file names what its version changed.
pub const STEPS: &[Step] = &[
    Step { from: 1, run: v2::product_orders_in_memory },
    Step { from: 2, run: v3::records_count_their_filters },
    Step { from: 3, run: v4::collections_are_records },
    Step { from: 4, run: v5::filters_have_partitions },
    Step { from: 5, run: v6::product_sorts_apart },
    Step { from: 6, run: v7::events_jobs_and_store_mail },
    Step { from: 7, run: v8::stock_per_location },
    // 9 changed the account directory alone.
    Step { from: 9, run: v10::levels_by_variant },
    Step { from: 10, run: v11::partition_rows_are_keys },
    Step { from: 11, run: v12::event_data_compressed },
    Step { from: 12, run: v13::summaries_in_one_sort },
    Step { from: 13, run: v14::own_order_keeps_no_rows },
];

/// What the steps' tests share: a cell written at an older format, opened through the steps.
#[cfg(test)]
mod fixture {
    use std::path::Path;

    use redb::Database;
    use uuid::Uuid;

    use crate::domain::pricing::tax::{TaxRate, TaxRateInput};
    use crate::storage::codec::encode;
    use crate::storage::record::{Record, row_key};
    use crate::storage::tables::{META, StoreTable};
    use crate::storage::{ONE_OFF_CACHE, open};

    /// Writes a cell at format `version` holding `records` of `store` and nothing else (no list
    /// rows, no counters), then opens it: every step from `version` on runs.
    pub fn migrated<R: Record>(path: &Path, version: u32, store: Uuid, records: &[R]) -> Database {
        {
            let db = open(path, crate::cells::DATABASE, ONE_OFF_CACHE).unwrap();
            let txn = db.begin_write().unwrap();
            let mut t = txn.open_table(R::TABLE.def).unwrap();
            for r in records {
                t.insert(row_key(store, r.id()).as_slice(), encode(r).unwrap().as_slice()).unwrap();
            }
            drop(t);
            txn.open_table(META).unwrap().insert("format_version", version.to_le_bytes().as_slice()).unwrap();
            txn.commit().unwrap();
        }
        open(path, crate::cells::DATABASE, ONE_OFF_CACHE).unwrap()
    }

    /// `db` (at `path`) with the row `key → value` of `table` put back as format `version` wrote
    /// it and that version recorded, closed and opened again: the steps from `version` on run.
    pub fn reopened_with_row(db: Database, path: &Path, version: u32, table: StoreTable, key: &[u8], value: &[u8]) -> Database {
        let txn = db.begin_write().unwrap();
        txn.open_table(table.def).unwrap().insert(key, value).unwrap();
        txn.open_table(META).unwrap().insert("format_version", version.to_le_bytes().as_slice()).unwrap();
        txn.commit().unwrap();
        drop(db);
        open(path, crate::cells::DATABASE, ONE_OFF_CACHE).unwrap()
    }

    /// Every row of `table`: (key, value), in key order.
    pub fn rows_of(db: &Database, table: StoreTable) -> Vec<(Vec<u8>, Vec<u8>)> {
        use redb::{ReadableDatabase, ReadableTable};
        let txn = db.begin_read().unwrap();
        let t = txn.open_table(table.def).unwrap();
        t.iter().unwrap().map(|r| r.unwrap()).map(|(k, v)| (k.value().to_vec(), v.value().to_vec())).collect()
    }

    /// A 5 % tax rate of `country` named `name`, made at `at` with the id `at`.
    pub fn tax_rate(country: &str, name: &str, at: i64) -> TaxRate {
        let input = TaxRateInput { country: country.into(), province: None, rate: 500, name: name.into(), shipping: false };
        TaxRate::create(&input, Uuid::from_u128(at as u128), at, at).unwrap()
    }
}
