//! Format 4: collections on the record layer. Their list rows lose the live/all and per-parent
//! scopes: whether a collection is shown (not soft-deleted), its type, status and parent are
//! counted filters, its lower-cased title the search text. Their counters become the layer's
//! (a total and one per filter value), and live children are found under their parent in the
//! new `collection_children` table.

use redb::WriteTransaction;

use crate::domain::collection::Collection;
use crate::storage::record::rebuild;

pub(super) fn collections_are_records(txn: &WriteTransaction) -> Result<(), redb::Error> {
    rebuild::<Collection>(txn)
}

#[cfg(test)]
mod tests {
    use redb::{ReadableDatabase, ReadableTable};
    use uuid::Uuid;

    use crate::cells::migrations::fixture::migrated;
    use crate::domain::collection::{Collection, CreateCollection, build};
    use crate::storage::list::{ListQuery, page_from_rows};
    use crate::storage::record::{SHOWN, row_key};
    use crate::storage::tables::COLLECTION_CHILDREN;

    fn collection(title: &str, at: i64, parent: Option<Uuid>) -> Collection {
        let input = CreateCollection { title: title.into(), parent_id: parent, ..Default::default() };
        let mut c = build(&input, Uuid::from_u128(at as u128), at).unwrap();
        c.handle = title.to_lowercase();
        c
    }

    #[test]
    fn format_3_collections_are_listed_filtered_and_found_under_their_parent() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cell.redb");
        let store = Uuid::from_u128(7);
        let root = collection("Root", 1, None);
        let child = collection("Child", 2, Some(root.id));
        let mut gone = collection("Gone", 3, Some(root.id));
        gone.deleted_at = Some(4);
        let db = migrated(&path, 3, store, &[root.clone(), child.clone(), gone]);
        let txn = db.begin_read().unwrap();
        let titles = |q: &ListQuery| -> (u64, Vec<String>) {
            let listed = page_from_rows::<Collection>(&txn, store, q, 0).unwrap();
            (listed.total, listed.items.into_iter().map(|c| c.title).collect())
        };
        let shown = (0, vec![SHOWN.as_bytes().to_vec()]);
        let q = ListQuery { sort: "title", limit: 10, filters: vec![shown.clone()], ..Default::default() };
        assert_eq!(titles(&q), (2, vec!["Child".into(), "Root".into()]), "the shown counter holds the total");
        let all = ListQuery { filters: vec![], ..q.clone() };
        assert_eq!(titles(&all).0, 3);
        let roots = ListQuery { filters: vec![shown.clone(), (3, vec![Uuid::nil().as_bytes().to_vec()])], ..q.clone() };
        assert_eq!(titles(&roots), (1, vec!["Root".into()]));
        let children = txn.open_table(COLLECTION_CHILDREN.def).unwrap();
        let rows: Vec<Vec<u8>> = children.iter().unwrap().map(|r| r.unwrap().0.value().to_vec()).collect();
        let mut expected = row_key(store, root.id);
        expected.extend_from_slice(child.id.as_bytes());
        assert_eq!(rows, vec![expected], "live children only");
    }
}
