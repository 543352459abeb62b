//! Gift cards in a cell. [`write_gift_card`] is the one function that writes a card row and its
//! secondary rows (code claim, list orders, counter); [`redeem_gift_card`] is the one place a
//! balance goes down, inside the order-creating write job.
//!
//! The code is never stored: `gift_card_codes` maps `sha256(store ‖ normalised code)` to the card,
//! and the card keeps only the digest and its last four characters.

use redb::ReadTransaction;
use uuid::Uuid;

use crate::cells::Cell;
use crate::domain::gift_card::{
    GiftCard, GiftCardStatus, IssueGiftCard, UpdateGiftCard, code_hash, generate_code, normalise_code,
};
use crate::domain::money::Money;
use crate::domain::store::StoreSettings;
use crate::error::{ApiError, ApiResult, Code};
use crate::http::query::Paging;
use crate::storage::codec::{decode, encode};
use crate::storage::keys::Key;
use crate::storage::read;
use crate::storage::tables::{COUNTERS, GIFT_CARD_CODES, GIFT_CARD_ORDER, GIFT_CARDS, STORES};
use crate::storage::writer::{Rows, Tx};

/// The sortable fields of the gift card list, in index-field order.
pub const SORT_FIELDS: &[&str] = &["created_at", "updated_at", "balance", "initial_value"];

/// Attempts at a generated code before giving up: two random 80-bit codes colliding is already
/// beyond belief, so a second collision means something else is wrong.
const GENERATE_ATTEMPTS: usize = 3;

fn row_key(store: Uuid, id: Uuid) -> Vec<u8> {
    Key::store(store).id(id).into_vec()
}

fn code_key(store: Uuid, hash: &[u8; 32]) -> Vec<u8> {
    let mut k = Key::store(store).into_vec();
    k.extend_from_slice(hash);
    k
}

fn counter_key(store: Uuid) -> Vec<u8> {
    Key::store(store).str("gift_cards").into_vec()
}

fn order_rows(store: Uuid, g: &GiftCard) -> Rows {
    let k = |field: u8, value: i64| (Key::store(store).u8(field).i64(value).id(g.id).into_vec(), Vec::new());
    vec![k(0, g.created_at), k(1, g.updated_at), k(2, g.balance), k(3, g.initial_value.amount)]
}

/// Writes `new` in place of `old` (absent: a new card) with its list orders; a new card also
/// claims its code (409 `GIFT_CARD_CODE_TAKEN` naming `code` when another card of the store has
/// it) and counts in the total. A card's code never changes, and cards are never deleted: a
/// merchant disables them.
pub fn write_gift_card(tx: &mut Tx, store: Uuid, old: Option<&GiftCard>, new: &GiftCard) -> ApiResult<()> {
    if old.is_none() {
        let code = code_key(store, &new.code_hash);
        if tx.get(GIFT_CARD_CODES, &code)?.is_some_and(|owner| owner != new.id.as_bytes()) {
            return Err(ApiError::field("code", "another gift card of this store already has this code")
                .with_code(Code::GIFT_CARD_CODE_TAKEN));
        }
        tx.put(GIFT_CARD_CODES, &code, new.id.as_bytes())?;
        tx.bump(COUNTERS, &counter_key(store), 1)?;
    }
    let rows = |g: Option<&GiftCard>| g.map(|g| order_rows(store, g)).unwrap_or_default();
    tx.sync_rows(GIFT_CARD_ORDER, &rows(old), &rows(Some(new)))?;
    tx.put(GIFT_CARDS, &row_key(store, new.id), &encode(new)?)
}

fn load(tx: &Tx, store: Uuid, id: Uuid) -> ApiResult<Option<GiftCard>> {
    tx.get(GIFT_CARDS, &row_key(store, id))?.map(|b| decode(&b)).transpose()
}

/// The card with this id, in a read transaction (a checkout re-reading the cards it applied).
pub fn read_gift_card(txn: &ReadTransaction, store: Uuid, id: Uuid) -> ApiResult<Option<GiftCard>> {
    read::get(txn, GIFT_CARDS, &row_key(store, id))
}

/// The card a code names (normalised, hashed lookup), or None. Read-only.
pub fn find_gift_card(txn: &ReadTransaction, store: Uuid, code: &str) -> ApiResult<Option<GiftCard>> {
    // A code that cannot be normalised names no card: no card was ever issued with it.
    let Some(code) = normalise_code(code) else { return Ok(None) };
    let Some(id) = read::get_raw(txn, GIFT_CARD_CODES, &code_key(store, &code_hash(store, &code)))? else {
        return Ok(None);
    };
    read_gift_card(txn, store, Uuid::from_slice(&id).map_err(ApiError::internal)?)
}

/// Inside the order-creating write job (writer thread; repeatable): re-reads the card, takes
/// min(balance, `wanted.amount`) (partial redemption), records the redemption (order id, amount,
/// time) and writes the new balance with [`write_gift_card`]. Returns the amount taken.
///
/// Refused with 422 `BUSINESS_RULE` when the card no longer exists, is disabled, expired or
/// depleted, or `wanted` is in another currency; the job then fails and nothing is written. An
/// order that already redeemed this card gets back what it took, and nothing more is taken, so a
/// completion that runs again never spends a card twice.
pub fn redeem_gift_card(tx: &mut Tx, store: Uuid, card: Uuid, wanted: Money, order_id: Uuid, now_ms: i64) -> ApiResult<Money> {
    let Some(old) = load(tx, store, card)? else {
        return Err(ApiError::msg(Code::BUSINESS_RULE, "the gift card no longer exists"));
    };
    if let Some(amount) = old.redeemed_by(order_id) {
        return Ok(Money { amount, currency: old.currency() });
    }
    let (new, taken) = old.redeem(wanted, order_id, now_ms)?;
    if new != old {
        write_gift_card(tx, store, Some(&old), &new)?;
    }
    Ok(taken)
}

/// Filters of the gift card list; all empty lists every card from the counter and the index.
#[derive(Debug, Default, Clone)]
pub struct GiftCardFilter {
    /// Any of these statuses (at the time of the request).
    pub statuses: Vec<GiftCardStatus>,
    pub customer_id: Option<Uuid>,
    /// A normalised search: up to four characters are looked for in the last characters; a
    /// whole code (8 or more) finds its card by digest.
    pub search: Option<String>,
}

impl GiftCardFilter {
    fn is_empty(&self) -> bool {
        self.statuses.is_empty() && self.customer_id.is_none() && self.search.is_none()
    }

    fn matches(&self, g: &GiftCard, store: Uuid, now: i64) -> bool {
        (self.statuses.is_empty() || self.statuses.contains(&g.status(now)))
            && self.customer_id.is_none_or(|c| g.customer_id == Some(c))
            && self.search.as_deref().is_none_or(|s| match s.len() {
                0..=4 => g.last_characters.contains(s),
                _ => normalise_code(s).is_some_and(|code| code_hash(store, &code) == g.code_hash),
            })
    }
}

impl Cell {
    /// Issues a card; answers it with its normalised code, which is shown this once.
    pub async fn issue_gift_card(&self, store: Uuid, input: IssueGiftCard) -> ApiResult<(GiftCard, String)> {
        let now = self.clock.now_ms();
        let currency = self.store_settings(store)?.currency;
        // Validated before queueing so a bad body never costs a place in a batch.
        let new = input.validate(currency, now)?;
        let chosen = new.code.is_some();
        for _ in 0..GENERATE_ATTEMPTS {
            let code = new.code.clone().unwrap_or_else(generate_code);
            let card = GiftCard::issue(store, &new, &code, self.clock.new_id(), now);
            let written = self
                .writer
                .write(Some(store), move |tx| {
                    // The store's currency again, under the writer: it may have changed since.
                    let settings: StoreSettings =
                        decode(&tx.get(STORES, Key::store(store).bytes())?.ok_or_else(ApiError::not_found)?)?;
                    if settings.currency != card.currency() {
                        return Err(ApiError::field(
                            "initialValue.currency",
                            format!("must be the store's currency, {}", settings.currency.code()),
                        ));
                    }
                    write_gift_card(tx, store, None, &card)?;
                    Ok(card.clone())
                })
                .await;
            match written {
                Err(e) if e.code == Code::GIFT_CARD_CODE_TAKEN && !chosen => continue,
                other => return other.map(|card| (card, code)),
            }
        }
        Err(ApiError::internal("generated gift card codes kept colliding"))
    }

    pub fn gift_card(&self, store: Uuid, id: Uuid) -> ApiResult<GiftCard> {
        read_gift_card(&self.read()?, store, id)?.ok_or_else(ApiError::not_found)
    }

    /// The card a code names, or None (see [`find_gift_card`]).
    pub fn gift_card_by_code(&self, store: Uuid, code: &str) -> ApiResult<Option<GiftCard>> {
        find_gift_card(&self.read()?, store, code)
    }

    /// Disables a card, or changes its note, expiry or customer.
    pub async fn update_gift_card(&self, store: Uuid, id: Uuid, input: UpdateGiftCard) -> ApiResult<GiftCard> {
        let now = self.clock.now_ms();
        let changes = input.validate(now)?;
        self.writer
            .write(Some(store), move |tx| {
                let old = load(tx, store, id)?.ok_or_else(ApiError::not_found)?;
                let new = old.apply(&changes, now)?;
                if new != old {
                    write_gift_card(tx, store, Some(&old), &new)?;
                }
                Ok(new)
            })
            .await
    }

    /// A page of cards in the requested order, with the total. Without filters the page is read
    /// from the order index and the total from the counter; filters (status depends on the
    /// clock, so it cannot be indexed) walk the index and test each card.
    pub fn list_gift_cards(
        &self,
        store: Uuid,
        filter: &GiftCardFilter,
        paging: &Paging,
        now: i64,
    ) -> ApiResult<(Vec<GiftCard>, u64)> {
        let field = SORT_FIELDS.iter().position(|f| *f == paging.sort_by).unwrap_or(0) as u8;
        let accepts = |g: &GiftCard| filter.matches(g, store, now);
        read::record_page(
            &self.read()?,
            GIFT_CARD_ORDER,
            GIFT_CARDS,
            Key::store(store).u8(field).bytes(),
            paging.desc,
            (paging.offset(), paging.limit as usize),
            &counter_key(store),
            (!filter.is_empty()).then_some(&accepts as &dyn Fn(&GiftCard) -> bool),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::gift_card::NewGiftCard;
    use crate::domain::money::Currency;

    fn usd(amount: i64) -> Money {
        Money { amount, currency: Currency::parse("USD").unwrap() }
    }

    /// A cell in a temp dir holding one card of `balance`, written straight through the writer.
    async fn cell_with_card(balance: i64) -> (tempfile::TempDir, Cell, Uuid, GiftCard) {
        let dir = tempfile::tempdir().unwrap();
        let cell = Cell::open("test", dir.path(), crate::clock::Clock::system()).unwrap();
        let store = cell.clock.new_id();
        let new = NewGiftCard { initial_value: usd(balance), code: None, expiry: None, note: None, customer_id: None };
        let card = GiftCard::issue(store, &new, "GIFT2026ABCD", cell.clock.new_id(), cell.clock.now_ms());
        let written = card.clone();
        cell.writer.write(Some(store), move |tx| write_gift_card(tx, store, None, &written)).await.unwrap();
        (dir, cell, store, card)
    }

    async fn redeem(cell: &Cell, store: Uuid, card: Uuid, wanted: Money, order: Uuid) -> ApiResult<Money> {
        let now = cell.clock.now_ms();
        cell.writer.write(Some(store), move |tx| redeem_gift_card(tx, store, card, wanted, order, now)).await
    }

    #[tokio::test]
    async fn a_redemption_larger_than_the_balance_takes_the_balance_and_depletes_the_card() {
        let (_dir, cell, store, card) = cell_with_card(500).await;
        let order = cell.clock.new_id();
        assert_eq!(redeem(&cell, store, card.id, usd(800), order).await.unwrap(), usd(500));
        let after = cell.gift_card(store, card.id).unwrap();
        assert_eq!((after.balance, after.status(cell.clock.now_ms())), (0, GiftCardStatus::Depleted));
        assert_eq!((after.redemptions.len(), after.redemptions[0].order_id, after.redemptions[0].amount), (1, order, 500));
        // The same order again takes nothing more; another order is refused.
        assert_eq!(redeem(&cell, store, card.id, usd(800), order).await.unwrap(), usd(500));
        let e = redeem(&cell, store, card.id, usd(100), cell.clock.new_id()).await.unwrap_err();
        assert_eq!(e.code, Code::BUSINESS_RULE);
        assert_eq!(cell.gift_card(store, card.id).unwrap().redemptions.len(), 1);
        // The list orders follow the balance.
        let paging = Paging { page: 1, limit: 10, sort_by: "balance", desc: false };
        let (page, total) = cell.list_gift_cards(store, &GiftCardFilter::default(), &paging, cell.clock.now_ms()).unwrap();
        assert_eq!((total, page[0].balance), (1, 0));
        cell.close();
    }

    #[tokio::test]
    async fn a_smaller_redemption_leaves_the_rest_and_is_found_by_code() {
        let (_dir, cell, store, card) = cell_with_card(500).await;
        assert_eq!(redeem(&cell, store, card.id, usd(200), cell.clock.new_id()).await.unwrap(), usd(200));
        let found = cell.gift_card_by_code(store, "gift 2026 abcd").unwrap().unwrap();
        assert_eq!((found.id, found.balance, found.spendable(cell.clock.now_ms())), (card.id, 300, 300));
        assert!(cell.gift_card_by_code(store, "GIFT2026ABCE").unwrap().is_none());
        assert!(cell.gift_card_by_code(cell.clock.new_id(), "GIFT2026ABCD").unwrap().is_none(), "codes belong to one store");
        assert!(cell.gift_card_by_code(store, "not a code!").unwrap().is_none());
        cell.close();
    }

    #[tokio::test]
    async fn a_disabled_card_or_another_currency_is_refused_and_nothing_is_written() {
        let (_dir, cell, store, card) = cell_with_card(500).await;
        let eur = Money { amount: 100, currency: Currency::parse("EUR").unwrap() };
        let e = redeem(&cell, store, card.id, eur, cell.clock.new_id()).await.unwrap_err();
        assert_eq!(e.code, Code::BUSINESS_RULE);
        let off = UpdateGiftCard { disabled: Some(true), ..Default::default() };
        cell.update_gift_card(store, card.id, off).await.unwrap();
        let e = redeem(&cell, store, card.id, usd(100), cell.clock.new_id()).await.unwrap_err();
        assert_eq!((e.code, e.message.contains("disabled")), (Code::BUSINESS_RULE, true));
        let unknown = redeem(&cell, store, cell.clock.new_id(), usd(100), cell.clock.new_id()).await.unwrap_err();
        assert_eq!(unknown.code, Code::BUSINESS_RULE);
        let after = cell.gift_card(store, card.id).unwrap();
        assert_eq!((after.balance, after.redemptions.len()), (500, 0));
        cell.close();
    }
}
