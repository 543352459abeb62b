//! Every table of both database kinds, declared in this one file. The meaning of each key and
//! value is documented in `data-format/README.md`; keep the two in step.

use redb::{TableDefinition, WriteTransaction};

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
/// `user id → MfaState`: the TOTP secret (pending or enabled), last accepted step, hashed recovery codes.
pub const MFA: TableDefinition<u128, &[u8]> = TableDefinition::new("mfa");
/// `mfaToken jti → MfaChallenge`: password-verified logins waiting for a code; removed when used.
pub const MFA_CHALLENGES: TableDefinition<u128, &[u8]> = TableDefinition::new("mfa_challenges");
/// `OAuth state → OidcPending`: provider, PKCE verifier and nonce of a social sign-in under way (10 min).
pub const OIDC_STATES: TableDefinition<&str, &[u8]> = TableDefinition::new("oidc_states");
/// `provider ‖ ':' ‖ subject → user id`: social accounts linked to users.
pub const SOCIAL_LINKS: TableDefinition<&str, u128> = TableDefinition::new("social_links");
/// `sha256(one-time code) → SocialGrant`: a finished social sign-in waiting for its exchange (5 min).
pub const SOCIAL_CODES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("social_codes");
/// `user id → Subscription`: a user's platform plan; no row means the default plan.
pub const SUBSCRIPTIONS: TableDefinition<u128, &[u8]> = TableDefinition::new("subscriptions");
/// `sha256(publishable key) → PublishableKey`: store, id, environment, last 4, created, revokedAt.
pub const PUBLISHABLE_KEYS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("publishable_keys");
/// `(store id, key id) → sha256(key)`: a store's publishable keys, for listing and revoking.
pub const STORE_PUBLISHABLE_KEYS: TableDefinition<(u128, u128), &[u8]> = TableDefinition::new("store_publishable_keys");
/// `store id → ClosedStore`: a closed store's directory entry, its memberships and when it was
/// closed; out of the directory (every route 404s, its keys admit no one) until reopened or,
/// after the grace period, forgotten.
pub const CLOSED_STORES: TableDefinition<u128, &[u8]> = TableDefinition::new("closed_stores");
/// `sha256(caller ‖ method ‖ path ‖ Idempotency-Key) → createdAt i64 BE ‖ Recorded`: the first response
/// to a keyed POST outside a store (register, `/stores`, subscriptions), kept 24 h.
pub const IDEMPOTENCY_KEYS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("idempotency_keys");
/// `sha256(reset token) → PasswordReset`: a password reset link's token (1 h, one use).
pub const PASSWORD_RESETS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("password_resets");
/// `user id → sha256(reset token)`: a user's one live reset token, voided by the next one.
pub const USER_PASSWORD_RESETS: TableDefinition<u128, &[u8]> = TableDefinition::new("user_password_resets");
/// `(store id, future user id) → Invitation`: an invitation of an email that has no account yet.
pub const INVITATIONS: TableDefinition<(u128, u128), &[u8]> = TableDefinition::new("invitations");
/// `sha256(invitation token) → (store id, future user id)`: the invitation a link accepts.
pub const INVITATION_TOKENS: TableDefinition<&[u8], (u128, u128)> = TableDefinition::new("invitation_tokens");
/// `(lower-cased email, store id) → future user id`: every store an email is invited to.
pub const EMAIL_INVITATIONS: TableDefinition<(&str, u128), u128> = TableDefinition::new("email_invitations");

// ---- cell.redb: the stores a cell holds -----------------------------------------------------

/// `store id → StoreState` (u8): whether the cell serves, receives or is handing over a store.
/// Local to the cell: never exported with the store.
pub const STORE_STATE: TableDefinition<u128, u8> = TableDefinition::new("store_state");
/// `store id → closed at (Unix ms, i64)`: stores closed by their owner, kept until the grace
/// period ends. Local to the cell.
pub const STORE_CLOSED: TableDefinition<u128, i64> = TableDefinition::new("store_closed");

/// What a cell does with a store it has rows of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum StoreState {
    /// Served: this cell holds the store.
    Active = 1,
    /// Being copied in by a move; not served until the move completes.
    Incoming = 2,
    /// Closed by its owner: not served, its scheduled work stopped, its rows kept until the
    /// grace period ends.
    Closed = 3,
}

impl StoreState {
    pub fn from_u8(v: u8) -> Option<StoreState> {
        match v {
            1 => Some(StoreState::Active),
            2 => Some(StoreState::Incoming),
            3 => Some(StoreState::Closed),
            _ => None,
        }
    }
}
/// `store ‖ seq → table index ‖ key`: keys written while the store is being moved, replayed
/// to the target in the final step. Local to the cell.
pub const MOVE_LOG: TableDefinition<&[u8], &[u8]> = TableDefinition::new("move_log");
/// `store ‖ seq u64 → product id`: products whose search document is stale, appended in the
/// product write's transaction and deleted once the indexer has committed them to tantivy.
/// Local to the cell: never exported with the store (a moved store is re-queued on arrival).
pub const OUTBOX: TableDefinition<&[u8], &[u8]> = TableDefinition::new("search_outbox");

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
/// `store ‖ handle → product id`: handles are unique per store.
pub const PRODUCT_HANDLES: StoreTable = StoreTable::new(2, "product_handles");
/// `store ‖ variant id → product id`: finds a variant's product (carts, inventory).
pub const VARIANTS: StoreTable = StoreTable::new(3, "variants");
/// `store ‖ counter name → u64 little-endian`: totals for list envelopes.
pub const COUNTERS: StoreTable = StoreTable::new(4, "counters");

// ---- merchandising: collections, markets, catalogs (see data-format/README.md) ----------------

/// `store ‖ collection id → Collection` (soft-deleted ones too, with `deletedAt`).
pub const COLLECTIONS: StoreTable = StoreTable::new(5, "collections");
/// `store ‖ sort field u8 ‖ sort value ‖ collection id → summary`: the collection list orders
/// (soft-deleted ones too); the summary (shown, type, status, parent, lower-cased title) filters
/// a walk.
pub const COLLECTION_ORDER: StoreTable = StoreTable::new(6, "collection_order");
/// `store ‖ handle → collection id`: collection handles are unique per store.
pub const COLLECTION_HANDLES: StoreTable = StoreTable::new(7, "collection_handles");
/// `store ‖ collection id → SmartRules`: the rules of every live smart collection, read on each
/// product write.
pub const COLLECTION_RULES: StoreTable = StoreTable::new(8, "collection_rules");
/// `store ‖ collection id ‖ sort segment ‖ product id → ()`: a collection's products in order.
pub const COLLECTION_PRODUCTS: StoreTable = StoreTable::new(9, "collection_products");
/// `store ‖ product id ‖ collection id → sort kind u8 ‖ sort segment`: a product's collections.
pub const PRODUCT_COLLECTIONS: StoreTable = StoreTable::new(10, "product_collections");
/// `store ‖ publishAt i64 ‖ collection id → ()`: scheduled collections, for the publish task.
pub const COLLECTION_SCHEDULE: StoreTable = StoreTable::new(11, "collection_schedule");
/// `store ‖ market id → Market`.
pub const MARKETS: StoreTable = StoreTable::new(12, "markets");
/// `store ‖ sort field u8 ‖ sort value ‖ market id → ()`: the market list orders.
pub const MARKET_ORDER: StoreTable = StoreTable::new(13, "market_order");
/// `store ‖ country code → market id`: a country belongs to at most one market of a store.
pub const MARKET_COUNTRIES: StoreTable = StoreTable::new(14, "market_countries");
/// `store ‖ catalog id → Catalog`.
pub const CATALOGS: StoreTable = StoreTable::new(15, "catalogs");
/// `store ‖ sort field u8 ‖ scope u8 [‖ market id] ‖ sort value ‖ catalog id → filter summary`:
/// the catalog list orders; the value (status, selection, lower-cased name) filters a walk.
pub const CATALOG_ORDER: StoreTable = StoreTable::new(16, "catalog_order");
/// `store ‖ catalog id ‖ product id → ()`: inclusion entries of a SPECIFIC catalog, exclusion
/// entries of an ALL catalog.
pub const CATALOG_PRODUCTS: StoreTable = StoreTable::new(17, "catalog_products");

// ---- selling: discounts, shipping, tax (see docs/selling.md) ----------------------------------

/// `store ‖ discount id → Discount`.
pub const DISCOUNTS: StoreTable = StoreTable::new(18, "discounts");
/// `store ‖ lower-cased code → discount id`: codes are unique per store without regard to case.
pub const DISCOUNT_CODES: StoreTable = StoreTable::new(19, "discount_codes");
/// `store ‖ sort field u8 ‖ sort value ‖ discount id → ()`: the discount list orders.
pub const DISCOUNT_ORDER: StoreTable = StoreTable::new(20, "discount_order");
/// `store ‖ discount id → ()`: the automatic discounts every calculation considers.
pub const DISCOUNT_AUTOMATIC: StoreTable = StoreTable::new(21, "discount_automatic");
/// `store ‖ discount id ‖ 0 → u64` total uses, `store ‖ discount id ‖ 1 ‖ customer key → u64`
/// uses by one customer; written only when an order is created.
pub const DISCOUNT_USAGE: StoreTable = StoreTable::new(22, "discount_usage");
/// `store ‖ discount id ‖ comment id → DiscountComment` (scoped to its discount).
pub const DISCOUNT_COMMENTS: StoreTable = StoreTable::new(23, "discount_comments");
/// `store ‖ zone id → ShippingZone` (rates inline).
pub const SHIPPING_ZONES: StoreTable = StoreTable::new(24, "shipping_zones");
/// `store ‖ tax rate id → TaxRate`.
pub const TAX_RATES: StoreTable = StoreTable::new(25, "tax_rates");

/// `store ‖ product id → status u8 ‖ JSON`: the product as the API shows it, rendered when the
/// product is written, so reads copy bytes instead of decoding and re-serializing.
pub const PRODUCT_VIEWS: StoreTable = StoreTable::new(26, "product_views");

// ---- checkout: carts, checkouts, orders, payments, gift cards ----------------------------------

/// `store ‖ cart id → Cart`: a shopper's lines (variant, quantity, attributes).
pub const CARTS: StoreTable = StoreTable::new(27, "carts");
/// `store ‖ checkout id → Checkout`: contact, addresses, chosen rate, codes, gift cards, and the
/// order it became.
pub const CHECKOUTS: StoreTable = StoreTable::new(28, "checkouts");
/// `store ‖ order id → Order`.
pub const ORDERS: StoreTable = StoreTable::new(29, "orders");
/// `store ‖ sort field u8 ‖ sort value ‖ order id → filter summary`: the order list orders.
pub const ORDER_ORDER: StoreTable = StoreTable::new(30, "order_order");
/// `store ‖ sha256(session token) → StorefrontSession`: guest sessions and their request context.
pub const STOREFRONT_SESSIONS: StoreTable = StoreTable::new(31, "storefront_sessions");
/// `store ‖ payment intent id → PaymentIntent`: payment sessions of checkouts, with the provider's
/// reference and status.
pub const PAYMENT_INTENTS: StoreTable = StoreTable::new(32, "payment_intents");
/// `store ‖ gift card id → GiftCard` (balance, status, redemptions).
pub const GIFT_CARDS: StoreTable = StoreTable::new(33, "gift_cards");
/// `store ‖ sha256(store ‖ normalised code) → gift card id`: finds a card by its code without storing it.
pub const GIFT_CARD_CODES: StoreTable = StoreTable::new(34, "gift_card_codes");
/// `store ‖ sort field u8 ‖ sort value ‖ gift card id → ()`: the gift card list orders (created,
/// updated, balance, initial value).
pub const GIFT_CARD_ORDER: StoreTable = StoreTable::new(35, "gift_card_order");
/// `store ‖ sha256(caller ‖ Idempotency-Key) → the first response` to a POST, kept 24 h.
pub const IDEMPOTENCY: StoreTable = StoreTable::new(36, "idempotency");

/// `store ‖ sort field u8 ‖ sort value ‖ zone id → ()`: the shipping zone list orders.
pub const SHIPPING_ZONE_ORDER: StoreTable = StoreTable::new(37, "shipping_zone_order");
/// `store ‖ sort field u8 ‖ sort value ‖ tax rate id → summary (country)`: the tax rate list orders.
pub const TAX_RATE_ORDER: StoreTable = StoreTable::new(38, "tax_rate_order");

/// `store ‖ discount id ‖ sort field u8 ‖ sort value ‖ comment id → ()`: a discount's comment list.
pub const DISCOUNT_COMMENT_ORDER: StoreTable = StoreTable::new(39, "discount_comment_order");
/// `store ‖ parent id ‖ collection id → ()`: the live children of a collection, which move up
/// when it is deleted.
pub const COLLECTION_CHILDREN: StoreTable = StoreTable::new(40, "collection_children");
/// `store ‖ product id → ProductSorts`: what a product's lists sort it by (created, updated,
/// title key, price, inventory, status), read instead of whole products when a list is built.
pub const PRODUCT_SORTS: StoreTable = StoreTable::new(41, "product_sorts");

// ---- events, jobs and webhooks (see docs/webhooks.md) -------------------------------------------

/// `store ‖ event id → Event`: what happened in the store, appended in the transaction of the
/// change itself; ids are v7 and grow in commit order, so the table reads in event order.
pub const EVENTS: StoreTable = StoreTable::new(42, "events");
/// `store ‖ sort field u8 ‖ sort value ‖ event id → summary (topic, time)`: the event list orders.
pub const EVENT_ORDER: StoreTable = StoreTable::new(43, "event_order");
/// `store ‖ job id → Job`: durable background work (deliveries, mail, scheduled checks), claimed
/// with a lease by the cell's job runner.
pub const JOBS: StoreTable = StoreTable::new(44, "jobs");
/// `store ‖ due i64 ‖ job id → ()`: when each live job is next due (a claimed one: when its
/// lease ends). Dead jobs have no row.
pub const JOB_DUE: StoreTable = StoreTable::new(45, "job_due");
/// `store ‖ webhook id → Webhook`: subscriptions with their secret and delivery cursor.
pub const WEBHOOKS: StoreTable = StoreTable::new(46, "webhooks");
/// `store ‖ sort field u8 ‖ sort value ‖ webhook id → ()`: the subscription list orders.
pub const WEBHOOK_ORDER: StoreTable = StoreTable::new(47, "webhook_order");
/// `store ‖ webhook id ‖ delivery id → Delivery`: each event sent to a subscription, with its
/// attempts (scoped to its subscription).
pub const DELIVERIES: StoreTable = StoreTable::new(48, "deliveries");
/// `store ‖ webhook id ‖ sort field u8 ‖ sort value ‖ delivery id → summary`: a subscription's
/// delivery log.
pub const DELIVERY_ORDER: StoreTable = StoreTable::new(49, "delivery_order");

// ---- stock: locations, levels, history, fulfillment (see docs/stock.md) -----------------------

/// `store ‖ location id → Location`.
pub const LOCATIONS: StoreTable = StoreTable::new(50, "locations");
/// `store ‖ sort field u8 ‖ sort value ‖ location id → summary (active)`: the location list orders.
pub const LOCATION_ORDER: StoreTable = StoreTable::new(51, "location_order");
/// `store ‖ 0 ‖ lower-cased name → location id` (names are unique without regard to case) and
/// `store ‖ 1 → location id`: the store's default location.
pub const LOCATION_KEYS: StoreTable = StoreTable::new(52, "location_keys");
/// `store ‖ level id → Level`: a variant's quantities at a location; the level id is derived
/// from the two ids (`cells::inventory::level_id`).
pub const LEVELS: StoreTable = StoreTable::new(53, "levels");
/// `store ‖ sort field u8 ‖ sort value ‖ level id → summary (variant, location)`: the level
/// list orders, with a partition per variant and per location.
pub const LEVEL_ORDER: StoreTable = StoreTable::new(54, "level_order");
/// `store ‖ change id → InventoryChange`: every quantity change, with reason, actor, reference,
/// deltas and results; ids are v7 in commit order.
pub const INVENTORY_HISTORY: StoreTable = StoreTable::new(55, "inventory_history");
/// `store ‖ sort field u8 ‖ sort value ‖ change id → summary (variant, location, reason, time)`.
pub const INVENTORY_HISTORY_ORDER: StoreTable = StoreTable::new(56, "inventory_history_order");
/// `store ‖ order id ‖ fulfillment order id → FulfillmentOrder` (scoped to its order).
pub const FULFILLMENT_ORDERS: StoreTable = StoreTable::new(57, "fulfillment_orders");
/// `store ‖ order id ‖ sort field u8 ‖ sort value ‖ fulfillment order id → ()`.
pub const FULFILLMENT_ORDER_LIST: StoreTable = StoreTable::new(58, "fulfillment_order_list");
/// `store ‖ order id ‖ fulfillment id → Fulfillment` (scoped to its order).
pub const FULFILLMENTS: StoreTable = StoreTable::new(59, "fulfillments");
/// `store ‖ order id ‖ sort field u8 ‖ sort value ‖ fulfillment id → ()`.
pub const FULFILLMENT_LIST: StoreTable = StoreTable::new(60, "fulfillment_list");
/// `store ‖ location id ‖ fulfillment order id → order id`: the unfinished fulfillment orders of
/// each location (a location with any may not be deactivated).
pub const LOCATION_WORK: StoreTable = StoreTable::new(61, "location_work");

// ---- portability (see docs/operations.md, "One store as a portable file") ---------------------

/// `store ‖ feature name → Hold`: a feature kept off until a member acts, e.g. `payments` of a
/// store imported from another installation until its payment settings are entered again.
pub const STORE_HOLDS: StoreTable = StoreTable::new(62, "store_holds");

/// Every store-scoped table, in index order: exporting a store copies exactly these ranges.
pub const STORE_TABLES: &[StoreTable] = &[
    STORES,
    PRODUCTS,
    PRODUCT_HANDLES,
    VARIANTS,
    COUNTERS,
    COLLECTIONS,
    COLLECTION_ORDER,
    COLLECTION_HANDLES,
    COLLECTION_RULES,
    COLLECTION_PRODUCTS,
    PRODUCT_COLLECTIONS,
    COLLECTION_SCHEDULE,
    MARKETS,
    MARKET_ORDER,
    MARKET_COUNTRIES,
    CATALOGS,
    CATALOG_ORDER,
    CATALOG_PRODUCTS,
    DISCOUNTS,
    DISCOUNT_CODES,
    DISCOUNT_ORDER,
    DISCOUNT_AUTOMATIC,
    DISCOUNT_USAGE,
    DISCOUNT_COMMENTS,
    SHIPPING_ZONES,
    TAX_RATES,
    PRODUCT_VIEWS,
    CARTS,
    CHECKOUTS,
    ORDERS,
    ORDER_ORDER,
    STOREFRONT_SESSIONS,
    PAYMENT_INTENTS,
    GIFT_CARDS,
    GIFT_CARD_CODES,
    GIFT_CARD_ORDER,
    IDEMPOTENCY,
    SHIPPING_ZONE_ORDER,
    TAX_RATE_ORDER,
    DISCOUNT_COMMENT_ORDER,
    COLLECTION_CHILDREN,
    PRODUCT_SORTS,
    EVENTS,
    EVENT_ORDER,
    JOBS,
    JOB_DUE,
    WEBHOOKS,
    WEBHOOK_ORDER,
    DELIVERIES,
    DELIVERY_ORDER,
    LOCATIONS,
    LOCATION_ORDER,
    LOCATION_KEYS,
    LEVELS,
    LEVEL_ORDER,
    INVENTORY_HISTORY,
    INVENTORY_HISTORY_ORDER,
    FULFILLMENT_ORDERS,
    FULFILLMENT_ORDER_LIST,
    FULFILLMENTS,
    FULFILLMENT_LIST,
    LOCATION_WORK,
    STORE_HOLDS,
];

/// The store tables a backup leaves out: each row of them follows from rows of other tables, so
/// a restore writes them again from those (`cells::rebuilt`), as it rebuilds search. They hold
/// most of a cell's rows (an order keeps seven list rows, an event two, a product four rows
/// beside its record), so a backup reads and sends about a third of the rows it would.
pub const REBUILT: &[StoreTable] = &[
    // A product's handle, variants, view and sort values, from the product.
    PRODUCT_HANDLES,
    VARIANTS,
    PRODUCT_VIEWS,
    PRODUCT_SORTS,
    // When each live job is due, from the job.
    JOB_DUE,
    // The order tables of every record kind, from its records (`record::refill_order`).
    COLLECTION_ORDER,
    MARKET_ORDER,
    CATALOG_ORDER,
    DISCOUNT_ORDER,
    DISCOUNT_COMMENT_ORDER,
    SHIPPING_ZONE_ORDER,
    TAX_RATE_ORDER,
    ORDER_ORDER,
    GIFT_CARD_ORDER,
    EVENT_ORDER,
    WEBHOOK_ORDER,
    DELIVERY_ORDER,
    LOCATION_ORDER,
    LEVEL_ORDER,
    INVENTORY_HISTORY_ORDER,
    FULFILLMENT_ORDER_LIST,
    FULFILLMENT_LIST,
];

/// Creates every table of the account directory.
pub fn account_tables(txn: &WriteTransaction) -> Result<(), redb::Error> {
    txn.open_table(USERS)?;
    txn.open_table(USER_EMAILS)?;
    txn.open_table(SESSIONS)?;
    txn.open_table(USER_SESSIONS)?;
    txn.open_table(STORE_DIRECTORY)?;
    txn.open_table(MEMBERS)?;
    txn.open_table(USER_STORES)?;
    txn.open_table(CELL_LOAD)?;
    txn.open_table(SUBSCRIPTIONS)?;
    txn.open_table(PUBLISHABLE_KEYS)?;
    txn.open_table(STORE_PUBLISHABLE_KEYS)?;
    txn.open_table(MFA)?;
    txn.open_table(MFA_CHALLENGES)?;
    txn.open_table(OIDC_STATES)?;
    txn.open_table(SOCIAL_LINKS)?;
    txn.open_table(SOCIAL_CODES)?;
    txn.open_table(IDEMPOTENCY_KEYS)?;
    txn.open_table(CLOSED_STORES)?;
    txn.open_table(PASSWORD_RESETS)?;
    txn.open_table(USER_PASSWORD_RESETS)?;
    txn.open_table(INVITATIONS)?;
    txn.open_table(INVITATION_TOKENS)?;
    txn.open_table(EMAIL_INVITATIONS)?;
    // The directory's mail jobs, under the nil store id (see `jobs`).
    txn.open_table(JOBS.def)?;
    txn.open_table(JOB_DUE.def)?;
    Ok(())
}

/// Creates every table of a cell.
pub fn cell_tables(txn: &WriteTransaction) -> Result<(), redb::Error> {
    txn.open_table(STORE_STATE)?;
    txn.open_table(STORE_CLOSED)?;
    txn.open_table(MOVE_LOG)?;
    txn.open_table(OUTBOX)?;
    for t in STORE_TABLES {
        txn.open_table(t.def)?;
    }
    Ok(())
}

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
