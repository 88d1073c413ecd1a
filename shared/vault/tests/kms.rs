//! The vault against the KMS emulator: a sealed key opens for its own binding only.

use sluice_vault::{Binding, Vault, VaultError};
use uuid::Uuid;

async fn vault() -> Vault {
    let kms = aws_sdk_kms::Client::new(&sluice_blob::sdk_config().await);
    let created = kms.create_key().description("sluice-vault test").send().await.expect("a key");
    let key_id = created.key_metadata().expect("metadata").key_id().to_owned();
    Vault::new(kms, key_id)
}

#[tokio::test]
async fn a_sealed_key_opens_only_with_its_organizations_context() {
    let vault = vault().await;
    let (org, other_org) = (Uuid::new_v4(), Uuid::new_v4());
    let binding = Binding { secret_id: Uuid::new_v4(), org_id: Some(org), kind: Some(sluice_vault::API_KEY) };
    let sealed = vault.seal(binding, "sk-live-0123456789").await.expect("sealed");
    assert!(!sealed.ciphertext.windows(10).any(|w| w == b"sk-live-01"), "the value is stored plain");

    assert_eq!(vault.open(binding, &sealed).await.expect("opens"), "sk-live-0123456789");
    for wrong in [
        Binding { org_id: Some(other_org), ..binding },
        Binding { org_id: None, ..binding },
        Binding { secret_id: Uuid::new_v4(), ..binding },
        Binding { kind: Some(sluice_vault::AWS_CREDENTIALS), ..binding },
        Binding { kind: None, ..binding },
    ] {
        assert!(matches!(vault.open(wrong, &sealed).await, Err(VaultError::Unopenable)), "{wrong:?} opened it");
    }
    let mut tampered = sealed.clone();
    tampered.ciphertext[0] ^= 1;
    assert!(matches!(vault.open(binding, &tampered).await, Err(VaultError::Unopenable)));
}
