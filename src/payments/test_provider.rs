//! The built-in offline test provider: the default, needs no network and no account anywhere.
//!
//! It keeps no state of its own: an intent's state is the stored row, and a confirmation is a pure
//! function of that state and the token. The tokens follow Stripe's test tokens:
//!
//! | token | outcome |
//! |---|---|
//! | `pm_card_visa`, `tok_visa`, `pm_card_mastercard`, `tok_mastercard`, `pm_card_amex`, `tok_amex` | `succeeded` |
//! | `pm_card_capture` | `requires_capture` (authorized, awaiting capture) |
//! | `pm_card_chargeDeclined`, `tok_chargeDeclined` | declined: `requires_payment_method`, `lastError` `card_declined` |
//! | `pm_card_chargeDeclinedInsufficientFunds`, `tok_chargeDeclinedInsufficientFunds` | declined, `insufficient_funds` |
//! | `pm_card_chargeDeclinedExpiredCard`, `tok_chargeDeclinedExpiredCard` | declined, `expired_card` |
//! | `pm_card_authenticationRequired`, `pm_card_threeDSecureRequired`, `tok_threeDSecureRequired` | `requires_action` (3-D Secure); confirming again with such a token completes it: `succeeded` |
//! | `pm_promptpay` / `pm_bank_transfer` (or no token) on a PromptPay / bank transfer intent | the payer paid: `succeeded` |
//!
//! PromptPay and bank transfer intents are created waiting for the payer (`requires_action`) with
//! a QR payload or a transfer reference as their next action.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::{
    CreateIntent, Created, IntentRef, IntentStatus, NextAction, PaymentMethodKind, PaymentProvider, ProviderFuture, ProviderState,
};
use crate::domain::money::Money;
use crate::error::{ApiError, ApiResult};
use crate::util::random_bytes;

/// The PromptPay id the test QR codes pay to: a reserved-looking Thai mobile number.
const TEST_PROMPTPAY_ID: &str = "0066000000000";

/// The offline provider (see the module documentation for its tokens).
pub struct TestProvider;

/// What a card token does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Card {
    Succeeds,
    Authorizes,
    Declines(&'static str),
    NeedsAuthentication,
}

fn card(token: &str) -> Option<Card> {
    Some(match token {
        "pm_card_visa" | "tok_visa" | "pm_card_mastercard" | "tok_mastercard" | "pm_card_amex" | "tok_amex" => Card::Succeeds,
        "pm_card_capture" => Card::Authorizes,
        "pm_card_chargeDeclined" | "tok_chargeDeclined" => Card::Declines("card_declined"),
        "pm_card_chargeDeclinedInsufficientFunds" | "tok_chargeDeclinedInsufficientFunds" => Card::Declines("insufficient_funds"),
        "pm_card_chargeDeclinedExpiredCard" | "tok_chargeDeclinedExpiredCard" => Card::Declines("expired_card"),
        "pm_card_authenticationRequired" | "pm_card_threeDSecureRequired" | "tok_threeDSecureRequired" => {
            Card::NeedsAuthentication
        }
        _ => return None,
    })
}

fn state(status: IntentStatus, last_error: Option<&str>, next_action: Option<NextAction>) -> ProviderState {
    ProviderState { status, last_error: last_error.map(str::to_string), next_action }
}

/// The state of a new intent: cards wait for a payment method; PromptPay and bank transfers wait
/// for the payer, who is shown what to pay.
fn initial(req: &CreateIntent, provider_ref: &str) -> ProviderState {
    match req.method {
        PaymentMethodKind::CreditCard => state(IntentStatus::RequiresPaymentMethod, None, None),
        PaymentMethodKind::Promptpay => state(
            IntentStatus::RequiresAction,
            None,
            Some(NextAction::PromptpayQr { payload: promptpay_payload(TEST_PROMPTPAY_ID, req.amount) }),
        ),
        PaymentMethodKind::BankTransfer => {
            // The reference is ASCII: the tail of the provider reference (random hex).
            let tail = &provider_ref[provider_ref.len().saturating_sub(10)..];
            state(
                IntentStatus::RequiresAction,
                None,
                Some(NextAction::BankTransfer { reference: format!("SC{}", tail.to_ascii_uppercase()) }),
            )
        }
    }
}

/// A confirmation's outcome, from the stored state and the token.
fn confirm(intent: &IntentRef, token: &str) -> ApiResult<ProviderState> {
    let unknown = |hint: &str| ApiError::field("paymentMethod", format!("unknown test payment method; use {hint}"));
    match intent.method {
        PaymentMethodKind::CreditCard => {
            let outcome =
                card(token).ok_or_else(|| unknown("pm_card_visa, pm_card_chargeDeclined or pm_card_authenticationRequired"))?;
            let authenticated = intent.current.status == IntentStatus::RequiresAction;
            Ok(match outcome {
                Card::Succeeds => state(IntentStatus::Succeeded, None, None),
                Card::Authorizes => state(IntentStatus::RequiresCapture, None, None),
                Card::Declines(code) => state(IntentStatus::RequiresPaymentMethod, Some(code), None),
                // The second confirmation stands for the shopper having passed the challenge.
                Card::NeedsAuthentication if authenticated => state(IntentStatus::Succeeded, None, None),
                Card::NeedsAuthentication => {
                    state(IntentStatus::RequiresAction, None, Some(NextAction::Authenticate { url: None }))
                }
            })
        }
        PaymentMethodKind::Promptpay => match token {
            "" | "pm_promptpay" | "promptpay" => Ok(state(IntentStatus::Succeeded, None, None)),
            _ => Err(unknown("pm_promptpay (or no paymentMethod) for a PromptPay intent")),
        },
        PaymentMethodKind::BankTransfer => match token {
            "" | "pm_bank_transfer" | "bank_transfer" => Ok(state(IntentStatus::Succeeded, None, None)),
            _ => Err(unknown("pm_bank_transfer (or no paymentMethod) for a bank transfer intent")),
        },
    }
}

impl PaymentProvider for TestProvider {
    fn name(&self) -> &'static str {
        "test"
    }

    fn create<'a>(&'a self, req: &'a CreateIntent) -> ProviderFuture<'a, Created> {
        Box::pin(async move {
            let provider_ref = format!("pi_test_{}", req.id.simple());
            let client_secret = format!("{provider_ref}_secret_{}", URL_SAFE_NO_PAD.encode(random_bytes::<24>()));
            let state = initial(req, &provider_ref);
            Ok(Created { provider_ref, client_secret, state })
        })
    }

    fn retrieve<'a>(&'a self, intent: &'a IntentRef) -> ProviderFuture<'a, ProviderState> {
        Box::pin(async move { Ok(intent.current.clone()) })
    }

    fn confirm<'a>(&'a self, intent: &'a IntentRef, payment_method: &'a str) -> ProviderFuture<'a, ProviderState> {
        Box::pin(async move { confirm(intent, payment_method) })
    }
}

/// An EMVCo merchant-presented QR payload for PromptPay: dynamic (one payment), THB, the amount
/// in baht, CRC-16/CCITT-FALSE over the whole payload.
pub fn promptpay_payload(promptpay_id: &str, amount: Money) -> String {
    fn tlv(tag: &str, value: &str) -> String {
        format!("{tag}{:02}{value}", value.len())
    }
    let merchant = tlv("00", "A000000677010111") + &tlv("01", promptpay_id);
    let exp = u32::from(amount.currency.exponent());
    let unit = 10i64.pow(exp);
    let major = if exp == 0 {
        amount.amount.to_string()
    } else {
        format!("{}.{:0w$}", amount.amount / unit, amount.amount % unit, w = exp as usize)
    };
    let mut payload =
        [tlv("00", "01"), tlv("01", "12"), tlv("29", &merchant), tlv("53", "764"), tlv("54", &major), tlv("58", "TH")].concat();
    payload.push_str("6304");
    let crc = crc16_ccitt(payload.as_bytes());
    payload.push_str(&format!("{crc:04X}"));
    payload
}

/// CRC-16/CCITT-FALSE (polynomial 0x1021, initial 0xFFFF), as EMVCo QR codes use.
fn crc16_ccitt(data: &[u8]) -> u16 {
    let mut crc: u16 = 0xFFFF;
    for &b in data {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;
    use crate::domain::money::Currency;

    fn thb(amount: i64) -> Money {
        Money { amount, currency: Currency::parse("THB").unwrap() }
    }

    fn intent(method: PaymentMethodKind, status: IntentStatus) -> IntentRef {
        IntentRef {
            id: Uuid::now_v7(),
            provider_ref: "pi_test_x".into(),
            method,
            amount: thb(10000),
            version: 1,
            current: state(status, None, None),
        }
    }

    #[test]
    fn crc_matches_the_reference_check_value() {
        // The standard check value of CRC-16/CCITT-FALSE over "123456789".
        assert_eq!(crc16_ccitt(b"123456789"), 0x29B1);
    }

    #[test]
    fn promptpay_payload_is_well_formed() {
        let p = promptpay_payload(TEST_PROMPTPAY_ID, thb(12345));
        assert!(p.starts_with("000201010212"));
        assert!(p.contains("29370016A00000067701011101130066000000000"));
        assert!(p.contains("5303764") && p.contains("5406123.45") && p.contains("5802TH"));
        let (body, crc) = p.split_at(p.len() - 4);
        assert!(body.ends_with("6304"));
        assert_eq!(crc, format!("{:04X}", crc16_ccitt(body.as_bytes())));
    }

    #[test]
    fn card_tokens_succeed_decline_or_ask_for_authentication() {
        let fresh = intent(PaymentMethodKind::CreditCard, IntentStatus::RequiresPaymentMethod);
        assert_eq!(confirm(&fresh, "pm_card_visa").unwrap().status, IntentStatus::Succeeded);
        assert_eq!(confirm(&fresh, "pm_card_capture").unwrap().status, IntentStatus::RequiresCapture);
        let declined = confirm(&fresh, "tok_chargeDeclined").unwrap();
        assert_eq!(
            (declined.status, declined.last_error.as_deref()),
            (IntentStatus::RequiresPaymentMethod, Some("card_declined"))
        );
        let challenged = confirm(&fresh, "pm_card_authenticationRequired").unwrap();
        assert_eq!(challenged.status, IntentStatus::RequiresAction);
        assert_eq!(challenged.next_action, Some(NextAction::Authenticate { url: None }));
        let waiting = intent(PaymentMethodKind::CreditCard, IntentStatus::RequiresAction);
        assert_eq!(confirm(&waiting, "pm_card_authenticationRequired").unwrap().status, IntentStatus::Succeeded);
        let e = confirm(&fresh, "pm_card_unknown").unwrap_err();
        assert_eq!(e.fields[0].field, "paymentMethod");
        assert!(confirm(&fresh, "").is_err());
    }

    #[test]
    fn promptpay_and_transfers_succeed_only_with_their_own_tokens() {
        let pp = intent(PaymentMethodKind::Promptpay, IntentStatus::RequiresAction);
        assert_eq!(confirm(&pp, "").unwrap().status, IntentStatus::Succeeded);
        assert_eq!(confirm(&pp, "pm_promptpay").unwrap().status, IntentStatus::Succeeded);
        assert!(confirm(&pp, "pm_card_visa").is_err());
        let bt = intent(PaymentMethodKind::BankTransfer, IntentStatus::RequiresAction);
        assert_eq!(confirm(&bt, "pm_bank_transfer").unwrap().status, IntentStatus::Succeeded);
        assert!(confirm(&bt, "pm_promptpay").is_err());
    }
}
