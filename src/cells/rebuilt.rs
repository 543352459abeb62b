//! The tables a backup leaves out (`tables::REBUILT`), written again at restore from the rows
//! they follow from, as search is: a product's handle, variants, view and sort values from the
//! product, each live job's due row from the job, each record kind's order rows from its records.

use redb::WriteTransaction;

/// Writes every table of [`REBUILT`](crate::storage::tables::REBUILT) that a database of kind
/// `kind` (`"account"` or `"cell"`) holds, from the rest of it, into `txn`. The tables start
/// empty: a restore runs this once, after the rows of the backup are in.
pub fn rebuild(txn: &WriteTransaction, kind: &str) -> Result<(), redb::Error> {
    // The directory keeps its mail jobs under the nil store; nothing else it holds is rebuilt.
    crate::jobs::refill_due(txn)?;
    if kind == "cell" {
        crate::cells::products::refill_derived(txn)?;
        crate::cells::kinds::refill_orders(txn)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use redb::TableHandle;

    use crate::cells::kinds::KINDS;
    use crate::storage::tables::*;

    #[test]
    fn the_tables_left_out_are_those_rebuilt() {
        let mut rebuilt: Vec<String> = vec![PRODUCT_HANDLES, VARIANTS, PRODUCT_VIEWS, PRODUCT_SORTS, JOB_DUE]
            .into_iter()
            .chain(KINDS.iter().filter_map(|k| k.order))
            .map(|t| t.def.name().to_string())
            .collect();
        let mut left_out: Vec<String> = REBUILT.iter().map(|t| t.def.name().to_string()).collect();
        rebuilt.sort_unstable();
        left_out.sort_unstable();
        assert_eq!(left_out, rebuilt, "every order table is rebuilt, and nothing else is left out");
        for k in KINDS {
            assert!(!left_out.iter().any(|t| t == k.table.def.name()), "{}: its records are backed up", k.table.def.name());
        }
    }
}
