//! The route table as a contract: every row documents its success answer, and the table's
//! method, path, access level, status and response type are held in a checked-in snapshot, so a
//! permission or contract change shows in the diff of `tests/snapshots/routes.txt`. Answers that
//! used to be assembled as JSON values keep their bytes (their keys in sorted order).
//!
//! `UPDATE_SNAPSHOTS=1 cargo test --lib api::contract` rewrites the snapshot.

use crate::http::openapi::operation_id;
use crate::http::route::Access;
use crate::node::context::Route;

const SNAPSHOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/snapshots/routes.txt");

fn access(a: Access) -> &'static str {
    match a {
        Access::Public => "public",
        Access::Member => "member",
        Access::Admin => "admin",
        Access::Storefront => "storefront",
        Access::Internal => "internal",
        Access::Operator => "operator",
    }
}

/// One line per route: method, path, access level, operation id, success status, response type
/// (and its content type when the body is not JSON), then the error statuses it documents. A row
/// without a documented answer shows `- -`.
fn lines(routes: &[Route]) -> Vec<String> {
    let mut g = crate::http::openapi::generator();
    routes
        .iter()
        .map(|r| {
            let head = format!("{} {} {} {}", r.method, r.path, access(r.access), operation_id(r));
            let answers: Vec<String> = r
                .reply_docs(&mut g)
                .into_iter()
                .map(|d| match d.content_type {
                    Some(ct) if ct != "application/json" => format!("{} {} {ct}", d.status, d.type_name),
                    _ => format!("{} {}", d.status, d.type_name),
                })
                .collect();
            let answer = if answers.is_empty() { "- -".to_string() } else { answers.join(" | ") };
            let errors: Vec<String> = r.error_statuses().iter().map(u16::to_string).collect();
            format!("{head} {answer} [{}]", errors.join(" "))
        })
        .collect()
}

/// A line diff of `old` to `new` (longest common subsequence): `-` lines only in `old`, `+`
/// lines only in `new`.
fn diff(old: &[&str], new: &[&str]) -> String {
    let (n, m) = (old.len(), new.len());
    // common[i][j]: the longest common subsequence of old[i..] and new[j..].
    let mut common = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            common[i][j] = if old[i] == new[j] { common[i + 1][j + 1] + 1 } else { common[i + 1][j].max(common[i][j + 1]) };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < n || j < m {
        if i < n && j < m && old[i] == new[j] {
            (i, j) = (i + 1, j + 1);
        } else if j < m && (i == n || common[i][j + 1] >= common[i + 1][j]) {
            out.push_str(&format!("+ {}\n", new[j]));
            j += 1;
        } else {
            out.push_str(&format!("- {}\n", old[i]));
            i += 1;
        }
    }
    out
}

#[test]
fn every_route_documents_its_success_answer() {
    let routes = super::routes();
    let untyped: Vec<(String, String)> = {
        let mut g = crate::http::openapi::generator();
        routes.iter().filter(|r| r.reply_doc(&mut g).is_none()).map(|r| (r.method.to_string(), r.path.clone())).collect()
    };
    let missing: Vec<String> = untyped.iter().map(|(m, p)| format!("{m} {p}")).collect();
    assert!(
        missing.is_empty(),
        "these routes document no success answer: give their handlers a typed reply (http::reply), or declare \
         it with Route::answers when the handler builds its own response:\n{}",
        missing.join("\n")
    );
}

#[test]
fn operation_ids_are_unique() {
    let mut seen = std::collections::HashMap::new();
    for r in super::routes() {
        if let Some(other) = seen.insert(operation_id(&r), format!("{} {}", r.method, r.path)) {
            panic!("{} {} and {other} share the operation id {}", r.method, r.path, operation_id(&r));
        }
    }
}

#[test]
fn routes_match_the_snapshot() {
    let mut actual = lines(&super::routes()).join("\n");
    actual.push('\n');
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(SNAPSHOT, &actual).expect("the snapshot is writable");
        return;
    }
    let expected = std::fs::read_to_string(SNAPSHOT).unwrap_or_default();
    if expected != actual {
        let old: Vec<&str> = expected.lines().collect();
        let new: Vec<&str> = actual.lines().collect();
        panic!(
            "the route table differs from {SNAPSHOT} (- snapshot, + now); if the change is meant, run \
             UPDATE_SNAPSHOTS=1 cargo test --lib api::contract and commit the file:\n{}",
            diff(&old, &new)
        );
    }
}

#[test]
fn the_diff_shows_removed_and_added_lines() {
    assert_eq!(diff(&["a", "b", "c"], &["a", "x", "c", "d"]), "+ x\n- b\n+ d\n");
    assert_eq!(diff(&[], &[]), "");
}

/// `value` serializes exactly as it did when it was built as a `serde_json::Value`, whose
/// objects list their keys in sorted order.
fn assert_key_order<T: serde::Serialize>(value: &T) {
    let direct = serde_json::to_string(value).unwrap();
    let sorted = serde_json::to_string(&serde_json::to_value(value).unwrap()).unwrap();
    assert_eq!(direct, sorted, "the fields are not in key order");
}

#[test]
fn answers_once_built_as_json_values_keep_their_bytes() {
    use crate::account::plans::{Catalogue, SubscriptionView, plan_view};
    use crate::cells::payments::{IntentStatus, PaymentIntentView, PaymentMethodKind};
    use crate::domain::gift_card::GiftCardStatus;
    use crate::domain::money::{Currency, Money};
    use uuid::Uuid;

    let id = Uuid::now_v7();
    let usd = Money { amount: 500, currency: Currency::parse("USD").unwrap() };
    let time = || "2026-01-02T03:04:05Z".to_string();
    let cell = crate::node::readiness::Dependency {
        kind: "cell",
        name: "c1".into(),
        state: "unreachable",
        url: Some("http://10.0.0.5:8082".into()),
    };
    assert_key_order(&super::system::Readiness { dependencies: vec![cell], mode: "router".into(), status: "ready" });
    assert_key_order(&super::stores::MyStore { created_at: time(), id, name: "Shop".into(), role: "owner" });
    assert_key_order(&super::auth::LoginAnswer::Mfa(super::auth::MfaRequired { mfa_token: "t".into(), requires_mfa: true }));
    assert_key_order(&super::auth::MfaSecret { otpauth_url: "otpauth://totp/x".into(), secret: "ABC".into() });
    assert_key_order(&super::auth::MfaEnabled { enabled: true, recovery_codes: vec!["a".into()] });
    assert_key_order(&super::auth::TokenPair { access_token: "a".into(), expires_in: 900, refresh_token: "r".into() });
    for kind in [Some("PUBLISHABLE"), None] {
        let valid = kind.is_some();
        let environment = kind.map(|_| "LIVE");
        let store_id = kind.map(|_| id);
        assert_key_order(&super::publishable_keys::KeyCheck { environment, store_id, kind, valid });
    }
    let plan = plan_view(&Catalogue::default().plans[1]);
    assert_key_order(&plan);
    assert_key_order(&SubscriptionView {
        cancel_at_period_end: false,
        current_period_end: Some(time()),
        current_period_start: Some(time()),
        plan,
        plan_id: "basic".into(),
        status: "ACTIVE",
        store_limit: Some(3),
        stores_owned: 1,
    });
    assert_key_order(&super::storefront::SessionStarted { expires_at: time(), session_token: "s".into() });
    assert_key_order(&super::checkout_payment::GiftCardLookup {
        balance: usd,
        last_characters: "ABCD".into(),
        status: GiftCardStatus::Active,
    });
    assert_key_order(&PaymentIntentView {
        amount: usd,
        checkout_id: id,
        created_at: time(),
        id,
        last_error: Some("card_declined".into()),
        next_action: Some(serde_json::json!({"type": "promptpay_qr", "qrPayload": "0002"})),
        order_id: Some(id),
        payment_method: PaymentMethodKind::Promptpay,
        provider: "test".into(),
        status: IntentStatus::RequiresAction,
        updated_at: time(),
    });
    assert_key_order(&crate::account::directory::SessionAccess { role: Some("admin".into()), session_active: true });
    assert_key_order(&super::internal::Moved { cell: "c1".into(), store_id: id });
}
