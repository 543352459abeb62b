//! Every table of both database kinds, declared in this one file. The meaning of each key and
//! value is documented in `data-format/README.md`; keep the two in step.

use redb::TableDefinition;

// ---- shared by both kinds -------------------------------------------------------------------

/// `name → bytes`: the database's own facts (`format_version` as u32 little-endian, `kind`).
pub const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

// ---- account.redb: the directory ------------------------------------------------------------

/// `user id → User`.
pub const USERS: TableDefinition<u128, &[u8]> = TableDefinition::new("users");
/// `lower-cased email → user id`: one account per email.
pub const USER_EMAILS: TableDefinition<&str, u128> = TableDefinition::new("user_emails");
/// `session id → Session`.
pub const SESSIONS: TableDefinition<u128, &[u8]> = TableDefinition::new("sessions");
/// `(user id, session id) → ()`: a user's sessions.
pub const USER_SESSIONS: TableDefinition<(u128, u128), ()> = TableDefinition::new("user_sessions");
/// `store id → StoreEntry`: name, owner and the cell that holds the store.
pub const STORE_DIRECTORY: TableDefinition<u128, &[u8]> = TableDefinition::new("store_directory");
/// `(store id, user id) → Membership`: who may reach a store, with which role.
pub const MEMBERS: TableDefinition<(u128, u128), &[u8]> = TableDefinition::new("members");
/// `(user id, store id) → ()`: the stores of a user, for `GET /stores`.
pub const USER_STORES: TableDefinition<(u128, u128), ()> = TableDefinition::new("user_stores");
/// `cell name → number of stores placed there`: placement picks the emptiest cell.
pub const CELL_LOAD: TableDefinition<&str, u64> = TableDefinition::new("cell_load");

// ---- cell.redb: the stores a cell holds -----------------------------------------------------

/// `store id → StoreState` (u8): whether the cell serves, receives or is handing over a store.
/// Local to the cell: never exported with the store.
pub const STORE_STATE: TableDefinition<u128, u8> = TableDefinition::new("store_state");
/// `store ‖ seq → table index ‖ key`: keys written while the store is being moved, replayed
/// to the target in the final step. Local to the cell.
pub const MOVE_LOG: TableDefinition<&[u8], &[u8]> = TableDefinition::new("move_log");

/// A byte-keyed table whose keys all start with a store id: one contiguous range per store.
#[derive(Clone, Copy)]
pub struct StoreTable {
    /// Position in [`STORE_TABLES`], recorded in the move log.
    pub index: u16,
    pub def: TableDefinition<'static, &'static [u8], &'static [u8]>,
}

impl StoreTable {
    const fn new(index: u16, name: &'static str) -> Self {
        StoreTable { index, def: TableDefinition::new(name) }
    }
}

/// `store → StoreSettings`.
pub const STORES: StoreTable = StoreTable::new(0, "stores");
/// `store ‖ product id → Product` (variants inline).
pub const PRODUCTS: StoreTable = StoreTable::new(1, "products");
/// `store ‖ sort field u8 ‖ status bucket u8 ‖ sort value ‖ product id → ()`: the list orders.
pub const PRODUCT_ORDER: StoreTable = StoreTable::new(2, "product_order");
/// `store ‖ handle → product id`: handles are unique per store.
pub const PRODUCT_HANDLES: StoreTable = StoreTable::new(3, "product_handles");
/// `store ‖ variant id → product id`: finds a variant's product (carts, inventory).
pub const VARIANTS: StoreTable = StoreTable::new(4, "variants");
/// `store ‖ counter name → u64 little-endian`: totals for list envelopes.
pub const COUNTERS: StoreTable = StoreTable::new(5, "counters");

/// Every store-scoped table, in index order: exporting a store copies exactly these ranges.
pub const STORE_TABLES: &[StoreTable] = &[STORES, PRODUCTS, PRODUCT_ORDER, PRODUCT_HANDLES, VARIANTS, COUNTERS];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_table_indexes_match_positions() {
        for (i, t) in STORE_TABLES.iter().enumerate() {
            assert_eq!(t.index as usize, i);
        }
    }
}
