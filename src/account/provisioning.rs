//! Who may create an account: anyone (`--signup open`), or only the operator
//! (`--signup closed`, then `shopcell admin create-user`). Invitations are accepted either way:
//! a member's invitation is the store's choice, not a stranger's.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::model::Register;
use super::{AccountService, put_new_user};
use crate::error::{ApiError, ApiResult, Code};

/// `--signup`: whether `POST /auth/register` and a first social sign-in create accounts.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Signup {
    /// Anyone may register.
    #[default]
    Open,
    /// Accounts come from the operator (`shopcell admin create-user`) and from invitations.
    Closed,
}

impl Signup {
    /// 403 `SIGNUP_CLOSED` when closed.
    pub fn check(self) -> ApiResult<()> {
        match self {
            Signup::Open => Ok(()),
            Signup::Closed => Err(ApiError::new(Code::SIGNUP_CLOSED)),
        }
    }
}

/// What `shopcell admin create-user` made.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreatedUser {
    pub user_id: Uuid,
    pub email: String,
    /// The password chosen for the account when the operator gave none: shown this once, stored
    /// only as its hash.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generated_password: Option<String>,
}

/// A password nobody chose: 24 characters of 18 random bytes (144 bits).
pub fn generate_password() -> String {
    URL_SAFE_NO_PAD.encode(crate::util::random_bytes::<18>())
}

impl AccountService {
    /// The operator's account creation, open or closed sign-up alike: the rules of registration
    /// (a taken email is 409 `EMAIL_TAKEN`), no session. Without `password` one is generated and
    /// answered once.
    pub async fn create_user(&self, email: &str, name: &str, password: Option<String>) -> ApiResult<CreatedUser> {
        let generated = password.is_none().then(generate_password);
        let password = password.or_else(|| generated.clone()).unwrap_or_default();
        let user = self.new_user(Register { email: email.to_string(), password, name: name.to_string() }).await?;
        let u = user.clone();
        self.writer.write(None, move |tx| put_new_user(tx.raw(), &u)).await?;
        Ok(CreatedUser { user_id: user.id, email: user.email, generated_password: generated })
    }
}
