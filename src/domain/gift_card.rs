//! Gift cards: the stored record, request bodies and their validation, the status rules, partial
//! redemption, and the code rules (normalisation, generation, hashing, masking).
//!
//! A card's code is a bearer secret: it is shown once, in the answer that issues the card, and is
//! never stored in clear. The cell keeps `sha256(store id ‖ normalised code)` to find the card and
//! the last four characters to show it masked.

use crate::domain::Enumerated;
use ring::digest::{SHA256, digest};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use time::macros::format_description;
use uuid::Uuid;

use crate::domain::fields::{self, check_text, double_option};
use crate::domain::money::{Currency, Money};
use crate::domain::time::{parse_rfc3339, rfc3339};
use crate::error::{ApiError, ApiResult, Check, Code};

/// Shortest code once normalised.
pub const CODE_MIN: usize = 8;
/// Longest code once normalised.
pub const CODE_MAX: usize = 20;
/// Length of a generated code.
pub const GENERATED_LEN: usize = 16;
/// How many trailing characters of the code a card keeps and shows.
pub const LAST_CHARS: usize = 4;
/// Largest initial value, in minor units.
pub const MAX_INITIAL_VALUE: i64 = 1_000_000_000;
/// Longest note, in characters.
pub const MAX_NOTE_CHARS: usize = 5000;

/// Generated codes use 32 symbols without the look-alikes 0/O and 1/I, so a code read aloud or
/// copied from paper is not mistyped; 16 symbols carry 80 random bits.
const ALPHABET: &[u8; 32] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";

/// The code in its one comparable form: spaces and dashes removed, ASCII upper case. `None` when
/// anything else than letters and digits remains or the length is outside 8..=20.
pub fn normalise_code(raw: &str) -> Option<String> {
    fold(raw).filter(|c| (CODE_MIN..=CODE_MAX).contains(&c.len()))
}

/// A list search in the same form as codes: 1 to 20 letters or digits once spaces and dashes
/// are removed, upper case.
pub fn normalise_search(raw: &str) -> Option<String> {
    fold(raw).filter(|s| (1..=CODE_MAX).contains(&s.len()))
}

/// Spaces and dashes removed, ASCII upper case; `None` when anything but letters and digits is left.
fn fold(raw: &str) -> Option<String> {
    let mut out = String::with_capacity(raw.len());
    for ch in raw.chars() {
        match ch {
            ' ' | '-' => {}
            c if c.is_ascii_alphanumeric() => out.push(c.to_ascii_uppercase()),
            _ => return None,
        }
    }
    Some(out)
}

/// A new random code of [`GENERATED_LEN`] symbols from the unambiguous alphabet.
pub fn generate_code() -> String {
    let bytes = crate::util::random_bytes::<10>();
    let bits = bytes.iter().fold(0u128, |acc, b| (acc << 8) | u128::from(*b));
    (0..GENERATED_LEN).map(|i| ALPHABET[((bits >> i.saturating_mul(5)) & 31) as usize] as char).collect()
}

/// The digest a card is found by: `sha256(store id ‖ normalised code)`. The store id salts it, so
/// equal codes in two stores give unrelated digests.
pub fn code_hash(store: Uuid, normalised: &str) -> [u8; 32] {
    let d = digest(&SHA256, &[store.as_bytes().as_slice(), normalised.as_bytes()].concat());
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// The masked form shown for a card: always four groups, whatever the code's length, so the mask
/// tells nothing about it but its last characters.
pub fn masked_code(last: &str) -> String {
    format!("•••• •••• •••• {last}")
}

/// The status of a card disabled or not, expiring at `expires_at`, holding `balance`, at `now_ms`.
pub fn status_at(disabled: bool, expires_at: Option<i64>, balance: i64, now_ms: i64) -> GiftCardStatus {
    if disabled {
        GiftCardStatus::Disabled
    } else if expires_at.is_some_and(|at| now_ms >= at) {
        GiftCardStatus::Expired
    } else if balance <= 0 {
        GiftCardStatus::Depleted
    } else {
        GiftCardStatus::Active
    }
}

/// What a card can do now, derived from the record and the clock (never stored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum GiftCardStatus {
    /// Enabled, not expired, with a balance: spendable.
    Active,
    /// Disabled by the merchant (for good).
    Disabled,
    /// Past its expiry.
    Expired,
    /// Balance spent.
    Depleted,
}

impl GiftCardStatus {
    /// Parses a wire name in any case.
    pub fn parse(s: &str) -> Option<GiftCardStatus> {
        const ALL: [GiftCardStatus; 4] =
            [GiftCardStatus::Active, GiftCardStatus::Disabled, GiftCardStatus::Expired, GiftCardStatus::Depleted];
        Self::NAMES.iter().position(|n| n.eq_ignore_ascii_case(s)).map(|i| ALL[i])
    }
}

/// When a card expires: as the merchant wrote it, and the first instant it is expired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expiry {
    /// `YYYY-MM-DD`, or an RFC 3339 date-time in UTC.
    pub on: String,
    /// Unix ms: the card is expired from this instant on. A date expires at the end of that day, UTC.
    pub at: i64,
}

/// Parses `expiresOn`: an RFC 3339 date (valid through that day, UTC) or date-time.
pub fn parse_expiry(raw: &str) -> Option<Expiry> {
    let raw = raw.trim();
    if let Ok(date) = time::Date::parse(raw, format_description!("[year]-[month]-[day]")) {
        let end = date.next_day()?.midnight().assume_utc();
        let at = i64::try_from(end.unix_timestamp_nanos() / 1_000_000).ok()?;
        return Some(Expiry { on: raw.to_string(), at });
    }
    let at = parse_rfc3339(raw)?;
    Some(Expiry { on: rfc3339(at), at })
}

/// One spending of a card by an order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Redemption {
    pub order_id: Uuid,
    /// Minor units taken, in the card's currency.
    pub amount: i64,
    /// Unix ms.
    pub at: i64,
}

/// A stored gift card. Amounts are minor units of `initial_value.currency`; times are Unix ms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GiftCard {
    pub id: Uuid,
    /// [`code_hash`] of the code: the key of its `gift_card_codes` row.
    pub code_hash: [u8; 32],
    /// The code's last [`LAST_CHARS`] characters, normalised.
    pub last_characters: String,
    pub initial_value: Money,
    /// What is left; 0..=initial value.
    pub balance: i64,
    pub expiry: Option<Expiry>,
    pub note: Option<String>,
    pub customer_id: Option<Uuid>,
    /// Set once when the card is disabled; a disabled card stays disabled.
    pub disabled_at: Option<i64>,
    /// In time order.
    pub redemptions: Vec<Redemption>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// `POST S/gift-cards`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IssueGiftCard {
    /// In the store's currency; 1 to 1,000,000,000 minor units.
    pub initial_value: Money,
    /// 8 to 20 letters or digits, any case; spaces and dashes are ignored. Generated (16 symbols)
    /// when absent. Shown once, in the answer to this request.
    pub code: Option<String>,
    /// RFC 3339 date (the card is valid through that day, UTC) or date-time, in the future.
    pub expires_on: Option<String>,
    #[schemars(length(max = MAX_NOTE_CHARS), pattern(fields::TEXT_OR_EMPTY))]
    pub note: Option<String>,
    pub customer_id: Option<Uuid>,
}

/// `PATCH S/gift-cards/{giftCardId}`: every field optional; `null` clears `note`, `expiresOn` and
/// `customerId`. The balance is not editable.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateGiftCard {
    /// `true` disables the card for good; `false` on a disabled card is refused (422).
    pub disabled: Option<bool>,
    #[serde(default, deserialize_with = "double_option")]
    #[schemars(with = "Option<String>", length(max = MAX_NOTE_CHARS), pattern(fields::TEXT_OR_EMPTY))]
    pub note: Option<Option<String>>,
    #[serde(default, deserialize_with = "double_option")]
    #[schemars(with = "Option<String>")]
    pub expires_on: Option<Option<String>>,
    #[serde(default, deserialize_with = "double_option")]
    #[schemars(with = "Option<Uuid>")]
    pub customer_id: Option<Option<Uuid>>,
}

/// A validated issue request: what the record is built from.
#[derive(Debug, Clone)]
pub struct NewGiftCard {
    pub initial_value: Money,
    /// The normalised code the merchant chose; `None`: generate one.
    pub code: Option<String>,
    pub expiry: Option<Expiry>,
    pub note: Option<String>,
    pub customer_id: Option<Uuid>,
}

/// A validated update; `None` fields are left as they are.
#[derive(Debug, Clone, Default)]
pub struct GiftCardChanges {
    pub disabled: Option<bool>,
    pub note: Option<Option<String>>,
    pub expiry: Option<Option<Expiry>>,
    pub customer_id: Option<Option<Uuid>>,
}

fn check_note(c: &mut Check, note: &str) -> Option<String> {
    check_text(c, "note", note, MAX_NOTE_CHARS, false);
    Some(note.trim().to_string()).filter(|n| !n.is_empty())
}

fn check_expiry(c: &mut Check, raw: &str, now: i64) -> Option<Expiry> {
    match parse_expiry(raw) {
        Some(e) if e.at > now => Some(e),
        Some(_) => {
            c.fail("expiresOn", "must be in the future");
            None
        }
        None => {
            c.fail("expiresOn", "must be an RFC 3339 date (YYYY-MM-DD) or date-time");
            None
        }
    }
}

impl IssueGiftCard {
    /// Validates the body against the store's currency, reporting every invalid field at once.
    pub fn validate(&self, store_currency: Currency, now: i64) -> ApiResult<NewGiftCard> {
        let mut c = Check::new();
        c.ensure(
            (1..=MAX_INITIAL_VALUE).contains(&self.initial_value.amount),
            "initialValue.amount",
            format!("must be 1 to {MAX_INITIAL_VALUE} minor units"),
        );
        c.ensure(
            self.initial_value.currency == store_currency,
            "initialValue.currency",
            format!("must be the store's currency, {}", store_currency.code()),
        );
        let code = self.code.as_deref().and_then(|raw| {
            let n = normalise_code(raw);
            c.ensure(
                n.is_some(),
                "code",
                format!("must be {CODE_MIN} to {CODE_MAX} letters or digits (spaces and dashes are ignored)"),
            );
            n
        });
        let expiry = self.expires_on.as_deref().and_then(|raw| check_expiry(&mut c, raw, now));
        let note = self.note.as_deref().and_then(|n| check_note(&mut c, n));
        c.finish()?;
        Ok(NewGiftCard { initial_value: self.initial_value, code, expiry, note, customer_id: self.customer_id })
    }
}

impl UpdateGiftCard {
    /// Validates the fields (400 naming each bad one); whether the change is allowed on the card
    /// is [`GiftCard::apply`]'s business.
    pub fn validate(&self, now: i64) -> ApiResult<GiftCardChanges> {
        let mut c = Check::new();
        let note = self.note.as_ref().map(|n| n.as_deref().and_then(|n| check_note(&mut c, n)));
        let expiry = self.expires_on.as_ref().map(|e| e.as_deref().and_then(|raw| check_expiry(&mut c, raw, now)));
        c.finish()?;
        Ok(GiftCardChanges { disabled: self.disabled, note, expiry, customer_id: self.customer_id })
    }
}

impl GiftCard {
    /// Builds a new card with its full balance from a validated request and the normalised `code`.
    pub fn issue(store: Uuid, input: &NewGiftCard, code: &str, id: Uuid, now: i64) -> GiftCard {
        let last: String = code.chars().skip(code.chars().count().saturating_sub(LAST_CHARS)).collect();
        GiftCard {
            id,
            code_hash: code_hash(store, code),
            last_characters: last,
            initial_value: input.initial_value,
            balance: input.initial_value.amount,
            expiry: input.expiry.clone(),
            note: input.note.clone(),
            customer_id: input.customer_id,
            disabled_at: None,
            redemptions: Vec::new(),
            created_at: now,
            updated_at: now,
        }
    }

    /// The card after `changes`. Re-enabling a disabled card is refused (422 `BUSINESS_RULE`):
    /// disabling is how a merchant voids a card whose code leaked.
    pub fn apply(&self, changes: &GiftCardChanges, now: i64) -> ApiResult<GiftCard> {
        let mut next = self.clone();
        match (changes.disabled, self.disabled_at) {
            (Some(false), Some(_)) => {
                return Err(ApiError::msg(Code::BUSINESS_RULE, "a disabled gift card cannot be enabled again"));
            }
            (Some(true), None) => next.disabled_at = Some(now),
            _ => {}
        }
        if let Some(n) = &changes.note {
            next.note = n.clone();
        }
        if let Some(e) = &changes.expiry {
            next.expiry = e.clone();
        }
        if let Some(c) = changes.customer_id {
            next.customer_id = c;
        }
        if next != *self {
            next.updated_at = now;
        }
        Ok(next)
    }

    /// The status at `now_ms`: disabled first, then expired, then depleted.
    pub fn status(&self, now_ms: i64) -> GiftCardStatus {
        status_at(self.disabled_at.is_some(), self.expiry.as_ref().map(|e| e.at), self.balance, now_ms)
    }

    /// What can be spent now: the balance when ACTIVE, else 0.
    pub fn spendable(&self, now_ms: i64) -> i64 {
        if self.status(now_ms) == GiftCardStatus::Active { self.balance } else { 0 }
    }

    pub fn currency(&self) -> Currency {
        self.initial_value.currency
    }

    pub fn last_characters(&self) -> &str {
        &self.last_characters
    }

    /// What an order already took from this card, if it redeemed it.
    pub fn redeemed_by(&self, order_id: Uuid) -> Option<i64> {
        self.redemptions.iter().filter(|r| r.order_id == order_id).map(|r| r.amount).reduce(i64::saturating_add)
    }

    /// Takes up to `wanted` for `order_id` (partial redemption: the balance when it is less) and
    /// answers the card after it with the amount taken. Refused (422 `BUSINESS_RULE`) when the
    /// card is not ACTIVE or `wanted` is in another currency or negative. Wanting 0 takes nothing
    /// and records nothing.
    pub fn redeem(&self, wanted: Money, order_id: Uuid, now: i64) -> ApiResult<(GiftCard, Money)> {
        let refuse = |why: String| Err(ApiError::msg(Code::BUSINESS_RULE, why));
        let card = format!("the gift card ending in {}", self.last_characters);
        if wanted.currency != self.currency() {
            return refuse(format!("{card} is in {}, not {}", self.currency().code(), wanted.currency.code()));
        }
        if wanted.amount < 0 {
            return refuse("a gift card redemption cannot be negative".to_string());
        }
        match self.status(now) {
            GiftCardStatus::Active => {}
            GiftCardStatus::Disabled => return refuse(format!("{card} is disabled")),
            GiftCardStatus::Expired => return refuse(format!("{card} has expired")),
            GiftCardStatus::Depleted => return refuse(format!("{card} has no balance left")),
        }
        let taken = wanted.amount.min(self.balance);
        let mut next = self.clone();
        if taken > 0 {
            // 0 < taken <= balance: what is left is never negative.
            next.balance = self.balance.saturating_sub(taken);
            next.redemptions.push(Redemption { order_id, amount: taken, at: now });
            next.updated_at = now;
        }
        Ok((next, Money { amount: taken, currency: wanted.currency }))
    }

    /// The card as the API shows it. `code` is given only in the answer that issues it;
    /// `redemptions` only on single-card reads.
    pub fn view(&self, now: i64, code: Option<&str>, with_redemptions: bool) -> GiftCardView {
        let money = |amount| MoneyView::new(amount, self.currency());
        GiftCardView {
            id: self.id,
            code: code.map(str::to_string),
            last_characters: self.last_characters.clone(),
            masked_code: masked_code(&self.last_characters),
            initial_value: money(self.initial_value.amount),
            balance: money(self.balance),
            status: self.status(now),
            expires_on: self.expiry.as_ref().map(|e| e.on.clone()),
            expires_at: self.expiry.as_ref().map(|e| rfc3339(e.at)),
            note: self.note.clone(),
            customer_id: self.customer_id,
            disabled_at: self.disabled_at.map(rfc3339),
            created_at: rfc3339(self.created_at),
            updated_at: rfc3339(self.updated_at),
            redemptions: with_redemptions.then(|| {
                self.redemptions
                    .iter()
                    .map(|r| RedemptionView { order_id: r.order_id, amount: money(r.amount), at: rfc3339(r.at) })
                    .collect()
            }),
        }
    }
}

/// Money with its display string.
#[derive(Debug, Serialize, JsonSchema)]
pub struct MoneyView {
    pub amount: i64,
    pub currency: Currency,
    /// Display only, e.g. `25.00 USD`.
    pub formatted: String,
}

impl MoneyView {
    fn new(amount: i64, currency: Currency) -> MoneyView {
        MoneyView { amount, currency, formatted: currency.format(amount) }
    }
}

/// A redemption as the API shows it.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RedemptionView {
    pub order_id: Uuid,
    pub amount: MoneyView,
    pub at: String,
}

/// A gift card as the API shows it: the record with its masked code and derived status.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GiftCardView {
    pub id: Uuid,
    /// The full code: only in the answer that issues the card.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    pub last_characters: String,
    pub masked_code: String,
    pub initial_value: MoneyView,
    pub balance: MoneyView,
    pub status: GiftCardStatus,
    /// As given: a date, or an RFC 3339 date-time.
    pub expires_on: Option<String>,
    /// The first instant the card is expired.
    pub expires_at: Option<String>,
    pub note: Option<String>,
    pub customer_id: Option<Uuid>,
    pub disabled_at: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redemptions: Option<Vec<RedemptionView>>,
}

impl Enumerated for GiftCardStatus {
    const NAMES: &'static [&'static str] = &["ACTIVE", "DISABLED", "EXPIRED", "DEPLETED"];
    fn name(self) -> &'static str {
        match self {
            GiftCardStatus::Active => "ACTIVE",
            GiftCardStatus::Disabled => "DISABLED",
            GiftCardStatus::Expired => "EXPIRED",
            GiftCardStatus::Depleted => "DEPLETED",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usd() -> Currency {
        Currency::parse("USD").unwrap()
    }

    fn card(balance: i64) -> GiftCard {
        let input = NewGiftCard {
            initial_value: Money { amount: 500, currency: usd() },
            code: None,
            expiry: None,
            note: None,
            customer_id: None,
        };
        let mut c = GiftCard::issue(Uuid::nil(), &input, "ABCD2345EFGH6789", Uuid::from_u128(1), 1_000);
        c.balance = balance;
        c
    }

    #[test]
    fn codes_are_normalised_ignoring_case_spaces_and_dashes() {
        assert_eq!(normalise_code("abcd-efgh ijkl 2345").as_deref(), Some("ABCDEFGHIJKL2345"));
        assert_eq!(normalise_code(" Gift2026 ").as_deref(), Some("GIFT2026"));
        assert_eq!(normalise_code("abc-defg").as_deref(), None, "7 characters once normalised");
        assert_eq!(normalise_code(&"A".repeat(21)), None);
        assert_eq!(normalise_code(&"a".repeat(20)).as_deref(), Some("A".repeat(20).as_str()));
        for bad in ["ABCD_EFGH", "ABCD.EFGH", "ÄBCDEFGHI", "ABCD\tEFGH", ""] {
            assert_eq!(normalise_code(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn generated_codes_are_valid_unambiguous_and_distinct() {
        let a = generate_code();
        assert_eq!(a.len(), GENERATED_LEN);
        assert_eq!(normalise_code(&a).as_deref(), Some(a.as_str()));
        assert!(!a.contains(['0', 'O', '1', 'I']), "{a}");
        assert_ne!(a, generate_code());
    }

    #[test]
    fn hashes_depend_on_store_and_normalised_code() {
        let (s1, s2) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let code = normalise_code("abcd efgh").unwrap();
        assert_eq!(code_hash(s1, &code), code_hash(s1, &normalise_code("ABCD-EFGH").unwrap()));
        assert_ne!(code_hash(s1, &code), code_hash(s2, &code));
    }

    #[test]
    fn masking_shows_only_the_last_characters() {
        let c = card(500);
        assert_eq!(c.last_characters(), "6789");
        assert_eq!(masked_code(c.last_characters()), "•••• •••• •••• 6789");
        let v = serde_json::to_value(c.view(2_000, None, false)).unwrap();
        assert_eq!(v["maskedCode"], "•••• •••• •••• 6789");
        assert!(v.get("code").is_none() && v.get("redemptions").is_none());
        assert!(!v.to_string().contains("ABCD2345"));
        assert_eq!(v["balance"], serde_json::json!({"amount": 500, "currency": "USD", "formatted": "5.00 USD"}));
    }

    #[test]
    fn status_is_derived_from_the_record_and_the_clock() {
        let mut c = card(500);
        assert_eq!((c.status(2_000), c.spendable(2_000)), (GiftCardStatus::Active, 500));
        c.expiry = parse_expiry("1970-01-01");
        assert_eq!(c.expiry.as_ref().map(|e| e.at), Some(86_400_000), "a date lasts through its day");
        assert_eq!(c.status(86_399_999), GiftCardStatus::Active);
        assert_eq!((c.status(86_400_000), c.spendable(86_400_000)), (GiftCardStatus::Expired, 0));
        c.balance = 0;
        assert_eq!(c.status(2_000), GiftCardStatus::Depleted);
        c.disabled_at = Some(1_500);
        assert_eq!((c.status(2_000), c.spendable(2_000)), (GiftCardStatus::Disabled, 0));
        assert_eq!(GiftCardStatus::parse("depleted"), Some(GiftCardStatus::Depleted));
    }

    #[test]
    fn expiry_accepts_dates_and_date_times_only() {
        let e = parse_expiry("2030-06-01T12:00:00+02:00").unwrap();
        assert_eq!(e.on, "2030-06-01T10:00:00.000Z");
        assert_eq!(parse_expiry("2030-06-01").unwrap().on, "2030-06-01");
        for bad in ["2030-13-01", "tomorrow", "2030-06-01T12:00:00", ""] {
            assert!(parse_expiry(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn partial_redemption_takes_at_most_the_balance() {
        let order = Uuid::from_u128(7);
        let (after, taken) = card(500).redeem(Money { amount: 800, currency: usd() }, order, 3_000).unwrap();
        assert_eq!((taken.amount, after.balance, after.status(3_000)), (500, 0, GiftCardStatus::Depleted));
        assert_eq!(after.redemptions, vec![Redemption { order_id: order, amount: 500, at: 3_000 }]);
        assert_eq!(after.redeemed_by(order), Some(500));
        let (after, taken) = card(500).redeem(Money { amount: 200, currency: usd() }, order, 3_000).unwrap();
        assert_eq!((taken.amount, after.balance, after.status(3_000)), (200, 300, GiftCardStatus::Active));
    }

    #[test]
    fn redemption_is_refused_unless_active_and_in_the_card_currency() {
        let usd200 = Money { amount: 200, currency: usd() };
        let mut disabled = card(500);
        disabled.disabled_at = Some(1);
        let e = disabled.redeem(usd200, Uuid::from_u128(7), 3_000).unwrap_err();
        assert_eq!((e.code, e.message.contains("disabled")), (Code::BUSINESS_RULE, true));
        assert!(card(0).redeem(usd200, Uuid::from_u128(7), 3_000).unwrap_err().message.contains("no balance"));
        let eur = Money { amount: 200, currency: Currency::parse("EUR").unwrap() };
        assert!(card(500).redeem(eur, Uuid::from_u128(7), 3_000).unwrap_err().message.contains("USD"));
        let negative = Money { amount: -1, currency: usd() };
        assert_eq!(card(500).redeem(negative, Uuid::from_u128(7), 3_000).unwrap_err().code, Code::BUSINESS_RULE);
    }

    #[test]
    fn validation_names_every_bad_field() {
        let body = |v: serde_json::Value| serde_json::from_value::<IssueGiftCard>(v).unwrap();
        let e = body(serde_json::json!({"initialValue": {"amount": 0, "currency": "EUR"}, "code": "bad_code!",
                                        "expiresOn": "2000-01-01", "note": "x\u{1}"}))
        .validate(usd(), 1_795_000_000_000)
        .unwrap_err();
        let fields: Vec<_> = e.fields.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["initialValue.amount", "initialValue.currency", "code", "expiresOn", "note"]);
        let ok = body(serde_json::json!({"initialValue": {"amount": 2500, "currency": "usd"}, "code": "ab12 cd34-ef56",
                                         "note": "  "}))
        .validate(usd(), 1_795_000_000_000)
        .unwrap();
        assert_eq!((ok.code.as_deref(), ok.note), (Some("AB12CD34EF56"), None));
    }

    #[test]
    fn disabling_is_for_good() {
        let c = card(500);
        let off = c.apply(&GiftCardChanges { disabled: Some(true), ..Default::default() }, 5_000).unwrap();
        assert_eq!((off.disabled_at, off.updated_at), (Some(5_000), 5_000));
        let again = off.apply(&GiftCardChanges { disabled: Some(true), ..Default::default() }, 6_000).unwrap();
        assert_eq!(again, off, "disabling twice changes nothing");
        let e = off.apply(&GiftCardChanges { disabled: Some(false), ..Default::default() }, 6_000).unwrap_err();
        assert_eq!(e.code, Code::BUSINESS_RULE);
        let noted = off.apply(&GiftCardChanges { note: Some(Some("lost".into())), ..Default::default() }, 7_000).unwrap();
        assert_eq!((noted.note.as_deref(), noted.disabled_at), (Some("lost"), Some(5_000)));
    }
}
