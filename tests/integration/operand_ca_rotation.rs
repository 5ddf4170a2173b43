//! The operand CA rotates with an overlap: a TrustyAIService's serving Secret is watched through
//! a whole rotation (the new CA joins the bundle, the certificate moves onto it, the old CA
//! leaves), and at every change a client that still holds the bundle of the moment before
//! trusts the new certificate, and one that already holds the new bundle trusts the certificate
//! of the moment before. Replacing the CA outright breaks both.

use crate::support;
use support::control_planes::{self, Concern};

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use support::cluster::{minimal_spec, tas, tas_api, wait_for_webhooks_served};
use support::operator::Operator;
use trustyai_certs::material::parse_certificates;
use trustyai_certs::time::OffsetDateTime;
use trustyai_certs::verify::chains_to;

/// Due at two thirds of its life (about 55 s after the operand CA is made), and long enough
/// that the old CA outlives the rotation by more than a loaded machine's reconcile delay.
const OPERAND_CA_LIFETIME: &str = "90s";
const OVERLAP: &str = "8s";
/// A rotation is due after ~55 s and takes two overlaps; the rest is room for a loaded machine.
const ROTATION_TIMEOUT: Duration = Duration::from_secs(240);

/// What a client of the service sees in the Secret at one moment.
#[derive(Clone, PartialEq)]
struct Moment {
    certificate: Vec<u8>,
    bundle: Vec<u8>,
}

impl Moment {
    fn of(secret: &Secret) -> Option<Moment> {
        let data = secret.data.as_ref()?;
        Some(Moment {
            certificate: data.get("tls.crt")?.0.clone(),
            bundle: data.get("ca.crt")?.0.clone(),
        })
    }

    fn cas_in_bundle(&self) -> usize {
        parse_certificates("ca.crt", &self.bundle)
            .expect("the bundle parses")
            .len()
    }
}

/// How far a rotation has come, as the serving Secret's changes show it.
#[derive(Default)]
struct Rotation {
    /// The new CA joined the bundle while the certificate stayed.
    overlapped: bool,
    /// Then the certificate moved onto the new CA.
    moved: bool,
}

impl Rotation {
    /// The change from `before` to `now`: a client that still holds the previous bundle trusts
    /// the new certificate, and one that holds the new bundle trusts the previous certificate.
    /// `Ok(true)` once the rotation is complete (the old CA left after the move).
    fn step(&mut self, before: &Moment, now: &Moment) -> Result<bool, String> {
        let at = OffsetDateTime::now_utc();
        let change = format!(
            "certificate {}, CAs in the bundle {} -> {}",
            if now.certificate == before.certificate {
                "kept"
            } else {
                "re-issued"
            },
            before.cas_in_bundle(),
            now.cas_in_bundle()
        );
        if let Err(e) = chains_to(&now.certificate, &before.bundle, at) {
            return Err(format!(
                "{change}: a client holding the previous bundle rejects the new certificate: {e}"
            ));
        }
        if let Err(e) = chains_to(&before.certificate, &now.bundle, at) {
            return Err(format!(
                "{change}: a client holding the new bundle rejects the previous certificate: {e}"
            ));
        }
        if now.cas_in_bundle() == 2 && now.certificate == before.certificate {
            self.overlapped = true;
        }
        if self.overlapped && now.certificate != before.certificate {
            self.moved = true;
        }
        Ok(self.moved && now.cas_in_bundle() == 1)
    }
}

/// Follows the serving Secret's watch `stream` through a whole rotation, checking each change
/// ([`Rotation::step`]); the first check that fails, or `Ok` once the rotation is complete.
async fn watch_a_whole_rotation(
    stream: &mut (impl futures::Stream<Item = kube::Result<WatchEvent<Secret>>> + Unpin),
) -> Result<(), String> {
    let mut last: Option<Moment> = None;
    let mut rotation = Rotation::default();
    while let Some(event) = stream.try_next().await.expect("the watch goes on") {
        let secret = match event {
            WatchEvent::Added(s) | WatchEvent::Modified(s) => s,
            WatchEvent::Deleted(_) => panic!("the serving Secret was deleted"),
            WatchEvent::Bookmark(_) => continue,
            WatchEvent::Error(e) => panic!("watch error: {e:?}"),
        };
        let Some(now) = Moment::of(&secret) else {
            continue;
        };
        if let Some(before) = last.as_ref().filter(|before| **before != now)
            && rotation.step(before, &now)?
        {
            return Ok(());
        }
        last = Some(now);
    }
    panic!("the watch ended");
}

#[tokio::test]
async fn an_operand_ca_rotation_keeps_every_client_verifying() {
    let (_claim, cp, client, ns) =
        control_planes::exclusive_namespace(Concern::OperandCaRotation, "operand-ca").await;
    // The operand CA Secret lives in the operator namespace, new for this test.
    let ca_secret = trustyai_operator::cli::default_names::OPERAND_CA_SECRET;
    let mut operator = Operator::start(
        cp,
        &ns,
        &[
            "--create-webhook-configurations",
            "--operand-ca-lifetime",
            OPERAND_CA_LIFETIME,
            "--ca-overlap",
            OVERLAP,
        ],
    );
    operator.wait_ready(Duration::from_secs(60));
    wait_for_webhooks_served(&client, &ns, &operator).await;

    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let watch_params = WatchParams::default().fields("metadata.name=tas-tls");
    let mut stream = secrets
        .watch(&watch_params, "0")
        .await
        .expect("watch the serving Secret")
        .boxed();
    tas_api(&client, &ns, "v1")
        .create(&PostParams::default(), &tas("v1", "tas", minimal_spec()))
        .await
        .expect("created");

    let rotation = watch_a_whole_rotation(&mut stream);
    match tokio::time::timeout(ROTATION_TIMEOUT, rotation).await {
        Ok(Ok(())) => {}
        Ok(Err(refused)) => panic!(
            "a client refused a certificate during the rotation: {refused}\n{}",
            operator.logs()
        ),
        Err(_) => panic!(
            "no complete operand CA rotation within {ROTATION_TIMEOUT:?}\n{}",
            operator.logs()
        ),
    }

    // The CA Secret ends the rotation with the new CA alone.
    let ca = Api::<Secret>::namespaced(client.clone(), &ns)
        .get(ca_secret)
        .await
        .expect("the operand CA Secret");
    let keys: Vec<&String> = ca.data.as_ref().expect("data").keys().collect();
    assert_eq!(keys, ["ca.crt", "ca.key"], "{}", operator.logs());
    operator.stop_cleanly();
}
