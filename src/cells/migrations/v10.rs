//! Format 10: levels keyed by variant and location (`store ‖ variant ‖ location`, was
//! `store ‖ level id`), so a variant's levels are one range; their order rows end with the same
//! pair, and are rebuilt. The rows themselves are unchanged.

use redb::{ReadableTable, WriteTransaction};

use crate::cells::stock::levels::{Level, level_key};
use crate::storage::codec::decode;
use crate::storage::keys::leading_store;
use crate::storage::record;
use crate::storage::tables::LEVELS;

/// How long a format-9 key is: store ‖ level id.
const V9_KEY: usize = 32;

pub(super) fn levels_by_variant(txn: &WriteTransaction) -> Result<(), redb::Error> {
    let mut table = txn.open_table(LEVELS.def)?;
    let mut moved = Vec::new();
    for item in table.iter()? {
        let (k, v) = item?;
        // Step 8 writes levels at their format-9 key; a key of today's length is already moved.
        if k.value().len() != V9_KEY {
            continue;
        }
        let store = leading_store(k.value()).ok_or_else(|| redb::Error::Corrupted("levels: a key without its store".into()))?;
        let level: Level = decode(v.value()).map_err(|e| redb::Error::Corrupted(format!("levels: {e}")))?;
        moved.push((k.value().to_vec(), level_key(store, level.variant_id, level.location_id), v.value().to_vec()));
    }
    for (old, new, row) in moved {
        table.remove(old.as_slice())?;
        table.insert(new.as_slice(), row.as_slice())?;
    }
    drop(table);
    // The order rows end with the key's tail: every one is written again.
    record::rebuild::<Level>(txn)
}

#[cfg(test)]
mod tests {
    use redb::{ReadableDatabase, ReadableTable};
    use uuid::Uuid;

    use crate::cells::migrations::fixture::migrated;
    use crate::cells::stock::levels::{Level, level_id, level_key};
    use crate::domain::stock::Quantities;
    use crate::storage::codec::decode;
    use crate::storage::keys::Key;
    use crate::storage::list::{ListQuery, page_from_rows};
    use crate::storage::tables::{LEVEL_ORDER, LEVELS};

    fn level(variant: u128, location: u128, available: i64, at: i64) -> Level {
        let (variant, location) = (Uuid::from_u128(variant), Uuid::from_u128(location));
        Level {
            id: level_id(variant, location),
            variant_id: variant,
            product_id: Uuid::from_u128(9),
            location_id: location,
            quantities: Quantities { available, ..Default::default() },
            created_at: at,
            updated_at: at,
        }
    }

    #[test]
    fn levels_move_to_their_variant_and_location_and_list_as_before() {
        let dir = tempfile::tempdir().unwrap();
        let store = Uuid::from_u128(1);
        let levels = [level(20, 31, 4, 100), level(21, 30, 7, 200), level(20, 30, 2, 300)];
        // `migrated` writes each at `store ‖ id`: format 9's key.
        let db = migrated(&dir.path().join("cell.redb"), 9, store, &levels);
        let txn = db.begin_read().unwrap();
        let rows: Vec<(Vec<u8>, Level)> = txn
            .open_table(LEVELS.def)
            .unwrap()
            .iter()
            .unwrap()
            .map(|r| {
                let (k, v) = r.unwrap();
                (k.value().to_vec(), decode(v.value()).unwrap())
            })
            .collect();
        let keys: Vec<Vec<u8>> = rows.iter().map(|(k, _)| k.clone()).collect();
        let want: Vec<Vec<u8>> = [(20, 30), (20, 31), (21, 30)]
            .iter()
            .map(|(v, l)| level_key(store, Uuid::from_u128(*v), Uuid::from_u128(*l)))
            .collect();
        assert_eq!(keys, want, "one row per level, a variant's contiguous, none left at its id");
        assert_eq!(rows[1].1, levels[0], "the rows are unchanged");
        // The lists find them: the store's, in creation order, and one location's partition.
        let q = ListQuery { sort: "created_at", limit: 10, ..Default::default() };
        let all = page_from_rows::<Level>(&txn, store, &q, 0).unwrap();
        assert_eq!((all.total, all.items), (3, levels.to_vec()));
        let at = ListQuery { filters: vec![(1, vec![Uuid::from_u128(30).as_bytes().to_vec()])], ..q };
        let there = page_from_rows::<Level>(&txn, store, &at, 0).unwrap();
        assert_eq!((there.total, there.items), (2, vec![levels[1].clone(), levels[2].clone()]));
        let order = txn.open_table(LEVEL_ORDER.def).unwrap();
        let prefix = Key::store(store).into_vec();
        assert!(order.iter().unwrap().all(|r| r.unwrap().0.value().starts_with(&prefix)));
    }
}
