//! Mail jobs: the letter kept in its row composes to the bytes it would have given when sent,
//! rows of the older composed kind still deliver, and a letter that cannot be composed is dead.

use uuid::Uuid;

use super::*;
use crate::jobs::Job;
use crate::jobs::runner::Outcome;
use crate::mail::job::{LETTER, MAIL, run};
use crate::storage::codec::{decode, encode};

fn job(kind: &str, payload: Vec<u8>) -> Job {
    Job {
        id: Uuid::nil(),
        kind: kind.into(),
        payload,
        due_at: DATE_MS,
        attempts: 0,
        version: 0,
        lease: None,
        last_error: None,
        dead: false,
        created_at: DATE_MS,
    }
}

/// The outcome's name and reason (`Outcome` carries effects, so it has no `Debug`).
fn said(outcome: &Outcome) -> (&'static str, Option<&str>) {
    match outcome {
        Outcome::Done(_) => ("done", None),
        Outcome::Again(..) => ("again", None),
        Outcome::Failed(why, _) => ("failed", Some(why)),
        Outcome::Dead(why, _) => ("dead", Some(why)),
    }
}

fn eml(dir: &tempfile::TempDir) -> Vec<u8> {
    std::fs::read(dir.path().join("mail/0190a3b4-5c6d-7e8f-9a0b-1c2d3e4f5a6b@shopcell.eml")).unwrap()
}

#[test]
fn a_kept_letter_composes_to_the_same_bytes() {
    let (mailer, _dir) = file_mailer();
    for template in Template::ALL {
        let sent = letter(template, store("Linen & Co", Some("hello@shops.example"), Some("help@linen.example")));
        let kept: Letter = decode(&encode(&sent).unwrap()).unwrap();
        assert_eq!(kept.values, sent.values, "{template:?}");
        assert_eq!(kept.sender, sent.sender);
        assert_eq!(mailer.compose(&kept).unwrap(), mailer.compose(&sent).unwrap(), "{template:?}");
    }
}

#[tokio::test]
async fn a_letter_job_is_composed_and_delivered_when_it_runs() {
    let (mailer, dir) = file_mailer();
    let sent = letter(Template::ShippingConfirmation, Sender::Platform);
    let outcome = run(&mailer, &job(LETTER.name, encode(&sent).unwrap())).await;
    assert_eq!(said(&outcome), ("done", None));
    assert_eq!(eml(&dir), mailer.compose(&sent).unwrap().bytes);
}

#[tokio::test]
async fn a_composed_row_of_the_older_kind_still_delivers() {
    let (mailer, dir) = file_mailer();
    let composed = mailer.compose(&letter(Template::OrderConfirmation, Sender::Platform)).unwrap();
    let outcome = run(&mailer, &job(MAIL.name, encode(&composed).unwrap())).await;
    assert_eq!(said(&outcome), ("done", None));
    assert_eq!(eml(&dir), composed.bytes);
}

#[tokio::test]
async fn a_letter_that_cannot_be_composed_is_dead_and_sends_nothing() {
    let (mailer, dir) = file_mailer();
    let mut bad = letter(Template::PasswordReset, Sender::Platform);
    bad.to = "not an address".into();
    let outcome = run(&mailer, &job(LETTER.name, encode(&bad).unwrap())).await;
    let (name, why) = said(&outcome);
    assert_eq!(name, "dead");
    assert!(why.unwrap().contains("address"), "{why:?}");
    let outcome = run(&mailer, &job(LETTER.name, b"garbage".to_vec())).await;
    assert_eq!(said(&outcome), ("dead", Some("the stored letter does not decode")));
    assert!(!dir.path().join("mail").exists() || std::fs::read_dir(dir.path().join("mail")).unwrap().count() == 0);
}
